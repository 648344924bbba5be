"""The race exercises' checkers: each catalogued wrong answer fails the same way on every run,
with the schedule that shows it; each right answer passes every explored schedule; and the
process race that follows claim_one's schedules still widens its window the same way.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claim_one_answers import PICK, TAKE
from wrong_claims import (
    RACE_RIGHT_ANSWERS,
    RACE_WRONG_ANSWERS,
    deferred_begin,
    gives_up_after_losing,
    ignores_the_rowcount,
    look_then_write,
    plain_begin_look_then_write,
    take_ignoring_the_rowcount,
)

from agent17.exercises import EXERCISES, _jobs, check
from agent17.exercises._jobs import SlowSelectConnection, make_jobs, open_checked
from agent17.exercises.effects import NotesFile

Looking = tuple[SlowSelectConnection, threading.Barrier]
RUNS = 5
FOUND_AT = re.compile(r"found at schedule (\d+) \(every run finds this same one\):\n")
HELD = re.compile(r"every one of (\d+) schedules held")

WRONG = [
    pytest.param(name, candidate, fragment, id=f"{name}: {label}")
    for name, answers in RACE_WRONG_ANSWERS.items()
    for label, candidate, fragment in answers
]
# The reference solutions are checked five times by test_exercises.py.
RIGHT = [
    pytest.param(name, candidate, id=f"{name}: {candidate.__name__}")
    for name, candidates in RACE_RIGHT_ANSWERS.items()
    for candidate in candidates
]


def test_the_catalogue_holds_every_kind_of_race_mistake() -> None:
    assert set(RACE_WRONG_ANSWERS) == {
        "take_if_pending",
        "claim_one",
        "fenced_effect",
        "append_note",
    }
    assert sum(len(answers) for answers in RACE_WRONG_ANSWERS.values()) >= 35


@pytest.mark.processes
@pytest.mark.parametrize(("name", "candidate", "fragment"), WRONG)
def test_a_catalogued_wrong_answer_fails_with_the_same_words_on_every_run(
    name: str, candidate: Callable[..., Any], fragment: str
) -> None:
    feedbacks = set()
    for _ in range(RUNS):
        result = check(name, candidate)
        assert not result.passed
        feedbacks.add(result.feedback)
    assert len(feedbacks) == 1, feedbacks
    assert fragment in feedbacks.pop()


@pytest.mark.processes
@pytest.mark.parametrize(("name", "candidate"), RIGHT)
def test_a_right_answer_passes_every_explored_schedule_twice_alike(
    name: str, candidate: Callable[..., Any]
) -> None:
    feedbacks = set()
    for _ in range(2):
        result = check(name, candidate)
        assert result.passed, result.feedback
        feedbacks.add(result.feedback)
    assert len(feedbacks) == 1, feedbacks
    held = HELD.search(feedbacks.pop())  # it says how many schedules it played
    assert held is not None and int(held.group(1)) >= 2


@pytest.mark.parametrize(
    ("name", "candidate"),
    [
        ("claim_one", EXERCISES["claim_one"].starter),
        ("claim_one", ignores_the_rowcount),
        ("claim_one", gives_up_after_losing),
        ("claim_one", deferred_begin),
        ("take_if_pending", EXERCISES["take_if_pending"].starter),
        ("take_if_pending", look_then_write),
        ("take_if_pending", take_ignoring_the_rowcount),
        ("take_if_pending", plain_begin_look_then_write),
    ],
)
def test_the_failing_schedule_is_found_deterministically(
    name: str, candidate: Callable[..., Any]
) -> None:
    first, second = check(name, candidate), check(name, candidate)
    assert not first.passed
    found = FOUND_AT.search(first.feedback)
    assert found is not None, first.feedback
    schedule = first.feedback[found.end() :]
    assert second.feedback[found.end() :] == schedule  # the same schedule text, twice
    assert FOUND_AT.search(second.feedback).group(1) == found.group(1)  # type: ignore[union-attr]
    assert lanes_used(schedule) == set(schedule.splitlines()[0].split())  # a race, not a solo


def lanes_used(schedule: str) -> set[str]:
    """The lanes of a timeline that have a row in them (its legend lines left out)."""
    header, *rows = schedule.splitlines()
    starts = {header.index(name): name for name in header.split()}
    margin = min(starts)
    used = set()
    for line in rows:
        if re.match(r"\s*[A-Z]+( \d+)?: ", line):
            continue  # the legend: "SELECT: SELECT id FROM ..."
        column = next(index for index, char in enumerate(line) if index >= margin and char != " ")
        used.add(starts[column])
    return used


def test_the_starters_double_take_is_shown_statement_by_statement() -> None:
    feedback = check("claim_one", EXERCISES["claim_one"].starter).feedback
    assert "were both told they got job 1" in feedback
    schedule = feedback[FOUND_AT.search(feedback).end() :].splitlines()  # type: ignore[union-attr]
    header, rows = schedule[0], schedule[1:]
    bob = header.index("bob")
    # Both looked before either wrote, and both were told job 1.
    looks = [line for line in rows if "SELECT → (1,)" in line]
    assert len(looks) == 2 and {line.index("SELECT") == bob for line in looks} == {True, False}
    writes = [index for index, line in enumerate(rows) if "UPDATE" in line and "row" in line]
    assert max(rows.index(line) for line in looks) < min(writes)
    assert sum("returns 1" in line for line in rows) == 2


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
