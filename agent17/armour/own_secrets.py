"""A process's keys and passwords, kept from the other processes of its own user (Linux).

A teammate, the Lead of `agent17 run` and the demo's Lead are started with
secrets in their environment (OPENAI_API_KEY, PGPASSWORD). Linux shows a
process's starting environment in `/proc/<pid>/environ`, readable by every
process of the same user (a command a sibling teammate runs, say) unless the
process is not "dumpable". The flag is per process and an `exec` sets it back,
so each process clears it for itself: the `agent17` command first of all (in
`agent17/__init__.py`, before the imports that take most of a second), and the
shell tool again before each command (a notebook's kernel is no `agent17`
command). The cost: a debugger of the same user cannot attach, and there is no
core dump.
"""

from __future__ import annotations

import os
import sys
from typing import Final

_PR_SET_DUMPABLE: Final = 4


def hide_own_environment() -> bool:
    """Make this process non-dumpable: its /proc files private to root; True on Linux."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: the browser edition's Python never gets this far

    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)


def started_as_the_agent17_command() -> bool:
    """Whether this process is the `agent17` console script or `python -m agent17`.

    Asked while `agent17` is first imported: the console script's path is then
    `sys.argv[0]`, and for `python -m` Python has set it to "-m" until the module is
    found (documented under the `-m` option).
    """
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or os.path.basename(first) == "agent17"
