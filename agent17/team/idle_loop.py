"""The idle loop around `Teammate.tick()`: tick, and after a pass that found nothing, wait.

One loop for every way a teammate runs: a worker thread of the teammate
runtime (`agent17 run`, the demo) and its own OS process (`agent17 teammate`).
After an empty pass (idle or plan-blocked) it waits on the sleeper; a wake-up
(a message, a change on the board) ends the wait early and does not use up
the poll budget. After `max_idle_polls` polls in a row that timed out, the
loop ends with IDLE_TIMEOUT; no shutdown and no summary is faked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import StrEnum

from agent17.team.sleepers import Sleeper
from agent17.team.teammate import EMPTY_TICKS, Teammate, TickKind, TickOutcome


class LoopEnd(StrEnum):
    """Why an idle loop ended."""

    CLOSED = "closed"  # the shutdown handshake
    IDLE_TIMEOUT = "idle_timeout"  # max_idle_polls empty polls in a row
    STOPPED = "stopped"  # its owner asked it to stop


def run_idle_loop(
    teammate: Teammate,
    *,
    sleeper: Sleeper,
    wake: threading.Event,
    poll_interval_seconds: float,
    max_idle_polls: int,
    stopping: Callable[[], bool] = lambda: False,
    time_out: Callable[[], bool] = lambda: True,
    on_outcome: Callable[[TickOutcome], None] | None = None,
    on_wait: Callable[[bool], None] | None = None,
    before_scan: Callable[[], None] | None = None,
) -> LoopEnd:
    """Tick `teammate` until it closes, times out idle, or `stopping()` says so.

    `time_out()` decides whether an idle timeout really ends the loop (the
    runtime decides it under its lock, so a message arriving at that moment is
    not lost); `on_wait(True/False)` brackets every wait; `before_scan()` runs
    right before each tick (a watching sleeper marks what it has seen).
    """
    empty_polls = 0
    while True:
        # Clear before scanning: a wake-up after this point sets it again, so the
        # wait below returns at once instead of missing it.
        wake.clear()
        if stopping():
            return LoopEnd.STOPPED
        if before_scan is not None:
            before_scan()
        outcome = teammate.tick()
        if on_outcome is not None:
            on_outcome(outcome)
        if outcome.kind is TickKind.CLOSED or teammate.closed:
            return LoopEnd.CLOSED
        if outcome.kind not in EMPTY_TICKS:
            empty_polls = 0
            continue
        if empty_polls >= max_idle_polls:
            if time_out():
                return LoopEnd.IDLE_TIMEOUT
            continue
        if on_wait is not None:
            on_wait(True)
        try:
            woken = sleeper.wait(poll_interval_seconds, wake)
        finally:
            if on_wait is not None:
                on_wait(False)
        if not woken:
            empty_polls += 1
