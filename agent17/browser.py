"""Where agent17 runs in the browser edition (Pyodide) and what it changes there.

`IN_BROWSER` is true inside Pyodide: one kernel, one process, no threads, no
child processes. The JupyterLite kernel replaces `fcntl` with an empty module;
agent17 locks files with `fcntl.flock` (the state file's single-opener lock,
the approval log's and the exercises' appends), so importing agent17 there
fills that empty module with constants and a `flock` that does nothing. That
is no pretence of exclusion: in the browser nothing else can open the files
(they live in the page's own memory, and only this one process runs), so there
is nobody to exclude.
"""

from __future__ import annotations

import contextlib
import sys
import time
import types
from collections.abc import Callable
from typing import Any, Final

IN_BROWSER: Final = sys.platform == "emscripten"
"""True inside Pyodide (the browser edition), where no thread or process can be started."""

_LOCK_CONSTANTS: Final = {"LOCK_SH": 1, "LOCK_EX": 2, "LOCK_NB": 4, "LOCK_UN": 8}


def _flock_excludes_nothing(descriptor: object, operation: int) -> None:
    """`fcntl.flock` in a one-process browser kernel: there is no other process to wait for."""


def complete_empty_fcntl(modules: dict[str, types.ModuleType] | None = None) -> bool:
    """Give an empty stand-in `fcntl` module `flock` and its constants; True if it did."""
    modules = sys.modules if modules is None else modules
    stand_in = modules.get("fcntl")
    if stand_in is None or hasattr(stand_in, "flock"):
        return False
    for name, value in _LOCK_CONSTANTS.items():
        setattr(stand_in, name, value)
    stand_in.flock = _flock_excludes_nothing  # type: ignore[attr-defined]
    return True


if IN_BROWSER:
    complete_empty_fcntl()


# -- pausing a call halfway: WebAssembly's JavaScript Promise Integration ---------------
#
# Chromium (137 and later) lets Pyodide suspend a whole Python call stack at
# `pyodide.ffi.run_sync(awaitable)` and resume it when the awaitable is done, while the
# page's event loop runs other Python in between. That is what a helper thread gives
# the stepper elsewhere: a tick parked on an approval while the next cell runs. Code
# run as a cell, or inside an asyncio task, can suspend so; a widget's click handler
# cannot (`can_suspend()` is False there), so the stepper runs a click's action as an
# asyncio task (`run_as_task`). Where the browser has no JSPI, nothing suspends and the
# stepper falls back to running a tick inline.

SUSPEND_POLL_SECONDS: Final = 0.01


def can_suspend() -> bool:
    """Whether the running Python stack can wait for the event loop here (Pyodide + JSPI)."""
    if not IN_BROWSER:
        return False
    from pyodide.ffi import can_run_sync  # type: ignore[import-not-found]

    return bool(can_run_sync())


def has_stack_switching() -> bool:
    """Whether this browser can suspend Python at all (WebAssembly.Suspending exists)."""
    if not IN_BROWSER:
        return False
    import js  # type: ignore[import-not-found]

    return hasattr(js.WebAssembly, "Suspending")


def suspend_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Let the event loop run until `condition()` holds or `timeout` seconds pass.

    The browser's `threading.Condition.wait_for`: the stack is suspended (not
    busy-waiting) between looks. Only where `can_suspend()`; elsewhere it only looks once.
    """
    if condition():
        return True
    if not can_suspend():
        return False
    import asyncio

    from pyodide.ffi import run_sync

    deadline = time.monotonic() + timeout
    while not condition():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        run_sync(asyncio.sleep(min(SUSPEND_POLL_SECONDS, left)))
    return True


_tasks: list[Any] = []


def run_as_task(action: Callable[[], None]) -> None:
    """Run `action` in an asyncio task, after every action handed here before it.

    For a click handler, which cannot suspend: its task can (`can_suspend()` is true
    there). One after another, as a kernel runs clicks when each waits in its handler.
    An error `action` raises is its own to show (the stepper shows it in its panel).
    """
    import asyncio

    previous = _tasks[-1] if _tasks else None

    async def in_order() -> None:
        if previous is not None:
            await asyncio.wait([previous])
        with contextlib.suppress(Exception):  # the action shows its own failure
            action()

    task = asyncio.ensure_future(in_order())
    _tasks.append(task)
    task.add_done_callback(_tasks.remove)
