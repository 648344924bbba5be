"""A team on the workspace's SQLite files: one machine, one state folder checked once."""

from __future__ import annotations

from pathlib import Path

from agent17.domain import Clock, utc_now
from agent17.store.paths import STATE_DIRNAME, TASK_DB_NAME, StateFolder
from agent17.store.sqlite import SqliteTaskStore
from agent17.team.mailbox import Mailbox
from agent17.team.sleepers import ChangeWatchingSleeper
from agent17.team.state import BoardOptions, StoreLocation, TeamEngine, TeamState, Watch


class SqliteTeamState(TeamState):
    """The board and mailbox files of one workspace, and the folder that holds them."""

    def __init__(self, folder: StateFolder, store: SqliteTaskStore, mailbox: Mailbox) -> None:
        super().__init__(StoreLocation(), folder.workspace, store, mailbox)
        self._folder = folder
        self._board = store
        self._mail = mailbox

    @property
    def where(self) -> str:
        return str(self._board.workspace)

    def watch(self, name: str, *, clock: Clock = utc_now) -> Watch:
        # The files' data versions, looked at every 0.1 s, and the first lease deadline
        # on this host's clock: the board is on this host.
        watcher = ChangeWatchingSleeper(
            versions=(self._board.data_version, self._mail.data_version),
            next_deadline=self._board.next_lease_expiry,
            clock=clock,
        )
        return watcher, lambda: None


class SqliteTeam(TeamEngine):
    """A team whose board and mailbox are the workspace's SQLite files."""

    def board_exists(self, workspace: Path) -> bool:
        return (workspace / STATE_DIRNAME / TASK_DB_NAME).exists()

    def open_board(self, workspace: Path, options: BoardOptions) -> SqliteTaskStore:
        return SqliteTaskStore(workspace, **options.as_arguments())

    def open(self, workspace: Path, options: BoardOptions) -> SqliteTeamState:
        folder = StateFolder.open(workspace)
        store = SqliteTaskStore(folder, **options.as_arguments())
        try:
            mailbox = Mailbox(folder)
        except BaseException:
            store.close()
            raise
        return SqliteTeamState(folder, store, mailbox)
