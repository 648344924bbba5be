"""Where a team works: its board and its mailbox, opened together from one `--store` URL.

The one way every command opens a team's state:

- no URL (the default): the workspace's SQLite files, `tasks.sqlite3` and
  `mailbox.sqlite3` under `<workspace>/.agent_tutorial/`: one machine;
- a `postgresql://` URL: one PostgreSQL database holds the board, the mailbox,
  the plans and the team's members, so teammates on other hosts join the team
  with the same URL.

Either way the workspace stays each teammate's working directory on its own
host: its files, its shell, and two records that belong to that host, not to
the board. The idempotency ledger remembers which side effects this host's
runs already made (a retried run on this machine must not repeat them, and
they happened here, in this workspace); the audit trail is the record of what
the tools did on this machine (whoever reads it reads the machine's own
story). Neither is shared state the team coordinates through.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent17.domain import Clock, IdFactory, TaskError, utc_now
from agent17.store.paths import STATE_DIRNAME, TASK_DB_NAME
from agent17.store.pg_connection import import_driver, redact
from agent17.store.pg_schema import STORE_NOT_FOUND
from agent17.store.postgres import PostgresTaskStore
from agent17.store.sqlite import SqliteTaskStore
from agent17.team.mailbox import Mailbox, MailboxError, TeamMailbox
from agent17.team.pg_mailbox import BOARD_CHANNEL, MAIL_CHANNEL, PostgresMailbox
from agent17.team.pg_wakeups import NotifySleeper
from agent17.team.sleepers import ChangeWatchingSleeper, WatchingSleeper
from agent17.team.wakeups import WakeRegistry

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")

TaskBoard = SqliteTaskStore | PostgresTaskStore
"""A task store of either engine (the same contract)."""


class StoreUrlError(ValueError):
    """A `--store` value that names no store we can open; the message is one line."""


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where a team's board and mailbox live: `url` None means the workspace's SQLite files."""

    url: str | None = None

    @property
    def on_postgres(self) -> bool:
        """True when the board and mailbox are in a PostgreSQL database."""
        return self.url is not None

    def shown(self) -> str:
        """The URL as it may be printed: any password (user:password@, password=) as ***."""
        return "" if self.url is None else redact(self.url, self.url)

    def for_a_child(self) -> tuple[str | None, dict[str, str]]:
        """The URL to pass on a child's command line, and what to add to its environment.

        A command line is public on the machine (`ps`, /proc/<pid>/cmdline), the
        environment is not: a password in the URL (user:password@, ?password=) goes
        to the child as libpq's PGPASSWORD instead.
        """
        if self.url is None:
            return None, {}
        try:
            parts = urllib.parse.urlsplit(self.url)
            password = parts.password
        except ValueError:
            return self._rebuilt_for_a_child()
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        in_query = [value for key, value in query if key == "password"]
        if password is None and not in_query:
            return self.url, {}
        netloc = parts.netloc
        if password is not None:
            user, hosts = netloc.rsplit("@", 1)
            netloc = f"{user.split(':', 1)[0]}@{hosts}"
        kept = urllib.parse.urlencode([(k, v) for k, v in query if k != "password"])
        # By hand: urlunsplit drops the // of an empty host (postgresql:///db?host=...).
        url = f"{parts.scheme}://{netloc}{parts.path}" + (f"?{kept}" if kept else "")
        # libpq: a password in the URL itself wins over PGPASSWORD; the query's over the userinfo's.
        secret = in_query[-1] if in_query else urllib.parse.unquote(password or "")
        return url, {"PGPASSWORD": secret}

    def _rebuilt_for_a_child(self) -> tuple[str, dict[str, str]]:
        # libpq reads URLs that urllib cannot split (`user:p]w@host`): libpq's own parser
        # takes it apart, and every setting but the password goes into the query of a
        # URL with no userinfo, which libpq reads the same way.
        assert self.url is not None
        settings = import_driver().conninfo.conninfo_to_dict(self.url)
        secret = settings.pop("password", None)
        if secret is None:
            return self.url, {}
        query = urllib.parse.urlencode(sorted((k, str(v)) for k, v in settings.items()))
        return f"postgresql://?{query}", {"PGPASSWORD": str(secret)}

    def __repr__(self) -> str:
        return f"StoreLocation({self.shown()!r})" if self.url is not None else "StoreLocation()"

    def board_command(self, workspace: Path) -> str:
        """The `agent17 board` command line that shows this board."""
        if self.url is None:
            return f"agent17 board --workspace {workspace}"
        return f"agent17 board --store '{self.shown()}'"


def parse_store_url(url: str | None) -> StoreLocation:
    """The location a `--store` value names, checked without connecting (StoreUrlError)."""
    if url is None:
        return StoreLocation()
    if not isinstance(url, str) or not url.startswith(POSTGRES_SCHEMES):
        shown = repr(url) if not isinstance(url, str) else repr(redact(url, url)[:80])
        raise StoreUrlError(
            f"--store must be a postgresql:// URL (or nothing, for the workspace's SQLite"
            f" files), not {shown}"
        )
    try:
        driver = import_driver()
    except ImportError as error:
        raise StoreUrlError(str(error)) from None
    try:
        driver.conninfo.conninfo_to_dict(url)
    except driver.ProgrammingError as error:
        text = redact(str(error), url).strip()
        reason = text.splitlines()[0] if text else "unreadable"
        raise StoreUrlError(f"--store is not a PostgreSQL URL libpq can read: {reason}") from None
    return StoreLocation(url)


def board_exists(location: StoreLocation, workspace: Path) -> bool:
    """True if there is a board to read (never creates one)."""
    if location.url is None:
        return (workspace / STATE_DIRNAME / TASK_DB_NAME).exists()
    try:
        PostgresTaskStore(location.url, create=False).close()
    except TaskError as error:
        if error.code == STORE_NOT_FOUND:
            return False
        raise
    return True


def open_board(
    location: StoreLocation,
    workspace: Path,
    *,
    clock: Clock | None = None,
    new_task_id: IdFactory | None = None,
    new_claim_token: IdFactory | None = None,
    lease_seconds: float = 300.0,
) -> TaskBoard:
    """The team's task store at `location` (made on first use)."""
    options: dict[str, Any] = {
        "clock": clock,
        "new_task_id": new_task_id,
        "new_claim_token": new_claim_token,
        "lease_seconds": lease_seconds,
    }
    if location.url is None:
        return SqliteTaskStore(workspace, **options)
    try:
        return PostgresTaskStore(location.url, create=False, **options)
    except TaskError as error:
        if error.code != STORE_NOT_FOUND:
            raise
    # A new board: not beside tables of the team's names that are another program's (or
    # of another version), which the mailbox would refuse once the board was made.
    try:
        PostgresMailbox(location.url, create=False).close()
    except MailboxError as error:
        if error.code != STORE_NOT_FOUND:
            raise
    return PostgresTaskStore(location.url, **options)


def open_mailbox(
    location: StoreLocation, workspace: Path, *, wakeups: WakeRegistry | None = None
) -> TeamMailbox:
    """The team's mailbox (with its plans and members) at `location` (made on first use)."""
    if location.url is None:
        return Mailbox(workspace, wakeups=wakeups)
    return PostgresMailbox(location.url, wakeups=wakeups)


def watching_sleeper(
    store: TaskBoard, mailbox: TeamMailbox, name: str, *, clock: Clock = utc_now
) -> tuple[WatchingSleeper, Callable[[], None]]:
    """How teammate `name` waits so that the others' changes wake it, and how to stop that.

    SQLite: the files' data versions, looked at every 0.1 s, and the first lease
    deadline on `clock` (this host's: the board is on this host). PostgreSQL:
    LISTEN/NOTIFY on a session of its own (closed by the second value), and the
    deadline on the board's clock. Another process, or another host, can be the
    one that changed something: a message, a task made ready, a lease run out.
    """
    if isinstance(store, SqliteTaskStore) and isinstance(mailbox, Mailbox):
        watcher = ChangeWatchingSleeper(
            versions=(store.data_version, mailbox.data_version),
            next_deadline=store.next_lease_expiry,
            clock=clock,
        )
        return watcher, lambda: None
    if isinstance(store, PostgresTaskStore) and isinstance(mailbox, PostgresMailbox):
        listener = mailbox.listen()
        sleeper = NotifySleeper(
            listener,
            name,
            board_channel=BOARD_CHANNEL,
            mail_channel=MAIL_CHANNEL,
            lease_left=store.seconds_to_next_lease_expiry,
        )
        return sleeper, listener.close
    raise TypeError("the board and the mailbox must be on the same engine")


@dataclass
class Workplace:
    """A team's board and mailbox on one engine, and how a teammate there waits for work."""

    location: StoreLocation
    workspace: Path
    store: TaskBoard
    mailbox: TeamMailbox
    _stops: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        location: StoreLocation,
        workspace: Path,
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
    ) -> Workplace:
        """Open the board first (an unreachable server or a bad file stops here), then the mail."""
        store = open_board(
            location,
            workspace,
            clock=clock,
            new_task_id=new_task_id,
            new_claim_token=new_claim_token,
            lease_seconds=lease_seconds,
        )
        try:
            mailbox = open_mailbox(location, workspace)
        except BaseException:
            store.close()
            raise
        return cls(location, workspace, store, mailbox)

    @property
    def where(self) -> str:
        """Where the board is, for people: its file, or its database (never a password)."""
        store = self.store
        return str(store.workspace) if isinstance(store, SqliteTaskStore) else store.where

    def sleeper(self, name: str, *, clock: Clock = utc_now) -> WatchingSleeper:
        """How teammate `name` in its own process waits: woken by the others' changes."""
        sleeper, stop = watching_sleeper(self.store, self.mailbox, name, clock=clock)
        self._stops.append(stop)
        return sleeper

    def close(self) -> None:
        """Close every connection (the board and the messages stay)."""
        for stop in self._stops:
            stop()
        self.mailbox.close()
        self.store.close()


def real_workspace(workspace: Path) -> Path:
    """The workspace as teammates' tools see it: the real path (links resolved)."""
    return Path(os.path.realpath(workspace))
