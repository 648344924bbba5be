"""The classic wrong answers (and other right ones) to the race exercises, and their catalogue.

take_if_pending and claim_one are where a class writes the most kinds of wrong
claim; they are here, fenced_effect's and append_note's are in `wrong_effects`.
`RACE_WRONG_ANSWERS` lists all four exercises' wrong answers, each with words its
feedback must contain (every one must fail its check, the same way on every run);
`RACE_RIGHT_ANSWERS` holds right answers other than the reference solution.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

import wrong_effects as effects

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


def _look_then_write_in(
    begin: str, connection: sqlite3.Connection, job_id: int, owner: str
) -> bool:
    connection.execute(begin)
    try:
        row = connection.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        pending = row is not None and row[0] == "pending"
        if pending:
            connection.execute(_TAKE_ANY, (owner, job_id))
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return pending


def plain_begin_look_then_write(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """look_then_write inside a plain (deferred) BEGIN: the look is a stale snapshot."""
    return _look_then_write_in("BEGIN", connection, job_id, owner)


def looks_under_the_write_lock(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """Right: look and write inside BEGIN IMMEDIATE, so nobody can come between."""
    return _look_then_write_in("BEGIN IMMEDIATE", connection, job_id, owner)


def takes_with_returning(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """Right: the conditional UPDATE ... RETURNING; a row back means this call took it."""
    return connection.execute(_TAKE_IF + " RETURNING id", (owner, job_id)).fetchone() is not None


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


def looks_under_the_lock_takes_after(connection: sqlite3.Connection, owner: str) -> int | None:
    """The look inside BEGIN IMMEDIATE, the take after its COMMIT: still two steps."""
    connection.execute("BEGIN IMMEDIATE")
    row = connection.execute(PICK).fetchone()
    connection.execute("COMMIT")
    if row is None:
        return None
    connection.execute(TAKE, (owner, row[0]))
    return int(row[0])


def no_order_by(connection: sqlite3.Connection, owner: str) -> int | None:
    """One statement, but 'the first pending job' left to whatever order SQLite reads in."""
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' LIMIT 1) RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else int(row[0])


def takes_every_pending_job(connection: sqlite3.Connection, owner: str) -> int | None:
    """An UPDATE with no one row picked: every pending job at once."""
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE status = 'pending' RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else int(row[0])


def returns_the_row(connection: sqlite3.Connection, owner: str) -> Any:
    """Atomic and right, but it returns the row (a tuple), not the id."""
    return connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' ORDER BY id LIMIT 1) RETURNING id",
        (owner,),
    ).fetchone()


def tries_the_next_candidate(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right: the conditional UPDATE, and after a lost race the next pending job."""
    while True:
        row = connection.execute(PICK).fetchone()
        if row is None:
            return None
        if connection.execute(TAKE + " AND status = 'pending'", (owner, row[0])).rowcount == 1:
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


def _lock_file(connection: sqlite3.Connection) -> str:
    """A lock file beside the database: every worker's connection names the same one."""
    return f"{connection.execute('PRAGMA database_list').fetchone()[2]}.claim-lock"


def under_a_file_lock(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right, without SQLite's write lock: every worker serialises on one lock file."""
    descriptor = os.open(_lock_file(connection), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        return select_then_update(connection, owner)
    finally:
        os.close(descriptor)  # closing the file lets the lock go


def file_lock_around_the_select(connection: sqlite3.Connection, owner: str) -> int | None:
    """A file lock, but held only while looking: the take comes after it is let go."""
    with open(_lock_file(connection), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        row = connection.execute(PICK).fetchone()
        fcntl.flock(lock, fcntl.LOCK_UN)
    if row is None:
        return None
    connection.execute(TAKE, (owner, row[0]))
    return int(row[0])


def retries_then_gives_up(connection: sqlite3.Connection, owner: str) -> int | None:
    """The conditional UPDATE in a retry loop that stops after two lost races with None."""
    for _ in range(2):
        row = connection.execute(PICK).fetchone()
        if row is None:
            return None
        if connection.execute(TAKE + " AND status = 'pending'", (owner, row[0])).rowcount == 1:
            return int(row[0])
    return None


def rowcount_before_fetching(connection: sqlite3.Connection, owner: str) -> int | None:
    """UPDATE ... RETURNING, but rowcount read before the row is fetched (it is not counted yet)."""
    cursor = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' ORDER BY id LIMIT 1) RETURNING id",
        (owner,),
    )
    if cursor.rowcount != 1:
        return None
    return int(cursor.fetchone()[0])


def begin_immediate_without_order_by(connection: sqlite3.Connection, owner: str) -> int | None:
    """The write lock first, but 'the first pending job' left to the order SQLite reads in."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        row = connection.execute("SELECT id FROM jobs WHERE status = 'pending' LIMIT 1").fetchone()
        if row is not None:
            connection.execute(TAKE, (owner, row[0]))
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return None if row is None else int(row[0])


def answers_from_the_select(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """take_if_pending: the conditional UPDATE, but the answer is what the SELECT saw."""
    row = connection.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
    connection.execute(_TAKE_IF, (owner, job_id))
    return row is not None and row[0] == "pending"


def returning_counted_too_early(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """take_if_pending: UPDATE ... RETURNING, its rowcount read before the row is fetched."""
    cursor = connection.execute(_TAKE_IF + " RETURNING id", (owner, job_id))
    return cursor.rowcount == 1


def retries_when_locked(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right: a plain BEGIN, and a refusal ('database is locked') tried again from the start."""
    while True:
        try:
            return deferred_begin(connection, owner)
        except sqlite3.OperationalError as error:
            if "locked" not in str(error):
                raise


def spins_on_a_file_lock(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right: a lock file taken with LOCK_NB, tried again until it is free."""
    descriptor = os.open(_lock_file(connection), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                continue
        return select_then_update(connection, owner)
    finally:
        os.close(descriptor)


# -- the catalogue ------------------------------------------------------------------------------

WrongAnswer = tuple[str, Callable[..., Any], str]
"""A wrong answer: what it gets wrong, the function, and words its feedback must contain."""

RACE_WRONG_ANSWERS: Final[Mapping[str, tuple[WrongAnswer, ...]]] = {
    "take_if_pending": (
        ("ignores the rowcount", take_ignoring_the_rowcount, "Answer with what your UPDATE did"),
        ("unconditional UPDATE", takes_blindly_reports_what_it_saw, "someone else's job"),
        ("look, then write", look_then_write, "wrote over erin's claim"),
        ("returns the rowcount", returns_the_rowcount, "must return a bool"),
        ("never takes", never_takes, "job 1 was pending"),
        ("plain BEGIN, look, then write", plain_begin_look_then_write, "was stale"),
        ("answers from the SELECT", answers_from_the_select, "Answer with what your UPDATE did"),
        ("RETURNING, rowcount before the fetch", returning_counted_too_early, "fetched it"),
    ),
    "claim_one": (
        ("select, then update", select_then_update, "two separate steps"),
        ("two transactions", two_transactions, "two separate steps"),
        ("through a cursor", through_a_cursor, "two separate steps"),
        ("ignores the rowcount", ignores_the_rowcount, "changed no row"),
        ("gives up after losing a race", gives_up_after_losing, "returned None while jobs"),
        ("deferred BEGIN", deferred_begin, "BEGIN IMMEDIATE"),
        ("takes the newest", takes_the_newest, "lowest pending id"),
        ("transaction left open", leaves_its_transaction_open, "still open"),
        ("a threading.Lock", under_a_thread_lock, "its own copy of the lock"),
        ("looks under the lock, takes after it", looks_under_the_lock_takes_after, "two separate"),
        ("no ORDER BY", no_order_by, "lowest pending id"),
        ("every pending job at once", takes_every_pending_job, "One call takes one job"),
        ("returns the row", returns_the_row, "not the row"),
        ("BEGIN IMMEDIATE, no ORDER BY", begin_immediate_without_order_by, "lowest pending id"),
        ("a file lock around the SELECT only", file_lock_around_the_select, "two separate steps"),
        ("retries twice, then gives up", retries_then_gives_up, "returned None while jobs"),
        ("RETURNING, rowcount before the fetch", rowcount_before_fetching, "fetched it"),
    ),
    "fenced_effect": (
        ("trusts its memory", effects.trusts_its_memory, "completed"),
        ("lets the error escape", effects.lets_the_error_escape, "answer False"),
        ("its own clock", effects.uses_its_own_clock, "must run"),
        ("owner and status, not the token", effects.owner_and_status_only, "claimed D again"),
        ("fences after the effect", effects.fence_after_the_effect, "the effect ran"),
        ("asks, then runs anyway", effects.verifies_but_runs_anyway, "the effect ran"),
        ("asks only the owner", effects.checks_only_the_owner, "completed A"),
    ),
    "append_note": (
        ("locks only the write", effects.locks_only_the_write, "were lost"),
        ("locks only the read", effects.locks_only_the_read, "were lost"),
        ("locks read and write apart", effects.locks_read_and_write_apart, "were lost"),
        ("writes only its line", effects.writes_only_its_line, "were lost"),
        ("forgets the newline", effects.forgets_the_newline, "run together"),
        ("appends twice", effects.appends_twice, "doubled"),
        ("a threading.Lock", effects.under_a_thread_lock, "its own copy of the lock"),
    ),
}
"""Each race exercise's classic wrong answers, in course order."""

RACE_RIGHT_ANSWERS: Final[Mapping[str, tuple[Callable[..., Any], ...]]] = {
    "take_if_pending": (looks_under_the_write_lock, takes_with_returning),
    "claim_one": (
        one_statement,
        tries_the_next_candidate,
        under_a_file_lock,
        retries_when_locked,
        spins_on_a_file_lock,
    ),
    "append_note": (effects.appends,),
}
"""Answers other than the reference solution that must pass."""
