"""The classic wrong answers a class writes, per exercise, each with the feedback it must get.

    from agent17.exercises.wrong_answers import WRONG_ANSWERS

    for wrong in WRONG_ANSWERS["claim_one"]:
        print(wrong.label, check("claim_one", wrong.candidate))

Every entry must fail its check on every run, with feedback containing its
`fragment` (a checker that lets one through now and then would teach the
wrong lesson). The tests run the whole catalogue every time, and
benchmarks/exercise_reliability.py runs it many times and counts. `RIGHT_ANSWERS`
holds answers other than the reference solution that must pass.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from agent17.domain import Task, TaskClaim, TaskError, TaskStatus
from agent17.exercises.effects import NotesFile
from agent17.store.sqlite import SqliteTaskStore


@dataclass(frozen=True, slots=True)
class WrongAnswer:
    """A wrong answer: what it gets wrong, the function, and words its feedback must contain."""

    label: str
    candidate: Callable[..., Any]
    fragment: str


# -- ready_in_order ------------------------------------------------------------------------


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


# -- lease_is_live --------------------------------------------------------------------------


def closed_interval(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at <= now <= lease_expires_at


def compares_text(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at.isoformat() <= now.isoformat() < lease_expires_at.isoformat()


def forgets_the_start(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return now < lease_expires_at


# -- take_if_pending -------------------------------------------------------------------------

_TAKE_IF = "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'"
_TAKE_ANY = "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?"


def take_ignoring_the_rowcount(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    connection.execute(_TAKE_IF, (owner, job_id))
    return True


def takes_blindly_reports_what_it_saw(
    connection: sqlite3.Connection, job_id: int, owner: str
) -> bool:
    row = connection.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
    connection.execute(_TAKE_ANY, (owner, job_id))
    return row is not None and row[0] == "pending"


def look_then_write(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    row = connection.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None or row[0] != "pending":
        return False
    connection.execute(_TAKE_ANY, (owner, job_id))
    return True


def returns_the_rowcount(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    rowcount: Any = connection.execute(_TAKE_IF, (owner, job_id)).rowcount
    return rowcount  # type: ignore[no-any-return]  # the mistake: an int, not a bool


def never_takes(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    return False


# -- claim_one ---------------------------------------------------------------------------------

PICK: Final = "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1"
TAKE: Final = _TAKE_ANY


def select_then_update(connection: sqlite3.Connection, owner: str) -> int | None:
    """Look, then take, each its own autocommit statement (no transaction at all)."""
    row = connection.execute(PICK).fetchone()
    if row is None:
        return None
    connection.execute(TAKE, (owner, row[0]))
    return int(row[0])


def two_transactions(connection: sqlite3.Connection, owner: str) -> int | None:
    """A transaction around each step: the gap between them is still there."""
    connection.execute("BEGIN")
    row = connection.execute(PICK).fetchone()
    connection.execute("COMMIT")
    if row is None:
        return None
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(TAKE, (owner, row[0]))
    connection.execute("COMMIT")
    return int(row[0])


def ignores_the_rowcount(connection: sqlite3.Connection, owner: str) -> int | None:
    """The conditional UPDATE, but the id is returned whether or not it changed a row."""
    row = connection.execute(PICK).fetchone()
    if row is None:
        return None
    connection.execute(TAKE + " AND status = 'pending'", (owner, row[0]))
    return int(row[0])


def gives_up_after_losing(connection: sqlite3.Connection, owner: str) -> int | None:
    """The conditional UPDATE and its rowcount, but a lost race is taken for 'nothing left'."""
    row = connection.execute(PICK).fetchone()
    if row is None:
        return None
    cursor = connection.execute(TAKE + " AND status = 'pending'", (owner, row[0]))
    return int(row[0]) if cursor.rowcount == 1 else None


def deferred_begin(connection: sqlite3.Connection, owner: str) -> int | None:
    """One transaction, but a plain (deferred) BEGIN: the read cannot always become a write."""
    connection.execute("BEGIN")
    try:
        row = connection.execute(PICK).fetchone()
        if row is not None:
            connection.execute(TAKE, (owner, row[0]))
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return None if row is None else int(row[0])


def takes_the_newest(connection: sqlite3.Connection, owner: str) -> int | None:
    """Atomic, but the wrong job: the highest pending id instead of the lowest."""
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' ORDER BY id DESC LIMIT 1) RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else int(row[0])


def leaves_its_transaction_open(connection: sqlite3.Connection, owner: str) -> int | None:
    """BEGIN IMMEDIATE with no COMMIT: nobody else can ever write."""
    connection.execute("BEGIN IMMEDIATE")
    row = connection.execute(PICK).fetchone()
    if row is not None:
        connection.execute(TAKE, (owner, row[0]))
    return None if row is None else int(row[0])


def through_a_cursor(connection: sqlite3.Connection, owner: str) -> int | None:
    """select_then_update through a cursor of the connection: the same race."""
    cursor = connection.cursor()
    row = cursor.execute(PICK).fetchone()
    if row is None:
        return None
    cursor.execute(TAKE, (owner, row[0]))
    return int(row[0])


_ONE_PROCESS_LOCK: Final = threading.Lock()


def under_a_thread_lock(connection: sqlite3.Connection, owner: str) -> int | None:
    """select_then_update under a threading.Lock: a lock of one process, not of four."""
    with _ONE_PROCESS_LOCK:
        return select_then_update(connection, owner)


def one_statement(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right: look and take in one UPDATE ... RETURNING."""
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' ORDER BY id LIMIT 1) RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else int(row[0])


# -- fenced_effect --------------------------------------------------------------------------

Effect = Callable[[], None]


def trusts_its_memory(store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect) -> bool:
    if claim.task.owner == owner:
        effect()
        return True
    return False


def lets_the_error_escape(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    store.verify_claim(claim.task.id, owner, claim.claim_token)
    effect()
    return True


def uses_its_own_clock(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    if datetime.now(claim.lease_expires_at_utc.tzinfo) >= claim.lease_expires_at_utc:
        return False
    effect()
    return True


def owner_and_status_only(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    task = store.get_task(claim.task.id)
    if task.owner != owner or task.status is not TaskStatus.IN_PROGRESS:
        return False
    effect()
    return True


def fence_after_the_effect(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    effect()
    try:
        store.verify_claim(claim.task.id, owner, claim.claim_token)
    except TaskError:
        return False
    return True


# -- next_pass -----------------------------------------------------------------------------


def _message(mailbox: list[str], index: int) -> str:
    return "message_handled" if mailbox[index] == "text" else "protocol_handled"


def work_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if ready and latest_plan not in ("pending", "rejected"):
        return f"claimed {ready[0]}"
    if mailbox:
        return _message(mailbox, 0)
    return "plan_blocked" if latest_plan in ("pending", "rejected") else "idle"


def ignores_the_gate(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    return f"claimed {ready[0]}" if ready else "idle"


def newest_message_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, -1)
    if latest_plan in ("pending", "rejected"):
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# -- wait_or_wake ----------------------------------------------------------------------------


def busy_waits(seconds: float, wake: threading.Event) -> bool:
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


# -- append_note -----------------------------------------------------------------------------


def locks_only_the_write(notes: NotesFile, line: str) -> None:
    text = notes.read()
    with notes.lock():
        notes.write(text + line + "\n")


def forgets_the_newline(notes: NotesFile, line: str) -> None:
    notes.append(line)


def appends_twice(notes: NotesFile, line: str) -> None:
    notes.append(line + "\n")
    notes.append(line + "\n")


def appends(notes: NotesFile, line: str) -> None:
    """Right: O_APPEND adds the line in one system call."""
    notes.append(line + "\n")


def _sql(text: str) -> Callable[[], str]:
    def claim_query() -> str:
        return text

    return claim_query


W = WrongAnswer
WRONG_ANSWERS: Final[Mapping[str, tuple[WrongAnswer, ...]]] = {
    "ready_in_order": (
        W("sorts by id", sorted_by_id, "never sort by id"),
        W("in progress counts as done", in_progress_counts_as_done, "not ready"),
        W("only tasks without dependencies", no_dependencies_only, "claim_next would take"),
    ),
    "claim_query": (
        W(
            "forgets unmet",
            _sql("SELECT id FROM work WHERE status = 'pending' ORDER BY id LIMIT 1"),
            "unmet = 0",
        ),
        W(
            "every ready row",
            _sql("SELECT id FROM work WHERE status = 'pending' AND unmet = 0"),
            "one row only",
        ),
        W(
            "the last one",
            _sql(
                "SELECT id FROM work WHERE status = 'pending' AND unmet = 0"
                " ORDER BY id DESC LIMIT 1"
            ),
            "first",
        ),
        W(
            "defeats the index",
            _sql("SELECT min(id) FROM work WHERE status || '' = 'pending' AND unmet + 0 = 0"),
            "work_ready",
        ),
        W("not a SELECT", _sql("DELETE FROM work"), "one SELECT"),
        W("no such table", _sql("SELECT id FROM nowhere"), "refused"),
    ),
    "lease_is_live": (
        W("closed interval", closed_interval, "half-open"),
        W("compares text", compares_text, "Tokyo"),
        W("forgets the start", forgets_the_start, "before the claim"),
    ),
    "take_if_pending": (
        W("ignores the rowcount", take_ignoring_the_rowcount, "Answer with what your UPDATE did"),
        W("unconditional UPDATE", takes_blindly_reports_what_it_saw, "someone else's job"),
        W("look, then write", look_then_write, "wrote over erin's claim"),
        W("returns the rowcount", returns_the_rowcount, "must return a bool"),
        W("never takes", never_takes, "job 1 was pending"),
    ),
    "claim_one": (
        W("select, then update", select_then_update, "two separate steps"),
        W("two transactions", two_transactions, "two separate steps"),
        W("through a cursor", through_a_cursor, "two separate steps"),
        W("ignores the rowcount", ignores_the_rowcount, "changed no row"),
        W("gives up after losing a race", gives_up_after_losing, "returned None while jobs"),
        W("deferred BEGIN", deferred_begin, "BEGIN IMMEDIATE"),
        W("takes the newest", takes_the_newest, "lowest pending id"),
        W("transaction left open", leaves_its_transaction_open, "still open"),
        W("a threading.Lock", under_a_thread_lock, "its own copy of the lock"),
    ),
    "fenced_effect": (
        W("trusts its memory", trusts_its_memory, "completed"),
        W("lets the error escape", lets_the_error_escape, "answer False"),
        W("its own clock", uses_its_own_clock, "must run"),
        W("owner and status, not the token", owner_and_status_only, "claimed D again"),
        W("fences after the effect", fence_after_the_effect, "the effect ran"),
    ),
    "next_pass": (
        W("work first", work_first, "mailbox comes before the board"),
        W("ignores the plan gate", ignores_the_gate, "before claim_next"),
        W("newest message first", newest_message_first, "text, shutdown_request"),
    ),
    "wait_or_wake": (
        W("busy-waits", busy_waits, "CPU"),
        W("checks once, then sleeps", checks_once, "went on waiting"),
        W("upside down", upside_down, "say True when woken"),
    ),
    "append_note": (
        W("locks only the write", locks_only_the_write, "were lost"),
        W("forgets the newline", forgets_the_newline, "run together"),
        W("appends twice", appends_twice, "doubled"),
    ),
}
"""Each exercise's classic wrong answers, in course order."""

RIGHT_ANSWERS: Final[Mapping[str, tuple[Callable[..., Any], ...]]] = {
    "claim_one": (one_statement,),
    "append_note": (appends,),
}
"""Answers other than the reference solution that must pass."""
