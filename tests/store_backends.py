"""The backends the store contract suite runs against, and what each must offer the tests.

`test_store_contract.py` only talks to a `Board`: it makes store instances on
one shared board (`board.store(...)`), names the board for a child process
(`board.spec`, opened there with `open_spec`), and plants the damage a store
would never write (`board.force(...)`), which each engine does its own way.
Everything else the suite does goes through the public store API.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from agent17 import SqliteTaskStore
from agent17.deterministic import ManualClock, uuid_sequence

TASK_ID_BLOCK = 17
TOKEN_BLOCK = 71
ONE_MICROSECOND = timedelta(microseconds=1)

StoreSpec = tuple[str, str]
"""(backend name, where the board is): picklable, so a spawned child can open the board."""


class TaskStoreLike(Protocol):
    """What the suite calls on a store (both backends implement it)."""

    lease: timedelta

    def create_task(self, subject: str, description: str = "", blocked_by: Any = ()) -> Any: ...
    def create_tasks(self, drafts: Any) -> Any: ...
    def get_task(self, task_id: str) -> Any: ...
    def list_tasks(self) -> Any: ...
    def claim_task(self, task_id: str, owner: str) -> Any: ...
    def claim_next(self, owner: str) -> Any: ...
    def complete_task(self, task_id: str, owner: str, claim_token: str) -> Any: ...
    def events(self, after_sequence: int = 0) -> Any: ...
    def issued_claim_tokens(self) -> list[str]: ...
    def close(self) -> None: ...


def task_id(number: int) -> str:
    """The id the n-th task of a default store gets (1-based)."""
    return f"00000000-0000-4000-8000-{TASK_ID_BLOCK:04d}{number:08d}"


def token(number: int) -> str:
    """The n-th claim token of a default store (1-based)."""
    return f"00000000-0000-4000-8000-{TOKEN_BLOCK:04d}{number:08d}"


def open_spec(spec: StoreSpec, **options: Any) -> Any:
    """Open the board named by `spec` (used in child processes)."""
    backend, where = spec
    if backend == "sqlite":
        return SqliteTaskStore(where, **options)
    raise ValueError(f"unknown backend {backend!r}")


class Board(Protocol):
    """One board of one backend, as the contract suite sees it."""

    name: str
    spec: StoreSpec

    def store(
        self,
        *,
        clock: Callable[[], Any] | None = None,
        new_task_id: Callable[[], str] | None = None,
        new_claim_token: Callable[[], str] | None = None,
        lease_seconds: float = 300.0,
    ) -> Any: ...

    def raw_store(self, **options: Any) -> Any: ...

    def force(self, change: str, **values: Any) -> None: ...

    def integrity_problems(self) -> list[str]: ...

    @contextlib.contextmanager
    def write_lock_held(self) -> Iterator[None]: ...


class SqliteBoard:
    """A board in a fresh workspace folder (`<folder>/.agent_tutorial/tasks.sqlite3`)."""

    name = "sqlite"

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.spec: StoreSpec = ("sqlite", str(workspace))
        self._opened: list[Any] = []

    @property
    def path(self) -> Path:
        return self.workspace / ".agent_tutorial" / "tasks.sqlite3"

    def store(
        self,
        *,
        clock: Callable[[], Any] | None = None,
        new_task_id: Callable[[], str] | None = None,
        new_claim_token: Callable[[], str] | None = None,
        lease_seconds: float = 300.0,
    ) -> SqliteTaskStore:
        """A store with a manual clock and counting ids/tokens unless told otherwise."""
        return self.raw_store(
            clock=clock if clock is not None else ManualClock(),
            new_task_id=new_task_id if new_task_id is not None else uuid_sequence(TASK_ID_BLOCK),
            new_claim_token=(
                new_claim_token if new_claim_token is not None else uuid_sequence(TOKEN_BLOCK)
            ),
            lease_seconds=lease_seconds,
        )

    def raw_store(self, **options: Any) -> SqliteTaskStore:
        """A store built with exactly these options (real clock and UUIDs by default)."""
        store = SqliteTaskStore(self.workspace, **options)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()

    @contextlib.contextmanager
    def _unchecked(self) -> Iterator[sqlite3.Connection]:
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            connection.execute("PRAGMA foreign_keys = OFF")
            connection.execute("PRAGMA ignore_check_constraints = ON")
            yield connection
        finally:
            connection.close()

    def force(self, change: str, **values: Any) -> None:
        """Write what no store would: delete_task, add_edge, set_unmet or set_status."""
        with self._unchecked() as connection:
            if change == "delete_task":
                connection.execute("DELETE FROM tasks WHERE id = ?", (values["id"],))
            elif change == "add_edge":
                connection.execute(
                    "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
                    " SELECT t.sequence, d.sequence,"
                    " (SELECT count(*) FROM task_dependencies WHERE task_sequence = t.sequence)"
                    " FROM tasks AS t, tasks AS d WHERE t.id = ? AND d.id = ?",
                    (values["task"], values["dependency"]),
                )
            elif change == "set_unmet":
                connection.execute(
                    "UPDATE tasks SET unmet_dependencies = ? WHERE id = ?",
                    (values["count"], values["id"]),
                )
            elif change == "set_status":
                # Past the lifecycle trigger: drop the triggers, write, put them back as they were.
                triggers = connection.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
                    " AND tbl_name = 'tasks'"
                ).fetchall()
                for name, _ in triggers:
                    connection.execute(f"DROP TRIGGER {name}")
                connection.execute(
                    "UPDATE tasks SET status = ? WHERE id = ?", (values["status"], values["id"])
                )
                for _, sql in triggers:
                    connection.execute(sql)
            else:
                raise ValueError(f"unknown change {change!r}")

    def integrity_problems(self) -> list[str]:
        """What the engine's own checks find wrong with the file (empty when sound)."""
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            problems = [row[0] for row in connection.execute("PRAGMA integrity_check")]
            problems += [str(row) for row in connection.execute("PRAGMA foreign_key_check")]
        finally:
            connection.close()
        return [] if problems == ["ok"] else problems

    @contextlib.contextmanager
    def write_lock_held(self) -> Iterator[None]:
        """Hold the board's write lock from another connection (as a stuck writer would)."""
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            yield
            connection.execute("ROLLBACK")
        finally:
            connection.close()

    def write_lock_free(self) -> bool:
        """True if a writer could take the lock right now (checked without waiting)."""
        connection = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            connection.close()


def make_board(backend: str, tmp_path: Path) -> SqliteBoard:
    """A fresh, empty board of `backend` for one test."""
    if backend == "sqlite":
        return SqliteBoard(tmp_path / "workspace")
    raise ValueError(f"unknown backend {backend!r}")


__all__ = [
    "ONE_MICROSECOND",
    "Board",
    "ManualClock",
    "SqliteBoard",
    "StoreSpec",
    "make_board",
    "open_spec",
    "task_id",
    "token",
]
