"""The idempotency ledger: results of effectful tool calls, keyed by the run's claim token.

A teammate's run on an auto-claimed task carries that claim's token as its
idempotency key. Each effectful call (shell, write_file) that ran and
succeeded is recorded under (key, ordinal, tool, canonical arguments); a retry
of the same run gets the recorded result instead of running the call again.
The file is a state database like the board (`ledger.sql`, opened by
`StateFile`); `in_memory()` keeps the same records in a dict.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.armour.schema_file import Schema
from agent17.armour.state_file import StateFile
from agent17.domain import TaskError
from agent17.store.sqlite import transaction

LEDGER_DB_NAME: Final = "idempotency.sqlite3"
LEDGER_SCHEMA: Final = Schema(
    package="agent17.agent",
    sql_file="ledger.sql",
    version="1",
    metadata_table="ledger_metadata",
    what="agent17 idempotency ledger",
)


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """Identifies one effectful call of a keyed run: key, ordinal, tool, canonical arguments."""

    idempotency_key: str
    ordinal: int
    tool: str
    arguments_json: str

    @classmethod
    def of(
        cls, idempotency_key: str, ordinal: int, name: str, arguments: Mapping[str, Any]
    ) -> LedgerKey:
        """The key of one call, with its arguments in canonical JSON (sorted keys, no spaces)."""
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return cls(idempotency_key, ordinal, name, canonical)


class IdempotencyLedger:
    """Recorded results per LedgerKey; the first result recorded for a key wins.

    On a file (`for_workspace`), also across processes sharing it.
    """

    def __init__(self, file: StateFile | None) -> None:
        self._file = file
        self.path: Path | None = None if file is None else file.path
        self._memory: dict[LedgerKey, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_workspace(cls, workspace: str | os.PathLike[str]) -> IdempotencyLedger:
        """The workspace's ledger: `<workspace>/.agent_tutorial/idempotency.sqlite3`."""
        return cls(StateFile(workspace, LEDGER_DB_NAME, LEDGER_SCHEMA, TaskError))

    @classmethod
    def in_memory(cls) -> IdempotencyLedger:
        """A ledger that lives as long as this object (tests, notebooks)."""
        return cls(None)

    def lookup(self, key: LedgerKey) -> dict[str, Any] | None:
        """The recorded result for `key`, or None."""
        if self._file is None:
            with self._lock:
                text = self._memory.get(key)
        else:
            row = self._file.guarded(
                transaction,
                lambda connection: connection.execute(
                    "SELECT result_json FROM tool_results WHERE idempotency_key = ?"
                    " AND ordinal = ? AND tool = ? AND arguments_json = ?",
                    (key.idempotency_key, key.ordinal, key.tool, key.arguments_json),
                ).fetchone(),
                "BEGIN",
            )
            text = None if row is None else str(row[0])
        if text is None:
            return None
        result: dict[str, Any] = json.loads(text)
        return result

    def record(self, key: LedgerKey, result: Mapping[str, Any]) -> None:
        """Remember `result` for `key` (a second result for the same key is ignored)."""
        text = json.dumps(dict(result), sort_keys=True)
        if self._file is None:
            with self._lock:
                self._memory.setdefault(key, text)
            return

        def insert(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR IGNORE INTO tool_results VALUES (?, ?, ?, ?, ?)",
                (key.idempotency_key, key.ordinal, key.tool, key.arguments_json, text),
            )

        self._file.guarded(transaction, insert, "BEGIN IMMEDIATE")

    def __len__(self) -> int:
        if self._file is None:
            with self._lock:
                return len(self._memory)
        (count,) = self._file.guarded(
            transaction,
            lambda connection: connection.execute("SELECT count(*) FROM tool_results").fetchone(),
            "BEGIN",
        )
        return int(count)

    def close(self) -> None:
        """Close the database connection (if any)."""
        if self._file is not None:
            self._file.close()
