"""The exercises: every solution passes, every starter fails, and typical wrong answers fail
with feedback that names the mistake. claim_one's wrong answers are run several times: a
checker that catches a race only sometimes would teach the wrong lesson.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from claim_one_answers import (
    deferred_begin,
    ignores_the_rowcount,
    leaves_its_transaction_open,
    one_statement,
    select_then_update,
    takes_the_newest,
)

from agent17 import Task, TaskStatus
from agent17.exercises import EXERCISES, check
from agent17.exercises._bounded import run_bounded
from agent17.exercises.effects import NotesFile


def test_there_are_at_least_eight_exercises_in_course_order() -> None:
    assert len(EXERCISES) >= 8
    assert {"lease_is_live", "ready_in_order", "claim_one"} <= set(EXERCISES)
    notebooks = [exercise.notebook for exercise in EXERCISES.values()]
    assert notebooks == sorted(notebooks)
    for name, exercise in EXERCISES.items():
        assert exercise.name == name and exercise.title and len(exercise.hint) > 40


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_solution_passes_and_the_starter_fails_with_feedback(name: str) -> None:
    exercise = EXERCISES[name]
    assert check(name, exercise.solution).passed
    failed = check(name, exercise.starter)
    assert not failed.passed
    assert len(failed.feedback) > 30


def fails_with(name: str, candidate: Callable[..., Any], *fragments: str) -> str:
    result = check(name, candidate)
    assert not result.passed, f"{name}: {candidate.__name__} passed"
    for fragment in fragments:
        assert fragment in result.feedback, (fragment, result.feedback)
    return result.feedback


# -- a candidate that raises, hangs, or is not a function ------------------------------------


def test_a_candidate_that_raises_is_a_failed_check_naming_the_error() -> None:
    def broken(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        raise ZeroDivisionError("oops")

    fails_with("lease_is_live", broken, "ZeroDivisionError", "oops", "broken")


def test_a_candidate_that_never_returns_fails_after_a_bounded_time() -> None:
    def spins(tasks: list[Task]) -> list[str]:
        while True:
            pass

    started = time.monotonic()
    result = run_bounded(lambda: EXERCISES["ready_in_order"].checker(spins), timeout=2.0)
    assert not result.passed and "did not finish within 2 seconds" in result.feedback
    assert time.monotonic() - started < 10


def test_an_unknown_exercise_or_a_non_function_is_a_failed_check() -> None:
    assert "there is no exercise" in check("no_such", lambda: None).feedback
    assert "pass your function" in check("claim_one", "SELECT 1").feedback


def test_what_a_failing_candidate_printed_is_shown() -> None:
    def chatty(tasks: list[Task]) -> list[str]:
        print("I think A and C")
        return []

    fails_with("ready_in_order", chatty, "your code printed: I think A and C")


# -- ready_in_order ----------------------------------------------------------------------------


def test_ready_in_order_wrong_answers_are_named() -> None:
    def sorted_by_id(tasks: list[Task]) -> list[str]:
        done = {t.id for t in tasks if t.status is TaskStatus.COMPLETED}
        ready = [t for t in tasks if t.status is TaskStatus.PENDING]
        return sorted(t.id for t in ready if all(d in done for d in t.blocked_by))

    def in_progress_counts_as_done(tasks: list[Task]) -> list[str]:
        started = {t.id for t in tasks if t.status is not TaskStatus.PENDING}
        return [
            t.id
            for t in tasks
            if t.status is TaskStatus.PENDING and all(d in started for d in t.blocked_by)
        ]

    def no_dependencies_only(tasks: list[Task]) -> list[str]:
        return [t.id for t in tasks if t.status is TaskStatus.PENDING and not t.blocked_by]

    fails_with("ready_in_order", sorted_by_id, "wrong order", "never sort by id")
    fails_with("ready_in_order", in_progress_counts_as_done, "not ready", "completed")
    fails_with("ready_in_order", no_dependencies_only, "claim_next would take")


# -- claim_query -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("SELECT id FROM work WHERE status = 'pending' ORDER BY id LIMIT 1", "unmet = 0"),
        ("SELECT id FROM work WHERE status = 'pending' AND unmet = 0", "one row only"),
        (
            "SELECT id FROM work WHERE status = 'pending' AND unmet = 0 ORDER BY id DESC LIMIT 1",
            "first",
        ),
        (
            "SELECT min(id) FROM work WHERE status || '' = 'pending' AND unmet + 0 = 0",
            "work_ready",
        ),
        ("DELETE FROM work", "one SELECT"),
        ("SELECT id FROM nowhere", "refused"),
    ],
)
def test_claim_query_wrong_answers_are_named(sql: str, fragment: str) -> None:
    fails_with("claim_query", lambda: sql, fragment)


# -- lease_is_live -----------------------------------------------------------------------------


def test_lease_is_live_wrong_answers_are_named() -> None:
    def closed_interval(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        return claimed_at <= now <= lease_expires_at

    def compares_text(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        return claimed_at.isoformat() <= now.isoformat() < lease_expires_at.isoformat()

    def forgets_the_start(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        return now < lease_expires_at

    fails_with("lease_is_live", closed_interval, "expiry instant", "half-open")
    fails_with("lease_is_live", compares_text, "Tokyo")
    fails_with("lease_is_live", forgets_the_start, "before the claim")


# -- take_if_pending -----------------------------------------------------------------------------


def test_take_if_pending_wrong_answers_are_named() -> None:
    def ignores_rowcount(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
        connection.execute(
            "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'",
            (owner, job_id),
        )
        return True

    def reads_first(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
        row = connection.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        connection.execute(
            "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?", (owner, job_id)
        )
        return row is not None and row[0] == "pending"

    def never(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
        return False

    fails_with("take_if_pending", ignores_rowcount, "rowcount")
    fails_with("take_if_pending", reads_first, "someone else's job")
    fails_with("take_if_pending", never, "job 1 was pending")


# -- claim_one: caught every time -----------------------------------------------------------


CLAIM_ONE_WRONG = [
    (select_then_update, ("got job", "two separate steps")),
    (ignores_the_rowcount, ("rowcount",)),
    (deferred_begin, ("database is locked", "BEGIN IMMEDIATE")),
    (takes_the_newest, ("lowest pending id",)),
    (leaves_its_transaction_open, ("still open",)),
]


@pytest.mark.processes
@pytest.mark.parametrize(
    ("candidate", "fragments"), CLAIM_ONE_WRONG, ids=lambda v: getattr(v, "__name__", "")
)
def test_each_wrong_claim_one_is_caught_on_every_run(
    candidate: Callable[..., Any], fragments: tuple[str, ...]
) -> None:
    for _ in range(5):
        fails_with("claim_one", candidate, *fragments)


def test_claim_one_as_one_statement_passes_too() -> None:
    assert check("claim_one", one_statement).passed


def test_a_candidate_defined_like_a_notebook_cell_works() -> None:
    # A notebook cell's function lives in __main__ and uses names from other cells.
    cell = (
        "ORDER = 'ORDER BY id LIMIT 1'\n"
        "def claim_one(connection, owner):\n"
        "    row = connection.execute(\n"
        "        'UPDATE jobs SET status = ? , owner = ? WHERE id = (SELECT id FROM jobs'\n"
        "        ' WHERE status = \\'pending\\' ' + ORDER + ') RETURNING id', ('taken', owner)\n"
        "    ).fetchone()\n"
        "    return None if row is None else row[0]\n"
    )
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(cell, namespace)
    assert check("claim_one", namespace["claim_one"]).passed


# -- fenced_effect -------------------------------------------------------------------------------


def test_fenced_effect_wrong_answers_are_named() -> None:
    def trusts_its_memory(store: Any, claim: Any, owner: str, effect: Callable[[], None]) -> bool:
        if claim.task.owner == owner:
            effect()
            return True
        return False

    def lets_the_error_escape(
        store: Any, claim: Any, owner: str, effect: Callable[[], None]
    ) -> bool:
        store.verify_claim(claim.task.id, owner, claim.claim_token)
        effect()
        return True

    def uses_its_own_clock(store: Any, claim: Any, owner: str, effect: Callable[[], None]) -> bool:
        if datetime.now(claim.lease_expires_at_utc.tzinfo) >= claim.lease_expires_at_utc:
            return False
        effect()
        return True

    fails_with("fenced_effect", trusts_its_memory, "completed")
    fails_with("fenced_effect", lets_the_error_escape, "escape", "answer False")
    fails_with("fenced_effect", uses_its_own_clock, "must run")


# -- next_pass ---------------------------------------------------------------------------------


def test_next_pass_wrong_answers_are_named() -> None:
    def work_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
        if ready and latest_plan not in ("pending", "rejected"):
            return f"claimed {ready[0]}"
        if mailbox:
            return "message_handled" if mailbox[0] == "text" else "protocol_handled"
        return "plan_blocked" if latest_plan in ("pending", "rejected") else "idle"

    def ignores_the_gate(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
        if mailbox:
            return "message_handled" if mailbox[0] == "text" else "protocol_handled"
        return f"claimed {ready[0]}" if ready else "idle"

    def newest_message_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
        if mailbox:
            return "message_handled" if mailbox[-1] == "text" else "protocol_handled"
        if latest_plan in ("pending", "rejected"):
            return "plan_blocked"
        return f"claimed {ready[0]}" if ready else "idle"

    fails_with("next_pass", work_first, "mailbox comes before the board")
    fails_with("next_pass", ignores_the_gate, "plan", "before claim_next")
    fails_with("next_pass", newest_message_first, "text, shutdown_request")


# -- wait_or_wake ------------------------------------------------------------------------------


def test_wait_or_wake_wrong_answers_are_named() -> None:
    def busy(seconds: float, wake: threading.Event) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if wake.is_set():
                return True
        return False

    def checks_once(seconds: float, wake: threading.Event) -> bool:
        if wake.is_set():
            return True
        time.sleep(seconds)
        return False

    def upside_down(seconds: float, wake: threading.Event) -> bool:
        return not wake.wait(seconds)

    fails_with("wait_or_wake", busy, "CPU")
    fails_with("wait_or_wake", checks_once, "went on waiting")
    fails_with("wait_or_wake", upside_down, "say True when woken")


# -- append_note -------------------------------------------------------------------------------


def test_append_note_wrong_answers_are_named() -> None:
    def locks_only_the_write(notes: NotesFile, line: str) -> None:
        text = notes.read()
        with notes.lock():
            notes.write(text + line + "\n")

    def forgets_the_newline(notes: NotesFile, line: str) -> None:
        notes.append(line)

    def appends_twice(notes: NotesFile, line: str) -> None:
        notes.append(line + "\n")
        notes.append(line + "\n")

    fails_with("append_note", locks_only_the_write, "were lost")
    fails_with("append_note", forgets_the_newline, "run together")
    fails_with("append_note", appends_twice, "doubled")

    def appends(notes: NotesFile, line: str) -> None:
        notes.append(line + "\n")

    assert check("append_note", appends).passed
