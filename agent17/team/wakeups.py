"""In-process wake-ups: one threading.Event per teammate name, set when mail arrives for it.

Sending a message wakes its recipient through the mailbox's registry, so a
sleeping teammate in this process rescans at once instead of waiting out its
poll interval. Other processes and hosts hear of mail their own way (file
notifications and the files' data versions on SQLite, LISTEN/NOTIFY on
PostgreSQL). A wait that blocks in poll() on descriptors, not on the event,
has the event ring a descriptor of its own as well (`WakeEvent.ringing`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class WakeEvent(threading.Event):
    """A threading.Event that, when set, also rings the eventfds of the waits blocked on them."""

    def __init__(self) -> None:
        super().__init__()
        self._bells_lock = threading.Lock()
        self._bells: set[int] = set()

    def set(self) -> None:
        """Set the event, then ring every bell registered now."""
        super().set()
        # Written under the lock that `ringing` takes to let a bell go: once it has
        # gone its owner may close it, and a number closed may already name another file.
        with self._bells_lock:
            for bell in self._bells:
                os.eventfd_write(bell, 1)

    @contextmanager
    def ringing(self, bell: int) -> Iterator[None]:
        """While inside, `set()` also adds 1 to the eventfd `bell` (non-blocking, never full)."""
        with self._bells_lock:
            self._bells.add(bell)
        try:
            yield
        finally:
            with self._bells_lock:
                self._bells.discard(bell)


class WakeRegistry:
    """One threading.Event per recipient name; `wake(name)` sets it and tells the listeners.

    Sleeping teammates wait on their event; the teammate runtime listens so that
    a message to a teammate whose worker has ended starts a fresh worker.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, WakeEvent] = {}
        self._listeners: list[Callable[[str], None]] = []

    def event_for(self, name: str) -> WakeEvent:
        """The wake event of `name` (created on first use, then always the same object)."""
        with self._lock:
            event = self._events.get(name)
            if event is None:
                event = self._events[name] = WakeEvent()
            return event

    def wake(self, name: str) -> None:
        """Set `name`'s event, then call every listener with `name`."""
        self.event_for(name).set()
        with self._lock:
            listeners = tuple(self._listeners)
        # Listeners run outside our lock: they take their own locks and may start threads.
        for listener in listeners:
            listener(name)

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call `listener(name)` after every wake."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[str], None]) -> None:
        """Stop calling `listener` (no error if it was not subscribed)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
