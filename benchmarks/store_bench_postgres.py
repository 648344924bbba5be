"""The PostgreSQL side of store_bench.py: where its boards go, and a server to put them on.

`store_bench.py --postgres [DSN]` runs parts a), b) and c) on PostgresTaskStore as
well, in the same run, and prints the two engines side by side; each engine is
held against its own floor (two minimal write transactions on the same engine,
from the same kind of client), so the ratios compare the stores, not the engines.

Without a DSN a throwaway cluster is started for the run (the tests' own,
tests/pg_cluster.py) and removed afterwards, with durability on: fsync, full
page writes and synchronous commit, as the SQLite board's synchronous=FULL. A
DSN names a server whose role may create databases; each board gets a fresh
database there, dropped when the run ends.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pg_cluster

Spec = tuple[str, str]


class PostgresPlace:
    """Where one run's PostgreSQL boards go: a database each, the floor table inside it."""

    engine = "PostgreSQL"

    def __init__(self, server: pg_cluster.Server) -> None:
        self.server = server
        self.made: list[str] = []

    def board(self, name: str) -> Spec:
        dbname = self.server.new_database()
        self.made.append(dbname)
        return ("postgres", self.server.dsn(dbname))

    def floor_for(self, board: Spec) -> Spec:
        return board  # the floor's table lives in the board's own database

    settle_note = "PostgreSQL boards vacuumed and analyzed once built, as autovacuum soon would"

    def settle(self, board: Spec) -> None:
        """VACUUM ANALYZE a freshly built board: a board built by one 200,000-task batch is
        timed in the state autovacuum leaves it in a minute later, not while it works."""
        import psycopg

        with psycopg.connect(board[1], autocommit=True) as connection:
            for table in ("tasks", "task_dependencies", "task_events"):
                connection.execute(f"VACUUM (ANALYZE) agent17.{table}")

    def drop_all(self) -> None:
        for dbname in self.made:
            self.server.drop_database(dbname)


@contextlib.contextmanager
def place(dsn: str | None) -> Iterator[PostgresPlace]:
    """Boards on the server `dsn` names, or on a durable throwaway cluster."""
    server: pg_cluster.Server
    if dsn:
        server = pg_cluster.Server(dsn)
        server.prepare(checks=False)
    else:
        server = pg_cluster.start_cluster(durable=True)
    made = PostgresPlace(server)
    try:
        yield made
    finally:
        made.drop_all()
        server.stop()


def server_version(made: PostgresPlace) -> str:
    with made.server.admin() as connection:
        row: Any = connection.execute("SHOW server_version").fetchone()
    return str(row[0])
