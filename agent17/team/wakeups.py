"""In-process wake-ups: one threading.Event per teammate name, set when mail arrives for it.

Sending a message wakes its recipient through the mailbox's registry, so a
sleeping teammate in this process rescans at once instead of waiting out its
poll interval. Other processes and hosts hear of mail their own way (the file's
data version on SQLite, LISTEN/NOTIFY on PostgreSQL).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class WakeRegistry:
    """One threading.Event per recipient name; `wake(name)` sets it and tells the listeners.

    Sleeping teammates wait on their event; the teammate runtime listens so that
    a message to a teammate whose worker has ended starts a fresh worker.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}
        self._listeners: list[Callable[[str], None]] = []

    def event_for(self, name: str) -> threading.Event:
        """The wake event of `name` (created on first use, then always the same object)."""
        with self._lock:
            event = self._events.get(name)
            if event is None:
                event = self._events[name] = threading.Event()
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
