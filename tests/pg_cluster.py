"""A throwaway PostgreSQL cluster for the tests: started on first use, removed when pytest exits.

`server()` gives the one server of this test process: our own cluster (initdb
+ pg_ctl from the machine's PostgreSQL binaries, in a fresh folder under
/tmp, on a Unix socket there, fsync off), or the server that
`AGENT17_TEST_POSTGRES_DSN` names (its role must be a superuser: the tests
create databases and plant damage). Each board gets a database of its own,
made from an empty template and dropped afterwards, so tests never meet.

PostgreSQL refuses to run as root, so as root the cluster runs as the
unprivileged user `postgres` (Debian's package makes it) in a folder chowned
to it; pytest's own temporary folders are private to root, hence /tmp.
Without binaries the Postgres tests are skipped with a message, except when
`CI` is set: there they fail, because CI installs PostgreSQL (.ci/run).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV_DSN = "AGENT17_TEST_POSTGRES_DSN"
UNPRIVILEGED_USER = "postgres"
TEMPLATE = "agent17_empty_board"
PG_CTL_WAIT_SECONDS = 60
PORT = 5432  # names the socket file only: the cluster listens on no TCP port

_server: Server | None = None
_unavailable: str | None = None


def find_bindir() -> Path | None:
    """The folder with initdb and pg_ctl: pg_config's answer, else the newest Debian install."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            candidates.append(Path(done.stdout.strip()))

    def major(path: Path) -> int:
        return int(path.parent.name) if path.parent.name.isdigit() else -1

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=major, reverse=True)
    found = shutil.which("initdb")
    if found is not None:
        candidates.append(Path(found).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


class Server:
    """One PostgreSQL server the tests may create databases on."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self._names = itertools.count(1)
        self._free: list[str] = []

    def dsn(self, dbname: str) -> str:
        import psycopg

        return psycopg.conninfo.make_conninfo(self.admin_dsn, dbname=dbname)

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
    """A cluster of our own, in `root` (data/, the socket, the log), run as `user`."""

    def __init__(self, bindir: Path, root: Path, user: str | None) -> None:
        super().__init__(f"host={root} port={PORT} user=postgres dbname=postgres")
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self._user = user
        self._owner_pid = os.getpid()

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            [str(self.bindir / command[0]), *command[1:]],
            user=self._user,
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}\n{log}")

    def start(self, *, durable: bool = False) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "-N",
        )
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.root}'",
            "port": str(PORT),
            # A test cluster: speed over durability (a benchmark asks for durability).
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on" if durable else "off",
            "full_page_writes": "on" if durable else "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self._pg_ctl("start")
        self.prepare()

    def _pg_ctl(self, action: str, *extra: str) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(PG_CTL_WAIT_SECONDS),
            action,
            *extra,
        )

    def restart(self) -> None:
        """Stop (fast: sessions are terminated) and start again, as an operator would."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self, *, force: bool = False) -> None:
        if os.getpid() != self._owner_pid and not force:
            return  # a forked child exiting must not take the parent's cluster down
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _reap_stale_clusters() -> None:
    # A run killed outright (kill -9) leaves its cluster behind: stop and remove every
    # one whose owning test process is gone.
    for owner_file in Path("/tmp").glob("agent17-pg-*/owner.pid"):
        try:
            owner = int(owner_file.read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            pass
        except (ValueError, OSError):
            continue
        else:
            continue
        bindir, root = find_bindir(), owner_file.parent
        if bindir is not None and (root / "data" / "postmaster.pid").exists():
            stale = Cluster(bindir, root, _unprivileged_user())
            stale.stop(force=True)
        shutil.rmtree(root, ignore_errors=True)


def _unprivileged_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise LookupError(
            f"running as root and there is no user {UNPRIVILEGED_USER!r} to run PostgreSQL as"
        ) from None
    return UNPRIVILEGED_USER


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
    user = _unprivileged_user()
    _reap_stale_clusters()
    root = Path(tempfile.mkdtemp(prefix="agent17-pg-", dir="/tmp"))
    (root / "owner.pid").write_text(str(os.getpid()))
    if user is not None:
        shutil.chown(root, user=user)
    cluster = Cluster(bindir, root, user)
    atexit.register(cluster.stop)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    cluster.start(durable=durable)
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
