"""A team on the workspace's SQLite files: one machine, one state folder checked once."""

from __future__ import annotations

import threading
from pathlib import Path

from agent17.armour.paths import STATE_DIRNAME, TASK_DB_NAME, StateFolder
from agent17.domain import Clock, utc_now
from agent17.store.sqlite import SqliteTaskStore
from agent17.team.file_wakeups import FileNotifications, FolderWatch
from agent17.team.inotify import Unavailable
from agent17.team.mailbox import Mailbox
from agent17.team.sleepers import LOOK_EVERY_SECONDS, ChangeHints, ChangeWatchingSleeper, LookEvery
from agent17.team.state import BoardOptions, StoreLocation, TeamEngine, TeamState, Watch


class SqliteTeamState(TeamState):
    """The board and mailbox files of one workspace, and the folder that holds them."""

    def __init__(self, folder: StateFolder, store: SqliteTaskStore, mailbox: Mailbox) -> None:
        super().__init__(StoreLocation(), folder.workspace, store, mailbox)
        self._folder = folder
        self._board = store
        self._mail = mailbox
        # Opened on the first watch (a board viewer never needs one), once for every teammate.
        self._watch_lock = threading.Lock()
        self._folder_watch: FolderWatch | Unavailable | None = None

    @property
    def where(self) -> str:
        return str(self._board.workspace)

    def _notifications(self) -> FolderWatch | Unavailable:
        with self._watch_lock:
            if self._folder_watch is None:
                files = (self._board.path.name, self._mail.path.name)
                try:
                    self._folder_watch = FolderWatch.open(
                        self._board.path.parent, [*files, *(f"{name}-wal" for name in files)]
                    )
                except Unavailable as error:
                    self._folder_watch = error
            return self._folder_watch

    @property
    def wakes_by(self) -> str:
        watch = self._notifications()
        if isinstance(watch, Unavailable):
            reason = str(watch)
        elif watch.lost is None:
            return f"file notifications (inotify on {watch.file_system})"
        else:
            reason = watch.lost
        return f"a look every {LOOK_EVERY_SECONDS:g} s (no file notifications: {reason})"

    def watch(self, name: str, *, clock: Clock = utc_now) -> Watch:
        watch = self._notifications()
        if isinstance(watch, Unavailable):
            return self._watcher(LookEvery(), clock), lambda: None
        notifications = FileNotifications(watch)
        return self._watcher(notifications, clock), notifications.close

    def _watcher(self, hints: ChangeHints, clock: Clock) -> ChangeWatchingSleeper:
        # The files' data versions, looked at when the folder's notifications hint at a
        # change (or every 0.1 s without them), and the first lease deadline on this
        # host's clock: the board is on this host.
        return ChangeWatchingSleeper(
            versions=(self._board.data_version, self._mail.data_version),
            next_deadline=self._board.next_lease_expiry,
            clock=clock,
            hints=hints,
        )

    def close(self) -> None:
        super().close()  # the sleepers' hints first: they poll the watch's descriptor
        with self._watch_lock:
            if isinstance(self._folder_watch, FolderWatch):
                self._folder_watch.close()


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
