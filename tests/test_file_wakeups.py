"""File notifications on SQLite: a real inotify watch on a real state folder, and its fallbacks.

The sleepers here are given a safety look of 30 s and a poll interval longer
still, so only a notification (or the in-process wake) can end a wait within
the deadlines below. Nothing is ordered by a sleep: another connection commits
once the sleeper's pause has begun (a threading.Event set by its hints).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent17 import Mailbox, SqliteTaskStore
from agent17.deterministic import COURSE_START
from agent17.team.file_wakeups import WAKEUPS_VARIABLE, FileNotifications, FolderWatch
from agent17.team.inotify import Unavailable
from agent17.team.sleepers import ChangeWatchingSleeper, LookEvery
from agent17.team.sqlite_state import SqliteTeam
from agent17.team.state import BoardOptions
from agent17.team.wakeups import WakeEvent

LONG = 30.0  # the safety look and the poll interval: never reached in a passing test
DEADLINE = 1.0


class Paused:
    """Hints that say when the sleeper first blocks, around real file notifications."""

    def __init__(self, hints: FileNotifications) -> None:
        self.hints = hints
        self.blocked = threading.Event()

    def next_look(self) -> float:
        return self.hints.next_look()

    def pause(self, seconds: float, wake: threading.Event) -> None:
        self.blocked.set()
        self.hints.pause(seconds, wake)


@pytest.fixture
def board(tmp_path: Path) -> Iterator[tuple[SqliteTaskStore, Mailbox, FolderWatch]]:
    """A board and a mailbox in tmp_path, and a watch on their folder."""
    with SqliteTaskStore(tmp_path) as store, Mailbox(tmp_path) as mailbox:
        files = [store.path.name, mailbox.path.name]
        watch = FolderWatch.open(store.path.parent, [*files, *(f"{f}-wal" for f in files)])
        yield store, mailbox, watch
        watch.close()


def _sleeper(
    store: SqliteTaskStore, mailbox: Mailbox, watch: FolderWatch
) -> tuple[ChangeWatchingSleeper, Paused, list[int]]:
    looks: list[int] = []

    def board_version() -> int:
        looks.append(1)
        return store.data_version()

    hints = Paused(FileNotifications(watch, safety_look=LONG))
    sleeper = ChangeWatchingSleeper(
        versions=(board_version, mailbox.data_version),
        next_deadline=store.next_lease_expiry,
        clock=lambda: COURSE_START,
        hints=hints,
    )
    return sleeper, hints, looks


def _after_it_blocks(
    hints: Paused, action: Callable[[], object], done: list[float] | None = None
) -> threading.Thread:
    def run() -> None:
        assert hints.blocked.wait(10)
        action()
        if done is not None:
            done.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_commit_by_another_connection_ends_the_wait_through_a_notification(
    board: tuple[SqliteTaskStore, Mailbox, FolderWatch], tmp_path: Path
) -> None:
    store, mailbox, watch = board
    sleeper, hints, _ = _sleeper(store, mailbox, watch)
    with SqliteTaskStore(tmp_path) as other, Mailbox(tmp_path) as other_mail:
        commits: list[Callable[[], object]] = [
            lambda: other.create_task("new work"),
            lambda: other_mail.send("alice", sender="lead", kind="text", body="{}"),
        ]
        for commit in commits:
            committed: list[float] = []
            sleeper.mark()
            hints.blocked.clear()
            thread = _after_it_blocks(hints, commit, committed)
            assert sleeper.wait(LONG, WakeEvent()) is True
            woke = time.monotonic()
            thread.join()
            assert sleeper.last_reason == "changed"
            assert woke - committed[0] < DEADLINE
    hints.hints.close()


def test_its_own_commits_are_heard_but_do_not_end_the_wait(
    board: tuple[SqliteTaskStore, Mailbox, FolderWatch],
) -> None:
    store, mailbox, watch = board
    sleeper, hints, looks = _sleeper(store, mailbox, watch)
    sleeper.mark()
    store.create_task("mine")  # heard (its -wal is written), but its data version stays
    looks.clear()
    started = time.monotonic()
    assert sleeper.wait(0.3, WakeEvent()) is False
    assert sleeper.last_reason == "poll interval"
    assert time.monotonic() - started >= 0.3
    # The event was heard: looks followed it (the commit could have been in its fsync),
    # a handful, not a busy loop; with no event there would be two (the first, the last).
    assert 3 <= len(looks) <= 40, len(looks)
    hints.hints.close()


def test_an_in_process_wake_rings_the_poll(
    board: tuple[SqliteTaskStore, Mailbox, FolderWatch],
) -> None:
    store, mailbox, watch = board
    sleeper, hints, _ = _sleeper(store, mailbox, watch)
    wake = WakeEvent()
    sleeper.mark()
    thread = _after_it_blocks(hints, wake.set)
    started = time.monotonic()
    assert sleeper.wait(LONG, wake) is True
    assert time.monotonic() - started < DEADLINE
    assert sleeper.last_reason == "woken"
    thread.join()
    hints.hints.close()
    with pytest.raises(TypeError, match="WakeEvent"):
        hints.hints.pause(0.01, threading.Event())


def test_a_watch_whose_folder_went_away_falls_back_to_the_poll(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    watch = FolderWatch.open(folder, ["tasks.sqlite3-wal"])
    hints = FileNotifications(watch, safety_look=LONG)
    assert hints.next_look() == LONG
    folder.rmdir()
    wake = WakeEvent()
    hints.pause(LONG, wake)  # the removal is heard at once
    assert watch.lost is not None and "gone" in watch.lost
    hints.pause(0.3, wake)  # 0.25 s after the event the looks are the 0.1 s poll's
    assert hints.next_look() == 0.1
    hints.close()
    watch.close()


# -- fallbacks -------------------------------------------------------------------------


class FailingLibc:
    """A C library whose inotify fails as a machine's can (and statfs says what it is told)."""

    def __init__(self, *, magic: int = 0xEF53, init: int = 0, add_watch: int = 0) -> None:
        self.magic = magic
        self.init_errno = init
        self.add_watch_errno = add_watch
        self.opened: list[int] = []

    def statfs(self, path: bytes, buffer: Any) -> int:
        ctypes.c_long.from_buffer(buffer).value = self.magic
        return 0

    def inotify_init1(self, flags: int) -> int:
        if self.init_errno:
            ctypes.set_errno(self.init_errno)
            return -1
        self.opened.append(os.eventfd(0))  # a real descriptor, to see that it is closed
        return self.opened[-1]

    def inotify_add_watch(self, descriptor: int, path: bytes, mask: int) -> int:
        ctypes.set_errno(self.add_watch_errno)
        return -1 if self.add_watch_errno else 1


@pytest.mark.parametrize(
    ("libc", "reason"),
    [
        (FailingLibc(init=errno.EMFILE), "inotify_init1 failed: Too many open files"),
        (FailingLibc(add_watch=errno.ENOSPC), "fs.inotify.max_user_watches"),
        (FailingLibc(magic=0x6969), "the state folder is on nfs, where writes made on another"),
        (FailingLibc(magic=0x65735546), "on fuse"),
        (FailingLibc(magic=0x12345678), "on 0x12345678"),
    ],
)
def test_notifications_that_cannot_hear_every_change_are_unavailable_with_a_reason(
    tmp_path: Path, libc: FailingLibc, reason: str
) -> None:
    with pytest.raises(Unavailable, match=reason):
        FolderWatch.open(tmp_path, ["tasks.sqlite3-wal"], libc=libc)
    for descriptor in libc.opened:
        with pytest.raises(OSError):
            os.fstat(descriptor)  # closed again: nothing leaks


def test_the_environment_switch_turns_notifications_off(tmp_path: Path) -> None:
    with pytest.raises(Unavailable, match=f"^{WAKEUPS_VARIABLE}=poll$"):
        FolderWatch.open(tmp_path, [], environ={WAKEUPS_VARIABLE: "poll"})


def test_a_team_without_notifications_looks_every_tenth_of_a_second_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WAKEUPS_VARIABLE, "poll")
    state = SqliteTeam().open(tmp_path, BoardOptions())
    try:
        assert state.wakes_by == (
            "a look every 0.1 s (no file notifications: AGENT17_WAKEUPS=poll)"
        )
        sleeper, stop = state.watch("alice")
        assert isinstance(sleeper, ChangeWatchingSleeper)
        assert isinstance(sleeper.hints, LookEvery) and sleeper.hints.seconds == 0.1
        sleeper.mark()
        with SqliteTaskStore(tmp_path) as other:
            other.create_task("new work")
        started = time.monotonic()
        assert sleeper.wait(LONG, WakeEvent()) is True  # the look saw it
        assert time.monotonic() - started < DEADLINE
        stop()
    finally:
        state.close()


def _descriptors() -> list[str]:
    folder = Path("/proc/self/fd")
    links = []
    for name in os.listdir(folder):
        with contextlib.suppress(FileNotFoundError):  # the listing's own, closed already
            links.append(os.readlink(folder / name))
    return links


def test_one_inotify_instance_serves_every_teammate_and_nothing_is_left_open(
    tmp_path: Path,
) -> None:
    before = _descriptors()
    state = SqliteTeam().open(tmp_path, BoardOptions())
    watches = [state.watch(name) for name in ("alice", "bob", "carol")]
    assert "inotify" in state.wakes_by
    opened = _descriptors()
    for kind, count in (("anon_inode:inotify", 1), ("anon_inode:[eventfd]", 3)):
        assert opened.count(kind) - before.count(kind) == count, (kind, opened)
    for _, stop in watches:
        stop()
    state.close()
    assert sorted(_descriptors()) == sorted(before)
