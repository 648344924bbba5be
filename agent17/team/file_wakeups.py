"""Wake-ups across processes on SQLite: file notifications on the state folder, as hints.

The twin of team/pg_wakeups.py for a team on the workspace's SQLite files. A
commit by another process writes the board's or the mailbox's `-wal` (a
checkpoint writes the file itself; a new file is created or moved in), and
inotify tells every watcher of the folder at once: a waiting teammate blocks in
poll() on that and on a bell of its own, which its in-process wake event rings
too (`WakeEvent.ringing`), so between events it uses no CPU at all.

An event is a hint, never the truth; the truth is `PRAGMA data_version`, which
the sleeper looks at after every event (ChangeWatchingSleeper). Two things
follow from how SQLite commits:

- The event comes when the frames are written, before the fsync that ends the
  commit and before the commit is visible. A look right after an event may
  well see nothing yet, so looks go on after it, each after half the time
  since the event (at least 1 ms), for `SETTLE_SECONDS`: a commit is seen
  within about one and a half times its fsync, and a spurious event (this
  process's own commit, a reader closing its -wal, the trailing write of a
  commit already seen) costs about fifteen looks.
- A notification is never the only way: with no event at all the sleeper still
  looks every `SAFETY_LOOK_SECONDS` (a missed event, a commit whose fsync took
  longer than the looks after it), and the poll interval's scan stays.

Where notifications are not available (not Linux, the browser, an inotify
limit reached, a file system that other hosts write to unannounced: see
team/inotify.py), or when the environment sets `AGENT17_WAKEUPS=poll`, the
sleeper looks every 0.1 s as before, and `TeamState.wakes_by` says so (the
teammate process prints it once). If the folder's watch is lost later (the
folder deleted, moved or unmounted), its sleepers go back to that poll.

One inotify instance serves every teammate of one TeamState (its limit is per
user, often 128): whichever waiting sleeper finds it readable reads the events
and rings the bells of all of them.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from agent17.team.inotify import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_MODIFY,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    WATCH_GONE,
    Inotify,
    Unavailable,
)
from agent17.team.sleepers import LOOK_EVERY_SECONDS
from agent17.team.wakeups import WakeEvent

WAKEUPS_VARIABLE: Final = "AGENT17_WAKEUPS"
"""Set to `poll` to do without file notifications (the 0.1 s look), e.g. to compare the two."""

WATCHED_EVENTS: Final = IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO
SAFETY_LOOK_SECONDS: Final = 1.0
"""How often a notified sleeper looks anyway, when it has heard nothing."""
SETTLE_SECONDS: Final = 0.25
"""How long after an event the looks go on (the commit it announced may still be in its fsync)."""
SETTLE_MIN_GAP_SECONDS: Final = 0.001


class FolderWatch:
    """One inotify watch on a state folder, shared by the sleepers of one TeamState."""

    def __init__(self, inotify: Inotify, names: Iterable[str]) -> None:
        self._inotify = inotify
        self._names = frozenset(names)
        self._lock = threading.Lock()
        self._bells: set[int] = set()
        self._closed = False
        self.lost: str | None = None
        """Why nothing more will be heard (the folder went away), or None."""

    @classmethod
    def open(
        cls,
        folder: Path,
        names: Iterable[str],
        *,
        environ: Mapping[str, str] = os.environ,
        libc: Any = None,
    ) -> FolderWatch:
        """Watch `folder` for writes to the files `names`; Unavailable with the reason why not."""
        if environ.get(WAKEUPS_VARIABLE, "").strip().lower() == "poll":
            raise Unavailable(f"{WAKEUPS_VARIABLE}=poll")
        return cls(Inotify.open(folder, WATCHED_EVENTS, libc=libc), names)

    @property
    def file_system(self) -> str:
        """The watched folder's file system, by name."""
        return self._inotify.file_system

    def fileno(self) -> int:
        """The inotify descriptor: readable when events wait to be read."""
        return self._inotify.fileno()

    def add_bell(self, bell: int) -> None:
        """Ring the eventfd `bell` at every event that concerns the watched files."""
        with self._lock:
            self._bells.add(bell)

    def remove_bell(self, bell: int) -> None:
        """Stop ringing `bell` (its owner may close it once this returns)."""
        with self._lock:
            self._bells.discard(bell)

    def drain(self) -> None:
        """Read every queued event; if one concerns the files (or the watch is gone), ring all."""
        with self._lock:
            if self._closed:
                return
            events = self._inotify.read()
            heard = False
            for event in events:
                if event.mask & WATCH_GONE and self.lost is None:
                    self.lost = "the state folder's watch is gone (deleted, moved or unmounted)"
                # An overflow dropped events we cannot name: any of them may have been ours.
                heard = heard or event.name in self._names or bool(event.mask & IN_Q_OVERFLOW)
            if heard or self.lost is not None:
                for bell in self._bells:
                    os.eventfd_write(bell, 1)

    def close(self) -> None:
        """Close the inotify instance (idempotent; close the sleepers' hints first)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._inotify.close()


class FileNotifications:
    """One sleeper's hints from a FolderWatch: it blocks until an event, a wake or its next look."""

    def __init__(self, watch: FolderWatch, *, safety_look: float = SAFETY_LOOK_SECONDS) -> None:
        self._watch = watch
        self.safety_look = safety_look
        self._bell = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        watch.add_bell(self._bell)
        self._poller = select.poll()
        self._poller.register(watch.fileno(), select.POLLIN)
        self._poller.register(self._bell, select.POLLIN)
        self._heard_at: float | None = None  # time.monotonic() of the latest event
        self._closed = False

    def next_look(self) -> float:
        """Soon after an event; otherwise the safety look (the 0.1 s one if the watch is lost)."""
        if self._heard_at is not None:
            since = time.monotonic() - self._heard_at
            if since < SETTLE_SECONDS:
                return max(SETTLE_MIN_GAP_SECONDS, since / 2)
            self._heard_at = None
        return LOOK_EVERY_SECONDS if self._watch.lost is not None else self.safety_look

    def pause(self, seconds: float, wake: threading.Event) -> None:
        """Block in poll() up to `seconds`, or until an event or `wake` rings the bell."""
        if not isinstance(wake, WakeEvent):
            raise TypeError("file notifications need a WakeEvent (WakeRegistry.event_for)")
        with wake.ringing(self._bell):
            ready = [] if wake.is_set() else self._poller.poll(seconds * 1000)
        if any(descriptor == self._watch.fileno() for descriptor, _ in ready):
            self._watch.drain()
        try:
            os.eventfd_read(self._bell)
        except BlockingIOError:
            return  # nothing rang: the pause ran out
        self._heard_at = time.monotonic()

    def close(self) -> None:
        """Stop hearing the watch and close the bell (idempotent)."""
        if not self._closed:
            self._closed = True
            self._watch.remove_bell(self._bell)
            os.close(self._bell)
