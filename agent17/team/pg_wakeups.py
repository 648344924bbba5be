"""Wake-ups across hosts on PostgreSQL: a LISTEN session, and the sleeper that waits on it.

The twin of `ChangeWatchingSleeper` (team/sleepers.py) for a team whose board
and mailbox are in a PostgreSQL database. SQLite's sleeper looks at the files'
data versions every 0.1 s; a teammate on another host has no file to look at,
so here the server tells it. The schemas' triggers send a NOTIFY in the
transaction that makes a task ready (created ready, its last dependency
completed, its lease run out: channel `agent17_board`) or that queues a
message (channel `agent17_mail`, the recipient as payload). PostgreSQL delivers
a notification when, and only if, that transaction commits, so a listener
never hears of a change it cannot see yet.

A notification is a hint, never the truth: the teammate rescans the board and
its mailbox, and the poll stays as the fallback (notifications sent while the
listening session was down are gone for good). Hence:

- `NotificationListener` is one dedicated session (never the store's, which
  reconnects silently and would drop the LISTEN with it). When that session
  is lost (a server restart, `pg_terminate_backend`, a network blip) the next
  wait opens a new one, LISTENs again and reports the reconnect itself as a
  wake: whatever happened meanwhile was not heard, so the teammate looks.
- `NotifySleeper.wait` ends on a notification that concerns this teammate (any
  board one, mail to its name), on its in-process wake event, at the moment the
  first lease now held runs out, or after the poll interval. That moment is
  measured on the server's clock (the store asks the server how many seconds
  are left), never this host's: the hosts' clocks differ, the board has one.
- `mark()`, right before each scan, drops what was heard before it: the scan
  sees those changes anyway, and whatever is committed during the scan stays
  queued, so the next wait ends at once instead of missing it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agent17.armour.pg_schema import plain_name
from agent17.domain import Refusal
from agent17.team.sleepers import NewsWait

if TYPE_CHECKING:
    import psycopg

    from agent17.armour.pg_transaction import Row

CHECK_EVERY_SECONDS: Final = 0.25
"""How often a wait looks at the in-process wake event (notifications end it at once)."""


@dataclass(frozen=True, slots=True)
class Heard:
    """One notification: its channel and payload."""

    channel: str
    payload: str


class NotificationListener:
    """One dedicated LISTEN session on some channels, opened again whenever it is lost."""

    def __init__(
        self,
        open_session: Callable[[], psycopg.Connection[Row]],
        channels: Sequence[str],
        driver: Any,
    ) -> None:
        self._open = open_session
        self.channels = tuple(plain_name(channel) for channel in channels)
        self._driver = driver
        self._connection: psycopg.Connection[Row] | None = None
        self.reconnects = 0
        """How many times the session was lost and opened again."""
        self._subscribe()  # the first one must work: a teammate that cannot listen says so

    def _subscribe(self) -> None:
        connection = self._open()
        try:
            for channel in self.channels:
                connection.execute(f"LISTEN {channel}")
        except BaseException:
            connection.close()
            raise
        self._connection = connection

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening session (None while it is down)."""
        connection = self._connection
        return None if connection is None else int(connection.info.backend_pid)

    def wait(self, timeout: float) -> list[Heard] | None:
        """What is heard within `timeout` seconds (maybe nothing); None if the session was lost.

        None means a new session now listens but notifications may have been missed.
        While the server cannot be reached, each call tries once and waits `timeout`.
        """
        connection = self._connection
        if connection is None:
            return self._resubscribe(timeout)
        try:
            return [
                Heard(note.channel, note.payload)
                for note in connection.notifies(timeout=max(timeout, 0.0), stop_after=1)
            ]
        except self._driver.Error:
            self._drop()
            return self._resubscribe(0.0)
        except BaseException:
            self._drop()  # interrupted mid-read: never reuse a session in an unknown state
            raise

    def _resubscribe(self, timeout: float) -> list[Heard] | None:
        try:
            self._subscribe()
        except (Refusal, self._driver.Error):
            time.sleep(timeout)  # still unreachable: the poll goes on, try again next time
            return []
        self.reconnects += 1
        return None

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """End the listening session."""
        self._drop()


class NotifySleeper(NewsWait):
    """A teammate's wait on PostgreSQL: ended by a notification, a lease deadline or the poll.

    `lease_left()` gives the seconds until the first lease now held runs out, on
    the board's clock (None when no lease is held): `PostgresTaskStore.
    seconds_to_next_lease_expiry`. `last_reason` says what ended the last wait.
    """

    def __init__(
        self,
        listener: NotificationListener,
        name: str,
        *,
        board_channel: str,
        mail_channel: str,
        lease_left: Callable[[], float | None],
        check_every: float = CHECK_EVERY_SECONDS,
    ) -> None:
        self.listener = listener
        self.name = name
        self._board = board_channel
        self._mail = mail_channel
        self.check_every = check_every
        super().__init__(lease_left)

    def _concerns_me(self, heard: Heard) -> bool:
        return heard.channel == self._board or (
            heard.channel == self._mail and heard.payload == self.name
        )

    def mark(self) -> None:
        """Drop what was heard so far (the coming scan sees it); keep what comes after."""
        while self.listener.wait(0.0):
            pass

    def _pause(self, seconds: float, wake: threading.Event) -> str | None:
        heard = self.listener.wait(min(self.check_every, seconds))
        if heard is None:
            return "listener reconnected"
        return "notified" if any(self._concerns_me(note) for note in heard) else None
