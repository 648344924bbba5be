"""The one way agent17 opens its SQLite files: checked path, autocommit, waits for the lock.

Used by the task store, the mailbox and the idempotency ledger, so every state
file gets the same path checks, the same busy timeout and the same durability.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from agent17.domain import ErrorCode, TaskError
from agent17.store.paths import check_state_file, same_file

BUSY_TIMEOUT_SECONDS: Final = 30.0
"""How long a writer waits for another's BEGIN IMMEDIATE before "database is locked"."""


def apply_pragmas(connection: sqlite3.Connection) -> None:
    """Busy timeout and foreign keys: per connection, so set on every open."""
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    connection.execute("PRAGMA foreign_keys = ON")


def use_wal(connection: sqlite3.Connection) -> None:
    """WAL (readers never block the writer) with synchronous=FULL (README: Durability)."""
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")


def open_state_database(path: Path, workspace: Path) -> sqlite3.Connection:
    """Connect to a checked state file in autocommit mode (we issue BEGIN IMMEDIATE)."""
    before = check_state_file(path, workspace)
    connection = sqlite3.connect(
        path,
        isolation_level=None,  # autocommit: transactions are explicit BEGIN IMMEDIATE
        check_same_thread=False,  # shared between threads behind the owner's lock
        timeout=BUSY_TIMEOUT_SECONDS,
    )
    try:
        # The file may have been swapped for a link between the check and the open.
        if not same_file(before, path):
            raise TaskError(ErrorCode.UNSAFE_STORE_PATH, f"{path} changed while opening")
        check_state_file(path, workspace)
        apply_pragmas(connection)
    except BaseException:
        connection.close()
        raise
    return connection
