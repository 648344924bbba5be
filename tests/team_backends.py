"""Where a test's team lives: the workspace's SQLite files, or a fresh PostgreSQL database.

The team tests that hold on both engines take a `TeamPlace` and open everything
through it: `place.mailbox()`, `place.store(...)` (deterministic, as the contract
suite's boards) or `place.raw_store(...)`, and `place.cli` (the `--store`
options a teammate process or a command gets: none for SQLite). The workspace is
the teammates' working directory on both. `integrity_problems()` asks the
engine's own checks about everything the team wrote.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pg_cluster
from store_backends import PostgresBoard, SqliteBoard

from agent17.team.mailbox import Mailbox
from agent17.team.pg_mailbox import PostgresMailbox

BACKENDS = ("sqlite", "postgres")


class _Place:
    """What both engines' places share: the board's stores, and closing what was opened."""

    board: Any
    _opened: list[Any]

    def store(self, **options: Any) -> Any:
        return self.board.store(**options)

    def raw_store(self, **options: Any) -> Any:
        return self.board.raw_store(**options)

    def close(self) -> None:
        for thing in self._opened:
            thing.close()
        self.board.close_all()


class SqliteTeamPlace(_Place):
    """The team in `<workspace>/.agent_tutorial/`: tasks.sqlite3 and mailbox.sqlite3."""

    backend = "sqlite"

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.board = SqliteBoard(workspace)
        self.url: str | None = None
        self.cli: list[str] = []
        self._opened: list[Any] = []

    def mailbox(self, **options: Any) -> Mailbox:
        mailbox = Mailbox(self.workspace, **options)
        self._opened.append(mailbox)
        return mailbox

    def integrity_problems(self) -> list[str]:
        problems = self.board.integrity_problems()
        path = self.workspace / ".agent_tutorial" / "mailbox.sqlite3"
        if path.exists():
            connection = sqlite3.connect(path)
            try:
                found = [row[0] for row in connection.execute("PRAGMA integrity_check")]
            finally:
                connection.close()
            problems += [] if found == ["ok"] else found
        return problems


class PostgresTeamPlace(_Place):
    """The team in a fresh database of the test server: board and mailbox side by side."""

    backend = "postgres"

    def __init__(self, workspace: Path, server: pg_cluster.Server) -> None:
        self.workspace = workspace
        self.board = PostgresBoard(server)
        self.dsn = self.board.dsn
        url = server.url(self.board.dbname)
        self.url: str | None = url
        self.cli = ["--store", url]
        self._opened: list[Any] = []

    def mailbox(self, **options: Any) -> PostgresMailbox:
        mailbox = PostgresMailbox(self.dsn, **options)
        self._opened.append(mailbox)
        return mailbox

    def integrity_problems(self) -> list[str]:
        return self.board.integrity_problems()  # every constraint and index of the schema


TeamPlace = SqliteTeamPlace | PostgresTeamPlace


def make_place(backend: str, workspace: Path) -> TeamPlace:
    """A fresh place of `backend` for one test's team."""
    if backend == "sqlite":
        return SqliteTeamPlace(workspace)
    if backend == "postgres":
        return PostgresTeamPlace(workspace, pg_cluster.server())
    raise ValueError(f"unknown backend {backend!r}")
