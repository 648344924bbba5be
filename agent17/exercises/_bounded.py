"""Run a check's candidate in a sandbox with a deadline, and reach the verdict outside it.

A check has two halves (`Checker`). `run(candidate)` calls the student's code and turns what
it returned into plain data (None, bools, numbers, strings, lists, dicts); `judge(data)`
compares that data with the reference and writes the feedback.

On Linux and macOS `run` happens in a *fork* of the kernel, so a candidate defined in a
notebook cell works as it is, with the names it uses from other cells. The fork

- works in a scratch folder of its own (its working directory, removed afterwards): a
  candidate that tidies its working directory cannot touch the caller's folder;
- leads a process group of its own, which it kills when `run` is over; on Linux it also
  adopts every orphan below it and kills and reaps them all, so no process the candidate
  started is left when `check()` returns, not even one that left the group;
- sends back JSON only, read in the kernel as plain values: an answer whose `==` is always
  true, or a patch the candidate made to a checker's module, stays in the fork, and `judge`
  runs in the kernel, where the candidate never ran.

A candidate is stopped at the deadline by a timer signal in the fork (the check fails with
that reason), and by a kill from the kernel a few seconds later if that did not end it.
What remains: code that writes a forged report into the fork's pipe on purpose can still
fool the kernel. The sandbox keeps accidents and stray patches out of the verdict; it is no
wall against a student set on cheating their own check.

In the browser edition (Pyodide) there is no fork: `run` happens inline, and a trace
function stops it at the first Python line past the deadline (a call that runs no Python
line, a long sleep, is stopped only once it returns). There the candidate runs
in the kernel itself, so a patch it makes to a checker's module can reach the verdict; its
answers are still turned into plain values before they are compared.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Final, TypeAlias

from agent17.browser import IN_BROWSER

Plain: TypeAlias = "bool | int | float | str | list[Plain] | dict[str, Plain] | None"
"""What crosses from the sandbox to the verdict: JSON's values."""

# How long the kernel waits past the deadline for the fork to end itself.
_GRACE_SECONDS: Final = 5.0
_PRINTED_KEPT: Final = 4000


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict of a check: `passed`, and `feedback` written for the student."""

    passed: bool
    feedback: str

    def __str__(self) -> str:
        return f"{'PASSED' if self.passed else 'NOT YET'}: {self.feedback}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


@dataclass(frozen=True, slots=True)
class Checker:
    """A check in two halves: `run(candidate)` in the sandbox returns plain data, and
    `judge(data)`, in the caller's process, turns that data into the verdict."""

    run: Callable[[Any], Plain]
    judge: Callable[[Plain], CheckResult]


def unreadable(data: object) -> CheckResult:
    """The verdict on a report whose shape no `run` sends: something wrote over it."""
    return CheckResult(
        False,
        "the check could not read what came back from your code's process"
        f" ({type(data).__name__}): did your code write to the check's pipe?",
    )


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


def _too_slow(timeout: float) -> str:
    return (
        f"your code did not finish within {timeout:g} seconds: an endless loop, or a"
        " wait that nothing ends? (the check stopped it)"
    )


@dataclass(frozen=True, slots=True)
class _Report:
    """What `run` gave: its data, or why it gave none; and what the candidate printed."""

    data: Plain
    failed: str | None
    printed: str


def run_check(checker: Checker, candidate: Any, timeout: float) -> CheckResult:
    """`checker.run(candidate)` in the sandbox, bounded by `timeout` s; the verdict judged here."""
    if IN_BROWSER:
        report = _run_inline(lambda: checker.run(candidate), timeout)
    else:
        report = _run_in_fork(lambda: checker.run(candidate), timeout)
    if report.failed is not None:
        result = CheckResult(False, report.failed)
    else:
        try:
            result = checker.judge(report.data)
        except Exception:  # a shape no `run` sends: reported, never raised into the notebook
            result = unreadable(report.data)
    return _noting_printed(result, report.printed)


def _noting_printed(result: CheckResult, printed: str) -> CheckResult:
    """A failed verdict shows the student what their code printed (at most 400 characters)."""
    text = printed.strip()
    if not text or result.passed:
        return result
    shown = text if len(text) <= 400 else text[:400] + "..."
    return CheckResult(False, f"{result.feedback}\n(your code printed: {shown})")


def _as_plain(data: Plain) -> Plain:
    """`data` as JSON would bring it back, so every path judges the same plain values."""
    return json.loads(json.dumps(data))  # type: ignore[no-any-return]


def _report_from(message: bytes) -> _Report:
    try:
        sent = json.loads(message)
    except ValueError:
        sent = None
    if not isinstance(sent, dict) or not isinstance(sent.get("printed", ""), str):
        return _Report(None, unreadable(sent).feedback, "")
    failed = sent.get("failed")
    if failed is not None and not isinstance(failed, str):
        return _Report(None, unreadable(sent).feedback, "")
    return _Report(sent.get("data"), failed, sent.get("printed", ""))


# -- in a fork: the POSIX path -----------------------------------------------------------


class _DeadlinePassed(BaseException):
    """Raised inside a candidate at its deadline (a BaseException: `except Exception` in the
    candidate's own code cannot swallow it)."""


def _run_in_fork(run: Callable[[], Plain], timeout: float) -> _Report:
    import multiprocessing.connection  # here: it needs _multiprocessing, which Pyodide lacks

    folder = tempfile.mkdtemp(prefix="agent17-check-")
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    # Not a daemon: a check may start worker processes of its own (claim_one does).
    child = context.Process(target=_child, args=(run, sender, folder, timeout))
    child.start()
    sender.close()
    assert child.pid is not None
    with contextlib.suppress(OSError):
        os.setpgid(child.pid, child.pid)  # the child does it too: whichever runs first
    reported, ended = False, _when_it_ends(child.pid, child.sentinel)
    try:
        # Its exit counts too: a process the candidate started may hold the pipe open.
        if not multiprocessing.connection.wait([receiver, ended], timeout + _GRACE_SECONDS):
            return _Report(None, _too_slow(timeout), "")
        if not receiver.poll(0):
            raise EOFError
        report = _report_from(receiver.recv_bytes())
        reported = True
        return report
    except EOFError:
        return _Report(None, "your code ended the check's process (os._exit or a crash)", "")
    finally:
        receiver.close()
        if ended != child.sentinel:
            os.close(ended)
        if reported:
            child.join(_GRACE_SECONDS)  # it ends its own group, then exits
        if not reported or child.exitcode is None:
            # Hung, crashed or interrupted: end its group from here. Its pid cannot have been
            # reused, since it is not reaped yet (or its group still has members).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.kill()
        child.join()
        shutil.rmtree(folder, ignore_errors=True)


def _when_it_ends(pid: int, sentinel: int) -> int:
    """A descriptor that is ready once process `pid` has ended, without reaping it.

    On Linux a pidfd; elsewhere multiprocessing's sentinel, which processes the candidate
    started also hold open, so there a crash is seen only at the deadline.
    """
    with contextlib.suppress(AttributeError, OSError):
        return os.pidfd_open(pid)
    return sentinel


def _child(run: Callable[[], Plain], sender: Any, folder: str, timeout: float) -> None:
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _adopt_orphans()
    os.chdir(folder)
    # Taken before any candidate code runs, so a patch to json or the pipe cannot reach them.
    send, dumps = sender.send_bytes, json.dumps
    # The kernel's stdout is a socket of the parent's: print into a buffer instead, and show
    # the student what their code printed.
    printed = io.StringIO()
    sys.stdout = sys.stderr = printed
    report = _run_until(run, timeout)
    report["printed"] = printed.getvalue()[:_PRINTED_KEPT]
    try:
        message = dumps(report)
    except (TypeError, ValueError) as error:
        message = dumps({"failed": f"the check could not send your answers back: {error}"})
    try:
        send(message.encode())
    finally:
        sender.close()
        _end_the_group()
        os._exit(0)  # no atexit handlers of the kernel in the child


def _run_until(run: Callable[[], Plain], timeout: float) -> dict[str, Plain]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise _DeadlinePassed

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            return {"data": run()}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _DeadlinePassed:
        return {"failed": _too_slow(timeout)}
    except BaseException as error:  # sent back and reported, never re-raised here
        return {"failed": raised(error)}


_PR_SET_CHILD_SUBREAPER: Final = 36


def _adopt_orphans() -> None:
    """On Linux, become the parent of every orphan below this process, so it can reap them."""
    if sys.platform != "linux":
        return  # elsewhere init adopts them, and reaps them
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _end_the_group() -> None:
    """Kill every process the candidate started and reap them (runs in the fork, at its end)."""
    me = os.getpid()
    with contextlib.suppress(OSError):
        os.setpgid(0, os.getpgid(os.getppid()))  # step out of the group, then end it
    with contextlib.suppress(OSError):
        os.killpg(me, signal.SIGKILL)
    if sys.platform != "linux":
        return
    # Adopted orphans, and processes that left the group, are children here by now.
    while True:
        for pid in _children_of(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _children_of(parent: int) -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    fields = stat.read().rpartition(b")")[2].split()
            except OSError:
                continue  # ended while we looked
            if int(fields[1]) == parent:
                yield int(entry.name)


# -- inline (the browser) ---------------------------------------------------------


@contextlib.contextmanager
def _in_scratch_folder() -> Iterator[None]:
    folder = tempfile.mkdtemp(prefix="agent17-check-")
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)
        shutil.rmtree(folder, ignore_errors=True)


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


def _run_inline(run: Callable[[], Plain], timeout: float) -> _Report:
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
        with _in_scratch_folder():
            data = run()
        report = _Report(_as_plain(data), None, "")
    except _DeadlinePassed:
        report = _Report(None, _too_slow(timeout), "")
    except BaseException as error:  # reported to the student, as the forked child does
        report = _Report(None, NEEDS_THE_OS if _needs_the_os(error) else raised(error), "")
    finally:
        sys.settrace(saved_trace)
        sys.stdout, sys.stderr = saved_streams
    return _Report(report.data, report.failed, printed.getvalue())
