"""A team's state on one engine, opened once: the board, the mailbox, and this host's records.

`--store` names where a team's board and mailbox live (StoreLocation):

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

A TeamEngine knows how one engine finds, opens and watches a team's state;
the one choice of engine is `team_engine` (team/workplace.py). Nothing below
the composition root asks which engine it runs on: it asks the TeamState.
"""

from __future__ import annotations

import os
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.armour.paths import StateFolder
from agent17.domain import Clock, IdFactory, utc_now
from agent17.store.board import TaskBoard
from agent17.team.mailbox import TeamMailbox
from agent17.team.sleepers import WatchingSleeper

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


class StoreUrlError(ValueError):
    """A `--store` value that names no store we can open; the message is one line."""


def _redact(text: str, url: str) -> str:
    # Imported here: a team on SQLite never loads a PostgreSQL module.
    from agent17.armour.pg_connection import redact

    return redact(text, url)


def _driver() -> Any:
    from agent17.armour.pg_connection import import_driver

    return import_driver()


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
        return "" if self.url is None else _redact(self.url, self.url)

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
        settings = _driver().conninfo.conninfo_to_dict(self.url)
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
        shown = repr(url) if not isinstance(url, str) else repr(_redact(url, url)[:80])
        raise StoreUrlError(
            f"--store must be a postgresql:// URL (or nothing, for the workspace's SQLite"
            f" files), not {shown}"
        )
    try:
        driver = _driver()
    except ImportError as error:
        raise StoreUrlError(str(error)) from None
    try:
        driver.conninfo.conninfo_to_dict(url)
    except driver.ProgrammingError as error:
        text = _redact(str(error), url).strip()
        reason = text.splitlines()[0] if text else "unreadable"
        raise StoreUrlError(f"--store is not a PostgreSQL URL libpq can read: {reason}") from None
    return StoreLocation(url)


def real_workspace(workspace: Path) -> Path:
    """The workspace as teammates' tools see it: the real path (links resolved)."""
    return Path(os.path.realpath(workspace))


@dataclass(frozen=True, slots=True)
class BoardOptions:
    """How a board is opened: its clock, its ids and its lease (the defaults are real ones)."""

    clock: Clock | None = None
    new_task_id: IdFactory | None = None
    new_claim_token: IdFactory | None = None
    lease_seconds: float = 300.0

    def as_arguments(self) -> dict[str, Any]:
        """The keyword arguments every board's constructor takes."""
        return {
            "clock": self.clock,
            "new_task_id": self.new_task_id,
            "new_claim_token": self.new_claim_token,
            "lease_seconds": self.lease_seconds,
        }


Watch = tuple[WatchingSleeper, Callable[[], None]]
"""A teammate's watching sleeper, and how to stop it watching."""


class TeamState(ABC):
    """A team's board and mailbox, opened on one engine, and this host's state folder."""

    def __init__(
        self, location: StoreLocation, workspace: Path, store: TaskBoard, mailbox: TeamMailbox
    ) -> None:
        self.location = location
        self.workspace = workspace
        self.store = store
        self.mailbox = mailbox
        self._folder: StateFolder | None = None
        self._stops: list[Callable[[], None]] = []

    @property
    @abstractmethod
    def where(self) -> str:
        """Where the board is, for people: its file, or its database (never a password)."""

    @property
    @abstractmethod
    def wakes_by(self) -> str:
        """How a waiting teammate hears of the others' changes, in a few words (say it once)."""

    @abstractmethod
    def watch(self, name: str, *, clock: Clock = utc_now) -> Watch:
        """How teammate `name` waits so that the others' changes wake it, and how to stop that.

        Another process, or another host, can be the one that changed something: a
        message, a task made ready, a lease run out. `clock` is this host's, for a
        board on this host.
        """

    def sleeper(self, name: str, *, clock: Clock = utc_now) -> WatchingSleeper:
        """`watch`, stopped when this state is closed."""
        sleeper, stop = self.watch(name, clock=clock)
        self._stops.append(stop)
        return sleeper

    def records(self) -> StateFolder:
        """This host's state folder, for its ledger and audit trail (checked once, made here)."""
        if self._folder is None:
            self._folder = StateFolder.open(self.workspace)
        return self._folder

    def close(self) -> None:
        """Close every connection (the board and the messages stay)."""
        for stop in self._stops:
            stop()
        self.mailbox.close()
        self.store.close()


class TeamEngine(ABC):
    """How one engine finds and opens a team's state."""

    @abstractmethod
    def board_exists(self, workspace: Path) -> bool:
        """True if there is a board to read (never creates one)."""

    @abstractmethod
    def open_board(self, workspace: Path, options: BoardOptions) -> TaskBoard:
        """The team's task board (made on first use)."""

    @abstractmethod
    def open(self, workspace: Path, options: BoardOptions) -> TeamState:
        """The board first (an unreachable server or a bad file stops here), then the mail."""
