"""A team in one PostgreSQL database: teammates on many hosts, woken by LISTEN/NOTIFY."""

from __future__ import annotations

from pathlib import Path

from agent17.domain import Clock, ErrorCode, TaskError, utc_now
from agent17.store.postgres import PostgresTaskStore
from agent17.team.mailbox import MailboxError
from agent17.team.pg_mailbox import BOARD_CHANNEL, MAIL_CHANNEL, PostgresMailbox
from agent17.team.pg_wakeups import NotifySleeper
from agent17.team.state import BoardOptions, StoreLocation, TeamEngine, TeamState, Watch


class PostgresTeamState(TeamState):
    """The board and mailbox in a database; this host's records stay in its workspace."""

    def __init__(
        self,
        location: StoreLocation,
        workspace: Path,
        store: PostgresTaskStore,
        mailbox: PostgresMailbox,
    ) -> None:
        super().__init__(location, workspace, store, mailbox)
        self._board = store
        self._mail = mailbox

    @property
    def where(self) -> str:
        return self._board.where

    @property
    def wakes_by(self) -> str:
        return "LISTEN/NOTIFY (the server's notifications)"

    def watch(self, name: str, *, clock: Clock = utc_now) -> Watch:
        # LISTEN/NOTIFY on a session of its own (closed by the stop), and the lease
        # deadline on the board's clock, never this host's.
        listener = self._mail.listen()
        sleeper = NotifySleeper(
            listener,
            name,
            board_channel=BOARD_CHANNEL,
            mail_channel=MAIL_CHANNEL,
            lease_left=self._board.seconds_to_next_lease_expiry,
        )
        return sleeper, listener.close


class PostgresTeam(TeamEngine):
    """A team whose board and mailbox are in the PostgreSQL database at `location`."""

    def __init__(self, location: StoreLocation) -> None:
        assert location.url is not None
        self._location = location
        self._url: str = location.url

    def board_exists(self, workspace: Path) -> bool:
        try:
            PostgresTaskStore(self._url, create=False).close()
        except TaskError as error:
            if error.code == ErrorCode.STORE_NOT_FOUND:
                return False
            raise
        return True

    def open_board(self, workspace: Path, options: BoardOptions) -> PostgresTaskStore:
        arguments = options.as_arguments()
        try:
            return PostgresTaskStore(self._url, create=False, **arguments)
        except TaskError as error:
            if error.code != ErrorCode.STORE_NOT_FOUND:
                raise
        # A new board: not beside tables of the team's names that are another program's (or
        # of another version), which the mailbox would refuse once the board was made.
        try:
            PostgresMailbox(self._url, create=False).close()
        except MailboxError as error:
            if error.code != ErrorCode.STORE_NOT_FOUND:
                raise
        return PostgresTaskStore(self._url, **arguments)

    def open(self, workspace: Path, options: BoardOptions) -> PostgresTeamState:
        store = self.open_board(workspace, options)
        try:
            mailbox = PostgresMailbox(self._url)
        except BaseException:
            store.close()
            raise
        return PostgresTeamState(self._location, workspace, store, mailbox)
