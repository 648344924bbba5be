"""The one transaction helper of agent17's SQLite state files, and the file it runs on.

Every operation of the task board, the team's mailbox and the idempotency
ledger is one call of `transaction()`: BEGIN, the work, COMMIT, and on any
exception at all (a refusal, a driver error, a Ctrl-C) ROLLBACK and raise it
again, so no transaction stays open and no lock stays held. The board's
writes BEGIN IMMEDIATE, which takes SQLite's write lock before the first
read; reads BEGIN a snapshot that takes no lock.

How the file is opened, checked and guarded (a damaged or swapped file, a
second signal during the rollback, a full disk) is `state_file.py`'s.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from agent17.store.paths import RefusalFactory
from agent17.store.schema_file import Schema
from agent17.store.state_file import ExclusiveHold, StateFile

T = TypeVar("T")


def transaction(
    connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], begin: str
) -> T:
    """BEGIN, the work, COMMIT; on any exception at all, ROLLBACK and raise it again."""
    try:  # BEGIN inside the try: an interrupt right after it still rolls back
        connection.execute(begin)
        result = work(connection)
        connection.execute("COMMIT")
        return result
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


class StateDatabase:
    """One SQLite state file and its transactions; safe to share between threads."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        file_name: str,
        schema: Schema,
        refusal: RefusalFactory,
    ) -> None:
        self._file = StateFile(workspace, file_name, schema, refusal)
        self.schema = schema
        self.path: Path = self._file.path
        self.workspace: Path = self._file.workspace

    def transaction(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run `operation` in one BEGIN IMMEDIATE transaction: commit, or roll back on anything."""
        return self._file.guarded(transaction, operation, "BEGIN IMMEDIATE")

    def snapshot(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run read-only `operation` in one read transaction (a consistent snapshot, no lock)."""
        return self._file.guarded(transaction, operation, "BEGIN")

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to this file."""
        return self._file.data_version()

    def hold_exclusive(self, key: str) -> ExclusiveHold:
        """Hold `<state folder>/<key>.lock` while this process lives (see StateFile)."""
        return self._file.hold_exclusive(key)

    @property
    def total_changes(self) -> int:
        """Rows this connection has changed since it opened (proves "zero writes")."""
        return self._file.total_changes

    def close(self) -> None:
        """Close the connection; the file stays for the next opener."""
        self._file.close()
