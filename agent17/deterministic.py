"""Injectable clocks and id factories that make a run repeatable.

Notebooks and tests use these so that the same story prints the same ids,
tokens and times every time; live runs use real time and random UUID4s.
"""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta
from typing import TypedDict

from agent17.domain import IdFactory, require_utc

COURSE_START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
"""The fixed instant the course's stories start at."""


class ManualClock:
    """A clock that only moves when told to: `clock()` reads it, `advance()` moves it."""

    def __init__(self, start: datetime = COURSE_START) -> None:
        self._now = require_utc(start)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by `seconds` and return the new now."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to `moment` (not earlier than now)."""
        moment = require_utc(moment)
        with self._lock:
            if moment < self._now:
                raise ValueError("a clock does not go backwards")
            self._now = moment


def uuid_sequence(block: int = 0, start: int = 1) -> IdFactory:
    """Canonical UUIDs 00000000-0000-4000-8000-BBBBNNNNNNNN counting up; thread-safe.

    Use different blocks for task ids and claim tokens so they never collide
    and a reader can tell them apart (block 17 for tasks, 71 for tokens, say).
    """
    if not 0 <= block <= 9999:
        raise ValueError("block must be between 0 and 9999")
    counter = itertools.count(start)
    lock = threading.Lock()

    def next_id() -> str:
        with lock:
            number = next(counter)
        if number > 99_999_999:
            raise OverflowError("uuid_sequence ran out of numbers")
        return f"00000000-0000-4000-8000-{block:04d}{number:08d}"

    return next_id


class CountedIds(TypedDict):
    """A team story's id factories, as keyword arguments of TeamSettings."""

    new_task_id: IdFactory
    new_claim_token: IdFactory
    new_request_id: IdFactory


def counted_ids() -> CountedIds:
    """Fresh counters for a repeatable team story: tasks 17, claim tokens 71, requests 99."""
    return CountedIds(
        new_task_id=uuid_sequence(17),
        new_claim_token=uuid_sequence(71),
        new_request_id=uuid_sequence(99),
    )
