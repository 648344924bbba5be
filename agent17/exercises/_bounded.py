"""Run a check in a child process with a deadline, so no candidate can hang the notebook.

On Linux and macOS the child is a *fork* of the kernel: it has everything the
notebook has, so a candidate defined in a notebook cell works as it is, with
the names it uses from other cells. A candidate that loops forever is killed
when the deadline passes, and the check fails with that reason. Where fork
does not exist (Windows) the check runs in a thread instead: it still fails
after the deadline, but the stuck thread cannot be stopped. In the browser
edition (Pyodide) there is neither a fork nor a thread: the check runs inline,
and a trace function stops it at the first Python line past the deadline; a
candidate stuck inside one call that runs no Python line (a long sleep) is
stopped only once that call returns.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final

from agent17.browser import IN_BROWSER

FORK_AVAILABLE: Final = "fork" in multiprocessing.get_all_start_methods()


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of a check: `passed`, and `feedback` written for the student."""

    passed: bool
    feedback: str

    def __str__(self) -> str:
        return f"{'PASSED' if self.passed else 'NOT YET'}: {self.feedback}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


_HERE: Final = os.path.dirname(os.path.abspath(__file__))


def raised(error: BaseException) -> str:
    """A raised error as a student reads it: its type, its message, and where in their code."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(frame.filename).startswith(_HERE)
    ]
    where = f" (line {frames[-1].lineno} of {frames[-1].name})" if frames else ""
    return f"your code raised {type(error).__name__}: {error}{where}"


def _noting_printed(result: CheckResult, printed: str) -> CheckResult:
    """A failed verdict shows the student what their code printed (at most 400 characters)."""
    text = printed.strip()
    if not text or result.passed:
        return result
    shown = text if len(text) <= 400 else text[:400] + "..."
    return CheckResult(False, f"{result.feedback}\n(your code printed: {shown})")


def _too_slow(timeout: float) -> CheckResult:
    return CheckResult(
        False,
        f"your code did not finish within {timeout:g} seconds: an endless loop, or a"
        " wait that nothing ends? (the check stopped it)",
    )


def _child(check: Callable[[], CheckResult], sender: Any) -> None:
    # The kernel's stdout is a socket of the parent's: print into a buffer instead,
    # and show the student what their code printed.
    printed = io.StringIO()
    sys.stdout = sys.stderr = printed
    try:
        result = check()
    except BaseException as error:  # sent back and reported, never re-raised here
        result = CheckResult(False, raised(error))
    result = _noting_printed(result, printed.getvalue())
    try:
        sender.send_bytes(pickle.dumps(result))
    finally:
        sender.close()
        os._exit(0)  # no atexit handlers of the kernel in the child


def run_bounded(check: Callable[[], CheckResult], timeout: float) -> CheckResult:
    """`check()` in a forked child (or a thread), failed if it takes longer than `timeout` s."""
    if IN_BROWSER:
        return _run_inline(check, timeout)
    if not FORK_AVAILABLE:
        return _run_in_thread(check, timeout)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    # Not a daemon: a check may start worker processes of its own (claim_one does).
    child = context.Process(target=_child, args=(check, sender))
    child.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            return _too_slow(timeout)
        result: CheckResult = pickle.loads(receiver.recv_bytes())
        return result
    except EOFError:
        return CheckResult(False, "your code ended the check's process (os._exit or a crash)")
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join(10)


def _run_in_thread(check: Callable[[], CheckResult], timeout: float) -> CheckResult:
    box: list[CheckResult] = []

    def run() -> None:
        try:
            box.append(check())
        except BaseException as error:
            box.append(CheckResult(False, raised(error)))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        return CheckResult(False, f"your code did not finish within {timeout:g} seconds")
    return box[0]


NEEDS_THE_OS: Final = (
    "this check starts a thread or a process, and a browser tab runs one Python thread"
    " and no process: check it on a machine with Python (./scripts/lab.sh)"
)
_PROCESS_MODULES: Final = frozenset({"_multiprocessing", "_posixsubprocess", "_posixshmem"})


def _needs_the_os(error: BaseException) -> bool:
    """Whether `error` is the browser refusing a thread or a process (not the student's bug)."""
    if isinstance(error, RuntimeError) and "can't start new thread" in str(error):
        return True
    return isinstance(error, ModuleNotFoundError) and error.name in _PROCESS_MODULES


class _DeadlinePassed(BaseException):
    """Raised inside a candidate by the inline bound (a BaseException: `except Exception` in
    the candidate's own code cannot swallow it)."""


def _run_inline(check: Callable[[], CheckResult], timeout: float) -> CheckResult:
    deadline = time.monotonic() + timeout

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        if time.monotonic() > deadline:
            raise _DeadlinePassed
        return trace

    printed = io.StringIO()
    saved_trace = sys.gettrace()
    saved_streams = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = printed
    sys.settrace(trace)
    try:
        result = check()
    except _DeadlinePassed:
        result = _too_slow(timeout)
    except BaseException as error:  # reported to the student, as the forked child does
        result = CheckResult(False, NEEDS_THE_OS if _needs_the_os(error) else raised(error))
    finally:
        sys.settrace(saved_trace)
        sys.stdout, sys.stderr = saved_streams
    return _noting_printed(result, printed.getvalue())
