"""A throwaway PostgreSQL cluster for the tests: started on first use, removed when pytest exits.

`server()` gives the one server of this test process: our own cluster
(agent17.store.pg_cluster: initdb + pg_ctl from the machine's PostgreSQL
binaries, in a fresh folder under /tmp, on a Unix socket there, fsync off), or
the server that `AGENT17_TEST_POSTGRES_DSN` names (its role must be a
superuser: the tests create databases and plant damage). Each board gets a database of its own,
made from an empty template and dropped afterwards, so tests never meet.

PostgreSQL refuses to run as root, so as root the cluster runs as the
unprivileged user `postgres` (Debian's package makes it) in a folder chowned
to it; pytest's own temporary folders are private to root, hence /tmp.
Without binaries the Postgres tests are skipped with a message, except when
`CI` is set (.ci/run sets it): there they fail, because scripts/test.sh installs
PostgreSQL's binaries when they are missing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent17.store import pg_cluster as pg_tools
from agent17.store.pg_cluster import ThrowawayCluster

ENV_DSN = "AGENT17_TEST_POSTGRES_DSN"
TEMPLATE = "agent17_empty_board"

_server: Server | None = None
_unavailable: str | None = None


def find_bindir() -> Path | None:
    """The folder with initdb and pg_ctl (a name of its own, so a test can take it away)."""
    return pg_tools.find_bindir()


class Server:
    """One PostgreSQL server the tests may create databases on."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self._names = itertools.count(1)
        self._free: list[str] = []

    def dsn(self, dbname: str) -> str:
        import psycopg

        return psycopg.conninfo.make_conninfo(self.admin_dsn, dbname=dbname)

    def url(self, dbname: str) -> str:
        """The same as a `postgresql://` URL (what `--store` takes): every setting a parameter."""
        import urllib.parse

        import psycopg

        parts = psycopg.conninfo.conninfo_to_dict(self.dsn(dbname))
        return "postgresql:///?" + urllib.parse.urlencode({k: str(v) for k, v in parts.items()})

    @contextlib.contextmanager
    def admin(self, dbname: str = "postgres") -> Iterator[Any]:
        """An autocommit superuser connection."""
        import psycopg

        connection = psycopg.connect(self.dsn(dbname), autocommit=True)
        try:
            yield connection
        finally:
            connection.close()

    def prepare(self, *, checks: bool = True) -> None:
        """The empty template every test database is copied from (amcheck for the checks)."""
        with self.admin() as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
            connection.execute(f"CREATE DATABASE {TEMPLATE} TEMPLATE template0")
        if not checks:
            return
        with self.admin(TEMPLATE) as connection:
            # In a schema of its own, so emptying a database for reuse keeps it.
            connection.execute("CREATE SCHEMA amcheck")
            connection.execute("CREATE EXTENSION amcheck SCHEMA amcheck")

    def new_database(self) -> str:
        """A fresh, empty database for one board; returns its name.

        A database given back with `release_database` is emptied and handed out
        again: emptying takes a few milliseconds, copying the template a few hundred.
        """
        if self._free:
            return self._free.pop()
        name = f"agent17_test_{os.getpid()}_{next(self._names)}"
        with self.admin() as connection:
            # FILE_COPY (PostgreSQL 15's other strategy, the only one before) copies a
            # small template faster than WAL_LOG, 15's default.
            strategy = " STRATEGY FILE_COPY" if connection.info.server_version >= 150000 else ""
            connection.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}{strategy}")
        return name

    def drop_database(self, name: str) -> None:
        """Drop `name` for good, ending any session still on it."""
        with self.admin() as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def release_database(self, name: str) -> None:
        """Empty `name` (every session on it ended, every schema of a test dropped) for reuse."""
        with self.admin() as connection:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        with self.admin(name) as connection:
            schemas = connection.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%%'"
                " AND nspname NOT IN ('information_schema', 'amcheck')"
            ).fetchall()
            for (schema,) in schemas:
                connection.execute(f'DROP SCHEMA "{schema}" CASCADE')
            connection.execute("CREATE SCHEMA public")
        self._free.append(name)

    def restart(self) -> None:
        raise NotImplementedError(
            "a server named by AGENT17_TEST_POSTGRES_DSN is not ours to restart"
        )

    def stop(self) -> None:
        """Nothing to stop on a server we did not start."""


class Cluster(Server):
    """A throwaway cluster of our own (agent17.store.pg_cluster) as the tests' server."""

    def __init__(self, cluster: ThrowawayCluster) -> None:
        super().__init__(cluster.admin_dsn)
        self.cluster = cluster
        self.root = cluster.root

    def restart(self) -> None:
        """Stop (fast: sessions are terminated) and start again, as an operator would."""
        self.cluster.restart()

    def stop(self, *, force: bool = False) -> None:
        self.cluster.stop(force=force)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so that atexit stops the cluster


def start_cluster(*, durable: bool = False) -> Cluster:
    """A cluster of our own, started now, stopped and removed at exit (or by `stop()`)."""
    bindir = find_bindir()
    if bindir is None:
        raise LookupError(
            "no PostgreSQL binaries (initdb, pg_ctl) found: install PostgreSQL"
            f" (apt-get install postgresql) or set {ENV_DSN}"
        )
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        cluster = Cluster(pg_tools.start_cluster(durable=durable, bindir=bindir))
    except pg_tools.ClusterUnavailable as error:
        raise RuntimeError(str(error)) from None
    cluster.prepare()
    return cluster


def server() -> Server:
    """The test process's PostgreSQL server, started on first use; skip (or fail in CI) if none."""
    global _server, _unavailable
    if _server is None and _unavailable is None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _unavailable = "psycopg is not installed: pip install -e '.[dev]'"
        else:
            dsn = os.environ.get(ENV_DSN)
            try:
                if dsn:
                    _server = Server(dsn)
                    _server.prepare()
                else:
                    _server = start_cluster()
            except (LookupError, RuntimeError, OSError) as error:
                _unavailable = str(error)
    if _server is None:
        message = f"PostgreSQL tests need a server: {_unavailable}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return _server


def server_version(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as connection:
        return int(connection.info.server_version)


def backend_pids(dsn: str, application_name: str = "agent17") -> list[int]:
    """The server processes serving the stores connected to this database."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND pid <> pg_backend_pid() ORDER BY pid",
            (application_name,),
        ).fetchall()
    return [int(pid) for (pid,) in rows]
