"""Who runs now: one worker at a time, each paused at its points until the scheduler resumes it.

On CPython each worker's calls run in a thread of their own, but only the
thread the scheduler resumed runs; every other one waits at its point on a
semaphore (a baton passed from hand to hand). The browser (Pyodide) has no
threads: each worker runs in an asyncio task, and at a point its whole Python
stack is suspended (`pyodide.ffi.run_sync`, WebAssembly's JavaScript Promise
Integration) until the scheduler resumes it; the scheduler's own stack waits
the same way for the worker to report back. Either way the workers' code runs
strictly one piece at a time, in the order the scheduler chose.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Final, Protocol

from agent17.browser import IN_BROWSER, can_suspend

STUCK_SECONDS: Final = 5.0
"""How long a resumed worker may run before it reaches its next point: far more than any
Python between two statements needs, so only a worker waiting on something the scheduler
cannot see (a threading lock, a long sleep) or an endless loop ever hits it."""


class Abandoned(BaseException):
    """Raised at the points of a worker whose schedule is over, so that its calls unwind.

    A BaseException: a candidate's own `except Exception` does not swallow it.
    """


class Baton(Protocol):
    """Start workers, pause one at its point, resume one and wait until it pauses again."""

    def start(self, name: str, body: Callable[[], None]) -> None:
        """Make worker `name`, which runs `body` once first resumed."""

    def pause(self, name: str) -> None:
        """In worker `name`: report back to the scheduler and wait until resumed."""

    def resume(self, name: str) -> bool:
        """Let worker `name` run to its next point (or its end); False if it did not in time."""


class ThreadBaton:
    """Workers as threads (CPython): a semaphore each way per worker."""

    def __init__(self) -> None:
        self._stuck_seconds = STUCK_SECONDS
        self._go: dict[str, threading.Semaphore] = {}
        self._reported: dict[str, threading.Semaphore] = {}

    def start(self, name: str, body: Callable[[], None]) -> None:
        """Make worker `name`'s thread; it waits to be resumed before running `body`."""
        go = self._go[name] = threading.Semaphore(0)
        reported = self._reported[name] = threading.Semaphore(0)

        def run() -> None:
            go.acquire()
            try:
                body()
            finally:
                reported.release()

        threading.Thread(target=run, name=f"agent17-schedule-{name}", daemon=True).start()

    def pause(self, name: str) -> None:
        """In worker `name`'s thread: hand the baton back and wait for it."""
        self._reported[name].release()
        self._go[name].acquire()

    def resume(self, name: str) -> bool:
        """Hand worker `name` the baton and wait until it hands it back."""
        self._go[name].release()
        return self._reported[name].acquire(timeout=self._stuck_seconds)


class TaskBaton:
    """Workers as asyncio tasks whose stacks suspend at their points (Pyodide with JSPI)."""

    def __init__(self) -> None:
        import asyncio

        self._loop = asyncio.get_event_loop()
        self._go: dict[str, Any] = {}
        self._reported: dict[str, Any] = {}
        self._tasks: list[Any] = []  # the loop keeps only weak references to its tasks

    def start(self, name: str, body: Callable[[], None]) -> None:
        """Make worker `name`'s task; it waits to be resumed before running `body`."""
        import asyncio

        go = self._go[name] = self._loop.create_future()
        # The check's deadline is a trace function; a task does not inherit it.
        trace = sys.gettrace()

        async def run() -> None:
            await go
            sys.settrace(trace)  # set in the step that runs `body`: a task starts untraced
            try:
                body()
            finally:
                self._reported[name].set_result(None)

        self._tasks.append(asyncio.ensure_future(run()))

    def pause(self, name: str) -> None:
        """In worker `name`'s task: report back and suspend this whole stack until resumed."""
        from pyodide.ffi import run_sync  # type: ignore[import-not-found]

        go = self._go[name] = self._loop.create_future()
        self._reported[name].set_result(None)
        run_sync(go)

    def resume(self, name: str) -> bool:
        """Resume worker `name` and suspend the scheduler's stack until it reports back."""
        from pyodide.ffi import run_sync

        reported = self._reported[name] = self._loop.create_future()
        self._go[name].set_result(None)
        run_sync(reported)
        return True


CANNOT_SUSPEND: Final = (
    "this check runs two or three workers' calls side by side, and here the browser cannot"
    " pause a call halfway (it needs Chromium 137 or later, run from a cell): check it in a"
    " cell of a recent Chromium, or on a machine with Python (./scripts/lab.sh)"
)


_AGENT17: Final = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_STDLIB: Final = os.path.dirname(os.__file__)


def _ours(filename: str) -> bool:
    return filename.startswith((_AGENT17, _STDLIB, "<frozen"))


@contextlib.contextmanager
def candidate_lines_traced() -> Iterator[None]:
    """While exploring in the browser, hold the check's deadline in the candidate's code only.

    There the deadline is a trace function (no fork to kill), called for every
    line; on the scheduler's own lines that makes a check several times slower,
    and it could stop the scheduler halfway through letting go of its locks. So
    the candidate's frames keep it (every line, every call) and the frames of
    agent17 and the standard library go untraced: every schedule calls the
    candidate, so a check past its deadline still stops at its next line.
    """
    deadline: Any = sys.gettrace()
    if deadline is None or not IN_BROWSER:
        yield
        return

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        return None if _ours(frame.f_code.co_filename) else deadline(frame, event, arg)

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(deadline)


def baton_maker() -> Callable[[], Baton] | str:
    """What makes a fresh baton for each schedule here, or the one line saying why none can."""
    if not IN_BROWSER:
        return ThreadBaton
    if not can_suspend():
        return CANNOT_SUSPEND
    return TaskBaton
