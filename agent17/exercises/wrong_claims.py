"""The classic wrong answers (and other right answers) to the two claim exercises.

take_if_pending and claim_one are where a class writes the most kinds of wrong
claim; `wrong_answers.WRONG_ANSWERS` lists them with the feedback each must get.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Final

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
