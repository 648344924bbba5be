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

import pg_cluster

from agent17 import PostgresTaskStore, SqliteTaskStore
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.store.board import TaskBoard

TASK_ID_BLOCK = 17
TOKEN_BLOCK = 71
ONE_MICROSECOND = timedelta(microseconds=1)

StoreSpec = tuple[str, str]
"""(backend name, where the board is): picklable, so a spawned child can open the board."""


def task_id(number: int) -> str:
    """The id the n-th task of a default store gets (1-based)."""
    return f"00000000-0000-4000-8000-{TASK_ID_BLOCK:04d}{number:08d}"


def token(number: int) -> str:
    """The n-th claim token of a default store (1-based)."""
    return f"00000000-0000-4000-8000-{TOKEN_BLOCK:04d}{number:08d}"


def open_spec(spec: StoreSpec, **options: Any) -> TaskBoard:
    """Open the board named by `spec` (used in child processes)."""
    backend, where = spec
    if backend == "sqlite":
        return SqliteTaskStore(where, **options)
    if backend == "postgres":
        return PostgresTaskStore(where, **options)
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
    ) -> TaskBoard: ...

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
        return self.raw_store(**_deterministic(clock, new_task_id, new_claim_token, lease_seconds))

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


def _deterministic(
    clock: Callable[[], Any] | None,
    new_task_id: Callable[[], str] | None,
    new_claim_token: Callable[[], str] | None,
    lease_seconds: float,
) -> dict[str, Any]:
    """A manual clock and counting ids/tokens unless told otherwise (both engines)."""
    return {
        "clock": clock if clock is not None else ManualClock(),
        "new_task_id": new_task_id if new_task_id is not None else uuid_sequence(TASK_ID_BLOCK),
        "new_claim_token": (
            new_claim_token if new_claim_token is not None else uuid_sequence(TOKEN_BLOCK)
        ),
        "lease_seconds": lease_seconds,
    }


class PostgresBoard:
    """A board in a fresh database of the test server (`pg_cluster.server()`).

    Planting damage needs what no store has: a superuser session in replica mode
    (foreign keys and ordinary triggers off) and CHECK constraints dropped for the
    write and put back NOT VALID, so the bad row stays and the rule holds for new ones.
    """

    name = "postgres"

    def __init__(self, server: pg_cluster.Server) -> None:
        self.server = server
        self.dbname = server.new_database()
        self.dsn = server.dsn(self.dbname)
        self.spec: StoreSpec = ("postgres", self.dsn)
        self._opened: list[Any] = []

    def store(
        self,
        *,
        clock: Callable[[], Any] | None = None,
        new_task_id: Callable[[], str] | None = None,
        new_claim_token: Callable[[], str] | None = None,
        lease_seconds: float = 300.0,
    ) -> PostgresTaskStore:
        """A store with a manual clock and counting ids/tokens unless told otherwise."""
        return self.raw_store(**_deterministic(clock, new_task_id, new_claim_token, lease_seconds))

    def raw_store(self, **options: Any) -> PostgresTaskStore:
        """A store built with exactly these options (the server's clock and UUIDs by default)."""
        store = PostgresTaskStore(self.dsn, **options)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()
        self.server.release_database(self.dbname)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A superuser connection to the board's database, search_path on the board."""
        with self.server.admin(self.dbname) as connection:
            connection.execute("SET search_path = agent17")
            yield connection

    def force(self, change: str, **values: Any) -> None:
        """Write what no store would: delete_task, add_edge, set_unmet or set_status."""
        table, sql, params = {
            "delete_task": ("tasks", "DELETE FROM tasks WHERE id = %(id)s", values),
            "add_edge": (
                "task_dependencies",
                "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
                " SELECT t.sequence, d.sequence,"
                " (SELECT count(*) FROM task_dependencies WHERE task_sequence = t.sequence)"
                " FROM tasks AS t, tasks AS d WHERE t.id = %(task)s AND d.id = %(dependency)s",
                values,
            ),
            "set_unmet": (
                "tasks",
                "UPDATE tasks SET unmet_dependencies = %(count)s WHERE id = %(id)s",
                values,
            ),
            "set_status": (
                "tasks",
                "UPDATE tasks SET status = %(status)s WHERE id = %(id)s",
                values,
            ),
        }.get(change, (None, "", {}))
        if table is None:
            raise ValueError(f"unknown change {change!r}")
        with self.connection() as connection, connection.transaction():
            connection.execute("SET LOCAL session_replication_role = replica")
            checks = connection.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
                " WHERE conrelid = %s::regclass AND contype = 'c'",
                (table,),
            ).fetchall()
            for name, _ in checks:
                connection.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
            connection.execute(sql, params)
            for name, definition in checks:
                connection.execute(
                    f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition} NOT VALID"
                )

    def integrity_problems(self) -> list[str]:
        """What the server's own checks find wrong (empty when sound).

        Every CHECK and foreign key re-validated over all rows, every index checked
        against its table with amcheck.
        """
        problems: list[str] = []
        with self.connection() as connection:
            constraints = connection.execute(
                "SELECT conrelid::regclass::text, conname FROM pg_constraint"
                " WHERE connamespace = 'agent17'::regnamespace AND contype IN ('c', 'f')"
            ).fetchall()
            for table, name in constraints:
                try:
                    with connection.transaction():
                        connection.execute(
                            f"ALTER TABLE {table} DROP CONSTRAINT {name}, ADD CONSTRAINT {name}"
                            f" {self._definition(connection, table, name)}"
                        )
                        raise _Undo
                except _Undo:
                    pass
                except Exception as error:  # the engine's own report is the finding
                    problems.append(f"{table}.{name}: {error}")
            indexes = connection.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relnamespace = 'agent17'::regnamespace"
            ).fetchall()
            for (index,) in indexes:
                try:
                    connection.execute(
                        "SELECT amcheck.bt_index_check(%s::regclass, true)", (index,)
                    )
                except Exception as error:
                    problems.append(f"index {index}: {error}")
        return problems

    @staticmethod
    def _definition(connection: Any, table: str, name: str) -> str:
        ((definition,),) = connection.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND conname = %s",
            (table, name),
        ).fetchall()
        return str(definition).removesuffix(" NOT VALID")

    @contextlib.contextmanager
    def write_lock_held(self) -> Iterator[None]:
        """Hold the board lock from another session (as a stuck writer would)."""
        with self.connection() as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(board_lock_key())")
            yield

    def write_lock_free(self) -> bool:
        """True if a writer could take the board lock right now (checked without waiting)."""
        with self.connection() as connection, connection.transaction():
            ((free,),) = connection.execute(
                "SELECT pg_try_advisory_xact_lock(board_lock_key())"
            ).fetchall()
        return bool(free)


class _Undo(Exception):
    """Rolls a check's transaction back."""


def make_board(backend: str, tmp_path: Path) -> SqliteBoard | PostgresBoard:
    """A fresh, empty board of `backend` for one test."""
    if backend == "sqlite":
        return SqliteBoard(tmp_path / "workspace")
    if backend == "postgres":
        return PostgresBoard(pg_cluster.server())
    raise ValueError(f"unknown backend {backend!r}")


__all__ = [
    "ONE_MICROSECOND",
    "Board",
    "ManualClock",
    "PostgresBoard",
    "SqliteBoard",
    "StoreSpec",
    "make_board",
    "open_spec",
    "task_id",
    "token",
]
