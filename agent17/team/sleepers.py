"""How an idle teammate waits between polls: a real sleeper and two for tests and notebooks.

A sleeper's `wait(seconds, wake)` returns True when `wake` was set (a message
arrived: rescan now, and this wait does not use up the poll budget) and False
when the time ran out. Injecting it keeps ordering in tests free of real sleeps.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol


class Sleeper(Protocol):
    """Wait up to `seconds` or until `wake` is set; True means woken early."""

    def wait(self, seconds: float, wake: threading.Event) -> bool: ...


class WatchingSleeper(Protocol):
    """A sleeper that watches the shared state: `mark()` before each scan, then `wait`."""

    last_reason: str

    def mark(self) -> None: ...

    def wait(self, seconds: float, wake: threading.Event) -> bool: ...


WatcherFactory = Callable[[str], tuple[WatchingSleeper, Callable[[], None]]]
"""Teammate name -> its own watching sleeper, and how to stop it when its worker ends."""


class NewsWait(ABC):
    """The wait of a watching sleeper: it ends on a wake, on news of a change, when the first
    lease now held runs out (`lease_left()`: its seconds left on the board's clock, None when
    none is held), or after the poll interval; `last_reason` says which."""

    def __init__(self, lease_left: Callable[[], float | None]) -> None:
        self._lease_left = lease_left
        self._lease_seen_out = False
        self.last_reason = ""

    def _news(self) -> str | None:
        """Why to wake now, if a change is known of already (before any pause); else None."""
        return None

    @abstractmethod
    def _pause(self, seconds: float, wake: threading.Event) -> str | None:
        """Block up to `seconds`, less when `wake` is set or news may have come; the news."""

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Wait up to `seconds`; True if a wake, news or a lease's end ended it early."""
        left = self._lease_left()
        # After the read: counting from before it would end the wait that much before
        # the lease does.
        started = time.monotonic()
        if left is None or left > 0:
            self._lease_seen_out = False
        elif self._lease_seen_out:
            # Still there after the scan this ran-out lease woke (a plan-blocked pass takes
            # no task and releases nothing): waking again at once would spin; wait for
            # news or the poll.
            left = None
        else:
            # Ran out after the scan that just ended: wake, the next scan releases it.
            return self._ends("lease ran out")
        limit = seconds if left is None else min(seconds, left)
        while True:
            news = "woken" if wake.is_set() else self._news()
            elapsed = time.monotonic() - started
            if news is None and elapsed >= limit:
                if limit < seconds:
                    return self._ends("lease ran out")
                self.last_reason = "poll interval"
                return False
            news = news or self._pause(limit - elapsed, wake)
            if news is not None:
                return self._ends(news)

    def _ends(self, reason: str) -> bool:
        # A wait ended by a lease's end: the next one must not end for that lease again.
        self._lease_seen_out = self._lease_seen_out or reason == "lease ran out"
        self.last_reason = reason
        return True


class EventSleeper:
    """The production sleeper: a timed wait on the teammate's wake event."""

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Block until `wake` is set (True) or `seconds` pass (False)."""
        return wake.wait(seconds)


@dataclass(frozen=True, slots=True)
class SleepCall:
    """One recorded wait: how long it was asked to last and whether a wake ended it."""

    seconds: float
    woken: bool


class _Recorder:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._calls: list[SleepCall] = []

    @property
    def calls(self) -> list[SleepCall]:
        """Every wait so far, in the order they ended."""
        with self._condition:
            return list(self._calls)

    def wait_for_calls(self, count: int, timeout: float = 10.0) -> bool:
        """Block until at least `count` waits have ended; False if `timeout` passed first."""
        with self._condition:
            return self._condition.wait_for(lambda: len(self._calls) >= count, timeout)

    def _record(self, call: SleepCall) -> None:
        with self._condition:
            self._calls.append(call)
            self._condition.notify_all()


class ScriptedSleeper(_Recorder):
    """Never sleeps: each wait returns at once, woken only if a wake was already pending."""

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Record the wait and return immediately (the poll interval "passed")."""
        woken = wake.is_set()
        self._record(SleepCall(seconds, woken))
        return woken


@dataclass(slots=True)
class _Waiter:
    wake: threading.Event
    timed_out: bool = False


class ManualSleeper(_Recorder):
    """Each wait blocks until a wake (True) or until the test calls `time_out()` (False)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: list[_Waiter] = []

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Block until woken by a message or released by `time_out()`."""
        waiter = _Waiter(wake)
        with self._condition:
            self._waiting.append(waiter)
            self._condition.notify_all()
        wake.wait()
        with self._condition:
            self._waiting.remove(waiter)
            woken = not waiter.timed_out
            self._calls.append(SleepCall(seconds, woken))
            self._condition.notify_all()
        return woken

    @property
    def sleeping(self) -> int:
        """How many waits are blocked right now."""
        with self._condition:
            return len(self._waiting)

    def wait_for_sleepers(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until `count` waits are blocked; False if `timeout` passed first."""
        with self._condition:
            return self._condition.wait_for(lambda: len(self._waiting) >= count, timeout)

    def time_out(self) -> int:
        """Let every blocked wait end as if its poll interval passed; return how many."""
        with self._condition:
            for waiter in self._waiting:
                waiter.timed_out = True
                waiter.wake.set()
            return len(self._waiting)


LOOK_EVERY_SECONDS: Final = 0.1
"""How often a watching sleeper looks at the data versions when nothing tells it of changes."""


class ChangeHints(Protocol):
    """What tells a watching sleeper when to look at the data versions again (never the truth)."""

    def next_look(self) -> float:
        """Seconds until the next look if nothing is heard meanwhile."""
        ...

    def pause(self, seconds: float, wake: threading.Event) -> None:
        """Block up to `seconds`; return early when `wake` is set or a change may have been made."""
        ...


class LookEvery:
    """No hints at all: look every `seconds` (the poll of the data versions)."""

    def __init__(self, seconds: float = LOOK_EVERY_SECONDS) -> None:
        self.seconds = seconds

    def next_look(self) -> float:
        """Always the same interval."""
        return self.seconds

    def pause(self, seconds: float, wake: threading.Event) -> None:
        """A timed wait on the wake event."""
        wake.wait(seconds)


class ChangeWatchingSleeper(NewsWait):
    """For a teammate in its own process: wake early when another process changed something.

    While it waits it looks at the data versions of the files it watches (the
    board and the mailbox: SQLite's `PRAGMA data_version`, which moves only when
    *another* connection commits, and costs no row read), and at the moment the
    first lease now held runs out. When it looks is up to its `hints`: file
    notifications (team/file_wakeups.py) or, without them, every 0.1 s
    (`LookEvery`). A message from the Lead, a new or unblocked task, a completion
    or an expired lease thus ends the wait early, however long the poll interval
    is; the poll stays as the fallback. Call `mark()` right before each scan of
    the board, so that a change made during the scan is not missed.
    """

    def __init__(
        self,
        *,
        versions: Sequence[Callable[[], int]],
        next_deadline: Callable[[], datetime | None],
        clock: Callable[[], datetime],
        hints: ChangeHints | None = None,
    ) -> None:
        self._versions = tuple(versions)
        self._next_deadline = next_deadline
        self._clock = clock
        self.hints: ChangeHints = hints if hints is not None else LookEvery()
        self._marked: tuple[int, ...] = self._read()
        super().__init__(self._seconds_to_deadline)

    def _read(self) -> tuple[int, ...]:
        return tuple(version() for version in self._versions)

    def mark(self) -> None:
        """Remember what the watched files look like now (before a scan of them)."""
        self._marked = self._read()

    def _seconds_to_deadline(self) -> float | None:
        # On this host's clock: the board is on this host.
        deadline = self._next_deadline()
        return None if deadline is None else (deadline - self._clock()).total_seconds()

    def _news(self) -> str | None:
        return "changed" if self._read() != self._marked else None

    def _pause(self, seconds: float, wake: threading.Event) -> str | None:
        self.hints.pause(min(self.hints.next_look(), seconds), wake)
        return None
