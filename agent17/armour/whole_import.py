"""Importing a module whole: a Ctrl-C that comes during the import waits until it is over.

The PostgreSQL modules and their driver, psycopg, are imported on first use.
A KeyboardInterrupt that lands inside such a first import leaves the import
system half done: the modules imported so far stay in `sys.modules`, the one
that was running is dropped (or, when the interrupt lands in importlib's own
bookkeeping, kept half made), and a package that is imported again is a new
module that lacks the submodules its first attempt had bound to the old one.
Every later open in that process then fails (psycopg: "module 'psycopg' has no
attribute 'conninfo'", or an ImportError although the driver is installed),
and only a new process, a new notebook kernel, recovers.

So these imports hold SIGINT back while they run and raise it right after: the
caller still gets its KeyboardInterrupt, late by the rest of the import (a
fraction of a second for psycopg), and the next attempt finds every module whole.
"""

from __future__ import annotations

import importlib
import signal
import threading
from types import FrameType, ModuleType


def import_whole(name: str) -> ModuleType:
    """`importlib.import_module(name)`, with a Ctrl-C during it raised once it is over."""
    # Python runs signal handlers in the main thread only: an import in another
    # thread is never interrupted, and only the main thread may set a handler.
    if threading.current_thread() is not threading.main_thread():
        return importlib.import_module(name)
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # a handler set outside Python, which we could not put back
        return importlib.import_module(name)
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        return importlib.import_module(name)
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            # The handler in force now decides, as it would have: KeyboardInterrupt,
            # the caller's own handler, or nothing when SIGINT is ignored.
            signal.raise_signal(signal.SIGINT)
