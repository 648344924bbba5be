"""A process swapping a folder for a symlink never gets read_file or write_file out.

The attack: while the tools work, a second OS process exchanges `workspace/sub`
(a real folder) with a symlink to a folder outside the workspace, as fast as it
can. A path checked by name and then opened by name again loses that race now
and then: the check sees the folder, the open follows the link. Each call here
must end as a success on the inside file or as a coded refusal, and nothing
may be read from or written to the outside folder.

The exchange is renameat2(RENAME_EXCHANGE), atomic, so `sub` always exists,
either as the folder or as the link: the only thing a call can lose to is the
link.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent17.claims import ToolContext
from agent17.tools.base import AnyTool, result_error
from agent17.tools.workspace_tools import workspace_tool_definitions

pytestmark = pytest.mark.processes

spawn = multiprocessing.get_context("spawn")
CONTEXT = ToolContext(identity="alice")
INSIDE_TEXT = "the inside file\n"
OUTSIDE_TEXT = "the outside secret\n"
READS, WRITES = 1000, 600
SWAPPER_DEADLINE_SECONDS = 120.0
"""The swapper stops by itself after this long, should the test process die first."""
RENAME_EXCHANGE = 2
AT_FDCWD = -100

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def _exchange(first: str, second: str) -> None:
    assert _renameat2 is not None
    if _renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE):
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), first)


def _swap_until_stopped(workspace: str, started: Any, stop: Any, swaps: Any) -> None:
    """Exchange `sub` with the `.sub-link` symlink and back, until `stop` or the deadline."""
    sub, link = os.path.join(workspace, "sub"), os.path.join(workspace, ".sub-link")
    deadline = time.monotonic() + SWAPPER_DEADLINE_SECONDS
    count = 0

    def go_on() -> bool:
        return not stop.is_set() and time.monotonic() < deadline

    try:
        # The same checks after each exchange, so `sub` is a link about half of the time.
        while True:
            _exchange(sub, link)  # `sub` is the link to the outside folder now
            last = not go_on()
            _exchange(sub, link)  # and the real folder again
            count += 1
            started.set()
            if last or not go_on():
                break
    finally:
        swaps.value = count


@dataclass(frozen=True, slots=True)
class Arena:
    """A workspace with `sub/secret.txt` inside, and an outside folder with its own secret.txt."""

    workspace: Path
    outside: Path

    @classmethod
    def make(cls, base: Path) -> Arena:
        workspace, outside = base / "workspace", base / "outside"
        (workspace / "sub").mkdir(parents=True)
        (workspace / "sub" / "secret.txt").write_text(INSIDE_TEXT)
        outside.mkdir()
        (outside / "secret.txt").write_text(OUTSIDE_TEXT)
        (workspace / ".sub-link").symlink_to(outside, target_is_directory=True)
        return cls(workspace, outside)


@dataclass(slots=True)
class Tally:
    """What the calls made under the race came to."""

    calls: int = 0
    successes: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    leaks: int = 0
    """Reads that returned the outside file's content."""
    crashes: list[str] = field(default_factory=list)
    """Exceptions that came out of a tool's run instead of a result."""
    written: list[str] = field(default_factory=list)
    """Names of the files successful writes reported."""
    swaps: int = 0

    def note(self, result: dict[str, Any]) -> None:
        self.calls += 1
        error = result_error(result)
        if error is None:
            self.successes += 1
        else:
            self.codes[error[0]] += 1


def race(
    arena: Arena, tools: tuple[AnyTool, AnyTool, AnyTool], *, reads: int, writes: int
) -> Tally:
    """`reads` read_file and `writes` write_file calls under `sub`, while a process swaps it."""
    _, read_file, write_file = tools
    tally = Tally()
    started, stop, swaps = spawn.Event(), spawn.Event(), spawn.Value("q", 0)
    swapper = spawn.Process(
        target=_swap_until_stopped, args=(str(arena.workspace), started, stop, swaps)
    )
    swapper.start()
    try:
        assert started.wait(60), "the swapper never started"
        for _ in range(reads):
            try:
                result = read_file.run({"path": "sub/secret.txt"}, CONTEXT)
            except Exception as error:
                tally.crashes.append(repr(error))
                continue
            tally.note(result)
            if result.get("content") == OUTSIDE_TEXT:
                tally.leaks += 1
        for number in range(writes):
            name = f"note-{number}.txt"
            try:
                result = write_file.run({"path": f"sub/{name}", "content": name}, CONTEXT)
            except Exception as error:
                tally.crashes.append(repr(error))
                continue
            tally.note(result)
            if result_error(result) is None:
                tally.written.append(name)
    finally:
        stop.set()
        swapper.join(60)
    assert swapper.exitcode == 0, "the swapper failed"
    tally.swaps = swaps.value
    return tally


def escaped(arena: Arena) -> list[str]:
    """Files that appeared in the outside folder: none may."""
    return sorted(path.name for path in arena.outside.iterdir() if path.name != "secret.txt")


needs_exchange = pytest.mark.skipif(
    _renameat2 is None, reason="the C library has no renameat2 to swap atomically"
)


@pytest.fixture
def arena(tmp_path: Path) -> Arena:
    return Arena.make(tmp_path)


@needs_exchange
def test_reads_raced_by_a_symlink_swapper_never_return_the_outside_file(arena: Arena) -> None:
    tally = race(arena, workspace_tool_definitions(arena.workspace), reads=READS, writes=0)
    assert tally.crashes == []
    assert tally.leaks == 0
    assert tally.swaps >= 100, "the swapper hardly ran: the race was not tried"
    # Both sides of the race were met: the folder (a success) and the link (a refusal).
    assert tally.successes > 0 and set(tally.codes) == {"path_outside_workspace"}
    assert (arena.outside / "secret.txt").read_text() == OUTSIDE_TEXT


@needs_exchange
def test_writes_raced_by_a_symlink_swapper_never_leave_a_file_outside(arena: Arena) -> None:
    tally = race(arena, workspace_tool_definitions(arena.workspace), reads=0, writes=WRITES)
    assert tally.crashes == []
    assert escaped(arena) == []
    assert tally.swaps >= 100, "the swapper hardly ran: the race was not tried"
    # The link was met, and refused. (Few writes succeed: while one syncs its file,
    # the swapper's exchanges wait on the file system, most often with `sub` a link.)
    assert tally.codes["path_outside_workspace"] > 0 and set(tally.codes) == {
        "path_outside_workspace"
    }
    # Every write that said it succeeded is in the real folder, whole, and nothing else is.
    sub = arena.workspace / "sub"
    assert sorted(path.name for path in sub.iterdir()) == sorted(["secret.txt", *tally.written])
    assert all((sub / name).read_text() == name for name in tally.written)
    assert (arena.outside / "secret.txt").read_text() == OUTSIDE_TEXT


def _measure() -> None:
    """Print what the race does to the tools of the `agent17` on the path, reads then writes."""
    import tempfile

    import agent17

    print(f"agent17 from {Path(agent17.__file__).parent}")
    for reads, writes in ((READS, 0), (0, WRITES)):
        with tempfile.TemporaryDirectory() as base:
            arena = Arena.make(Path(base))
            tools = workspace_tool_definitions(arena.workspace)
            tally = race(arena, tools, reads=reads, writes=writes)
            missing = [
                name for name in tally.written if not (arena.workspace / "sub" / name).is_file()
            ]
            print(
                f"{reads} reads, {writes} writes, {tally.swaps} swaps: {tally.successes} ok,"
                f" refused {dict(tally.codes)}, outside content returned {tally.leaks},"
                f" tracebacks {len(tally.crashes)}, files left outside {len(escaped(arena))},"
                f" 'ok' writes not inside {len(missing)}"
            )


if __name__ == "__main__":
    # Before and after: PYTHONPATH=<an older checkout> python tests/test_workspace_race.py
    _measure()
