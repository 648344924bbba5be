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

import sys
import types
from typing import Final

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
