"""A throwaway PostgreSQL cluster on this machine: for the course's notebook 08, tests, benchmarks.

`start_cluster()` runs `initdb` and `pg_ctl` from the machine's PostgreSQL
binaries in a fresh folder under /tmp, listening on a Unix socket in that folder
only (no TCP port, so nothing else on the machine can meet it, and no port can
clash), and stops and removes it when the Python process exits (or on `stop()`).
Nothing here is needed to *use* PostgresTaskStore: any server does; this is for
trying the team on PostgreSQL on one machine.

PostgreSQL refuses to run as root, so as root the cluster runs as the
unprivileged user `postgres` (Debian's package makes it) in a folder chowned to
it; a folder private to root (pytest's, a notebook's temporary one) would not
do, hence /tmp. A cluster whose owning process was killed outright is stopped
and removed by the next start.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agent17.armour.pg_connection import import_driver

if TYPE_CHECKING:
    import psycopg

UNPRIVILEGED_USER: Final = "postgres"
PG_CTL_WAIT_SECONDS: Final = 60
PORT: Final = 5432  # names the socket file only: the cluster listens on no TCP port
INSTALL_HINT: Final = "install PostgreSQL (apt-get install postgresql)"


class ClusterUnavailable(RuntimeError):
    """No cluster can be started here (no binaries, no user to run it as, initdb failed)."""


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


def unprivileged_user() -> str | None:
    """Who runs the cluster: None (this user) unless we are root, then `postgres`."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise ClusterUnavailable(
            f"running as root and there is no user {UNPRIVILEGED_USER!r} to run PostgreSQL as"
        ) from None
    return UNPRIVILEGED_USER


class ThrowawayCluster:
    """A cluster of our own, in `root` (data/, the socket, the log), run as `user`."""

    def __init__(self, bindir: Path, root: Path, user: str | None) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self._user = user
        self._owner_pid = os.getpid()

    @property
    def admin_dsn(self) -> str:
        """The superuser's connection string to the `postgres` database."""
        return self.dsn("postgres")

    def dsn(self, dbname: str) -> str:
        """A libpq connection string to `dbname` on this cluster (as the superuser)."""
        return f"host={self.root} port={PORT} user=postgres dbname={dbname}"

    def url(self, dbname: str) -> str:
        """A `postgresql://` URL to `dbname` (the socket folder as the host, %-encoded)."""
        host = urllib.parse.quote(str(self.root), safe="")
        return f"postgresql://postgres@{host}:{PORT}/{dbname}"

    @contextlib.contextmanager
    def admin(self, dbname: str = "postgres") -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        """An autocommit superuser connection."""
        driver = import_driver()  # often a process's first import of the driver
        connection: psycopg.Connection[tuple[object, ...]]
        connection = driver.connect(self.dsn(dbname), autocommit=True)
        try:
            yield connection
        finally:
            connection.close()

    def create_database(self, dbname: str) -> str:
        """A new, empty database; returns its URL."""
        with self.admin() as connection:
            connection.execute(f'CREATE DATABASE "{dbname}"')
        return self.url(dbname)

    def drop_database(self, dbname: str) -> None:
        """Drop `dbname` for good, ending any session still on it."""
        with self.admin() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')

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
            raise ClusterUnavailable(
                f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}\n{log}"
            )

    def start(self, *, durable: bool = False, settings: Mapping[str, str] | None = None) -> None:
        """initdb, then start the server; `durable` keeps fsync and full page writes on."""
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C", "-N",
        )  # fmt: skip
        conf = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.root}'",
            "port": str(PORT),
            # Throwaway: speed over durability, unless a benchmark asks for durability.
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on" if durable else "off",
            "full_page_writes": "on" if durable else "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "log_min_messages": "warning",
            **(settings or {}),
        }
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as file:
            file.writelines(f"{key} = {value}\n" for key, value in conf.items())
        self._pg_ctl("start")

    def _pg_ctl(self, action: str, *extra: str) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
            "-t", str(PG_CTL_WAIT_SECONDS), action, *extra,
        )  # fmt: skip

    def restart(self) -> None:
        """Stop (fast: sessions are terminated) and start again, as an operator would."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self, *, force: bool = False) -> None:
        """Stop the server and remove its folder (a forked child leaves it alone)."""
        if os.getpid() != self._owner_pid and not force:
            return  # a forked child exiting must not take the parent's cluster down
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ClusterUnavailable):
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def reap_stale_clusters() -> None:
    """Stop and remove every cluster under /tmp whose owning process is gone."""
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
            with contextlib.suppress(ClusterUnavailable):
                ThrowawayCluster(bindir, root, unprivileged_user()).stop(force=True)
        shutil.rmtree(root, ignore_errors=True)


def start_cluster(
    *, durable: bool = False, bindir: Path | None = None, settings: Mapping[str, str] | None = None
) -> ThrowawayCluster:
    """A cluster of our own, started now, stopped and removed at exit (or by `stop()`).

    ClusterUnavailable (one readable line first) when none can be started here.
    """
    bindir = bindir if bindir is not None else find_bindir()
    if bindir is None:
        raise ClusterUnavailable(f"no PostgreSQL binaries (initdb, pg_ctl) found: {INSTALL_HINT}")
    user = unprivileged_user()
    reap_stale_clusters()
    root = Path(tempfile.mkdtemp(prefix="agent17-pg-", dir="/tmp"))
    (root / "owner.pid").write_text(str(os.getpid()))
    if user is not None:
        shutil.chown(root, user=user)
    cluster = ThrowawayCluster(bindir, root, user)
    atexit.register(cluster.stop)
    try:
        cluster.start(durable=durable, settings=settings)
    except BaseException:
        cluster.stop()
        raise
    return cluster
