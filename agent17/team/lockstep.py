"""Lockstep: a deterministic schedule for teammates that run in their own threads.

Each teammate still has its own worker thread, but the workers take turns:
one tick at a time, in spawn order, round after round. What happens inside a
turn (the tick and whatever the outcome listener does) is never interleaved
with another teammate's turn, so a run prints the same story every time.
The offline demo uses it; `agent17 run` and the tests of real concurrency do not.
Waiting is instant in lockstep: one round is one poll interval.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Lockstep:
    """Turn-taking for worker threads, plus a sleeper whose waits end at once."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._order: list[str] = []
        self._current = 0
        self._busy = False

    def join(self, name: str) -> None:
        """Add `name` at the end of the turn order (idempotent)."""
        with self._condition:
            if name not in self._order:
                self._order.append(name)
            self._condition.notify_all()

    def leave(self, name: str) -> None:
        """Remove `name` from the turn order; the turn passes on if it was theirs."""
        with self._condition:
            if name not in self._order:
                return
            index = self._order.index(name)
            self._order.remove(name)
            if index < self._current:
                self._current -= 1
            if self._order:
                self._current %= len(self._order)
            else:
                self._current = 0
            self._condition.notify_all()

    @contextmanager
    def turn(self, name: str) -> Iterator[None]:
        """Block until it is `name`'s turn, hold it for the block, then pass it on."""
        with self._condition:
            self._condition.wait_for(
                lambda: not self._busy and bool(self._order) and self._order[self._current] == name
            )
            self._busy = True
        try:
            yield
        finally:
            with self._condition:
                self._busy = False
                if name in self._order:
                    self._current = (self._order.index(name) + 1) % len(self._order)
                self._condition.notify_all()

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Sleeper protocol: a poll interval passes instantly; True if a message is waiting."""
        return wake.is_set()
