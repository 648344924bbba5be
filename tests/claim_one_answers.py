"""Answers a class really writes to the claim_one exercise, wrong and right: one catalogue.

The tests (test_exercises.py, test_exercises_claims.py) and
benchmarks/exercise_reliability.py check these same functions.
"""

from __future__ import annotations

import sqlite3

PICK = "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1"
TAKE = "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?"


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


def one_statement(connection: sqlite3.Connection, owner: str) -> int | None:
    """Right: look and take in one UPDATE ... RETURNING."""
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = (SELECT id FROM jobs"
        " WHERE status = 'pending' ORDER BY id LIMIT 1) RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else int(row[0])


def through_a_cursor(connection: sqlite3.Connection, owner: str) -> int | None:
    """select_then_update through a cursor of the connection: the same race."""
    cursor = connection.cursor()
    row = cursor.execute(PICK).fetchone()
    if row is None:
        return None
    cursor.execute(TAKE, (owner, row[0]))
    return int(row[0])
