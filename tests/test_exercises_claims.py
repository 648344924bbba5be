"""claim_one's checker: its feedback is the same text on every run (a notebook commits it and
nbval compares it), a race is found however the candidate reaches SQLite, and a right answer
that holds no SQLite write lock while it looks still passes.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claim_one_answers import (
    PICK,
    TAKE,
    deferred_begin,
    gives_up_after_losing,
    ignores_the_rowcount,
    through_a_cursor,
    two_transactions,
    under_a_thread_lock,
)

from agent17.exercises import EXERCISES, _jobs, check
from agent17.exercises._jobs import SlowSelectConnection, make_jobs, open_checked
from agent17.exercises.effects import NotesFile

Looking = tuple[SlowSelectConnection, threading.Barrier]

EVERY_RACER = "bob, carol, dave and erin all got job 1: your SELECT and UPDATE are two separate"


@pytest.mark.processes
@pytest.mark.parametrize(
    ("candidate", "opening"),
    [
        (EXERCISES["claim_one"].starter, EVERY_RACER),
        (two_transactions, EVERY_RACER),
        (through_a_cursor, EVERY_RACER),
        (
            ignores_the_rowcount,
            "4 processes were told they got job 1, but the table gives it to one of them: the"
            " UPDATE of the other 3 changed no row",
        ),
        (
            deferred_begin,
            # No "(line N of ...)": that names the student's code, and these answers live in
            # the package's catalogue.
            "while 4 processes raced, 3 of them failed: your code raised OperationalError:"
            " database is locked. With a plain BEGIN",
        ),
        (gives_up_after_losing, "a call returned None while jobs were still pending"),
        (under_a_thread_lock, "Your code holds a threading lock: it keeps out the other threads"),
    ],
    ids=[
        "starter",
        "two_transactions",
        "through_a_cursor",
        "ignores_rowcount",
        "deferred",
        "gives_up",
        "thread_lock",
    ],
)
def test_a_racy_answer_gets_the_same_feedback_on_every_run(
    candidate: Callable[..., Any], opening: str
) -> None:
    feedbacks = set()
    for _ in range(4):
        result = check("claim_one", candidate)
        assert not result.passed
        feedbacks.add(result.feedback)
    assert len(feedbacks) == 1, feedbacks
    assert feedbacks.pop().startswith(opening)


@pytest.fixture
def jobs_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "jobs.sqlite3"
    make_jobs(path, 3)
    yield path


@pytest.fixture
def looking(jobs_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Looking]:
    """The checker's connection with a first-look barrier nobody else comes to: a wait
    times out (quickly) and breaks it."""
    monkeypatch.setattr(_jobs, "FIRST_LOOK_TIMEOUT_SECONDS", 0.05)
    connection = open_checked(jobs_file)
    barrier = threading.Barrier(2)
    connection.first_look = barrier
    try:
        yield connection, barrier
    finally:
        connection.close()


def test_the_first_look_waits_for_the_others_in_autocommit(looking: Looking) -> None:
    connection, barrier = looking
    assert connection.execute(PICK).fetchone() == (1,)
    assert barrier.broken
    assert connection.first_look is None


@pytest.mark.parametrize("begin", ["BEGIN IMMEDIATE", "begin exclusive"])
def test_the_first_look_does_not_wait_while_holding_the_write_lock(
    looking: Looking, begin: str
) -> None:
    connection, barrier = looking
    connection.execute(begin)
    assert connection.execute(PICK).fetchone() == (1,)
    connection.execute("UPDATE jobs SET status = 'taken', owner = 'bob' WHERE id = 1")
    connection.execute("COMMIT")
    assert not barrier.broken and barrier.n_waiting == 0
    assert connection.first_look is None


def test_a_look_under_the_write_lock_taken_after_it_waits_when_the_lock_ends(
    looking: Looking,
) -> None:
    # BEGIN IMMEDIATE, the look, COMMIT, then the take: the look was not protected after
    # all, so the first-look wait comes at the COMMIT, with the lock already let go.
    connection, barrier = looking
    connection.execute("BEGIN IMMEDIATE")
    assert connection.execute(PICK).fetchone() == (1,)
    assert not barrier.broken  # no wait while the lock is held
    connection.execute("COMMIT")
    assert barrier.broken and not connection.in_transaction


def test_the_checkers_connection_reverses_unordered_selects(jobs_file: Path) -> None:
    connection = open_checked(jobs_file)
    try:
        unordered = "SELECT id FROM jobs WHERE status = 'pending' LIMIT 1"
        assert connection.execute(unordered).fetchone() != (1,)
        assert connection.execute(PICK).fetchone() == (1,)
    finally:
        connection.close()


def test_a_deferred_transaction_still_waits_at_the_first_look(looking: Looking) -> None:
    connection, barrier = looking
    connection.execute("BEGIN")
    connection.execute(PICK).fetchone()
    connection.execute("COMMIT")
    assert barrier.broken


def test_missed_updates_are_counted_through_execute_and_cursors(jobs_file: Path) -> None:
    connection = open_checked(jobs_file)
    try:
        assert isinstance(connection, SlowSelectConnection)
        connection.execute(TAKE + " AND status = 'pending'", ("bob", 1))
        connection.execute(TAKE + " AND status = 'pending'", ("carol", 1))
        connection.cursor().execute(TAKE + " AND status = 'pending'", ("dave", 1))
        assert connection.missed_updates == 2
    finally:
        connection.close()


def under_a_file_lock(connection: sqlite3.Connection, owner: str) -> int | None:
    # Right, without SQLite's write lock: every process serialises on one lock file, so the
    # first look of the process holding it waits at the barrier until it times out.
    database = connection.execute("PRAGMA database_list").fetchone()[2]
    descriptor = os.open(f"{database}.claim-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        row = connection.execute(PICK).fetchone()
        if row is None:
            return None
        connection.execute(TAKE, (owner, row[0]))
        return int(row[0])
    finally:
        os.close(descriptor)


@pytest.mark.processes
def test_a_right_answer_that_serialises_without_sqlite_still_passes() -> None:
    result = check("claim_one", under_a_file_lock)
    assert result.passed, result.feedback


def test_the_lost_edit_starter_always_fails_as_a_lost_edit_with_the_same_words() -> None:
    # Notebook 07 commits this feedback. A half-written file seen by a reader used
    # to make it say "doubled or run together" now and then, the wrong diagnosis.
    feedbacks = set()
    for _ in range(5):
        result = check("append_note", EXERCISES["append_note"].starter)
        assert not result.passed
        feedbacks.add(result.feedback)
    assert len(feedbacks) == 1, feedbacks
    assert feedbacks.pop().startswith("some of the 60 notes were lost")


def test_a_notes_file_write_replaces_the_file_whole_and_leaves_no_scratch_file(
    tmp_path: Path,
) -> None:
    notes = NotesFile(tmp_path / "NOTES.md")
    notes.write("one\n")
    before = os.stat(notes.path).st_ino
    notes.write("one\ntwo\n")
    assert notes.read() == "one\ntwo\n"
    assert os.stat(notes.path).st_ino != before  # renamed over, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["NOTES.md"]
