"""Teammate processes for the tests: start `agent17 teammate`, read its lines, wait with deadlines.

No sleep orders anything: each step waits, with a deadline, for what a process
reports (a line on its output) or writes (an event on the board).
"""

from __future__ import annotations

import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

DEADLINE_SECONDS = 60.0


class Teammate:
    """One `agent17 teammate` process and the lines it prints."""

    def __init__(
        self,
        workspace: Path,
        name: str,
        *options: str,
        command: Sequence[str] = (sys.executable, "-m", "agent17"),
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], object] | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [*command, "teammate", "--name", name, "--workspace", str(workspace), *options],
            env=env if environment is None else {**(env or os.environ), **environment},
            preexec_fn=preexec_fn,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(
                target=self._read, args=(self.process.stdout, self.lines), daemon=True
            ),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: queue.Queue[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.put(line.rstrip("\n"))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line.rstrip("\n"))

    def wait_for_line(self, fragment: str, timeout: float = DEADLINE_SECONDS) -> str:
        """The first line containing `fragment` (lines before it are kept in `seen`)."""
        for line in self.seen:
            if fragment in line:
                return line
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(
            f"{self.name} never printed {fragment!r}; printed {self.seen}, stderr {self.errors}"
        )

    def finish(self, timeout: float = DEADLINE_SECONDS) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


@pytest.fixture
def teammates() -> Iterator[Callable[..., Teammate]]:
    started: list[Teammate] = []

    def start(
        workspace: Path, name: str, *options: str, environment: dict[str, str] | None = None
    ) -> Teammate:
        teammate = Teammate(workspace, name, *options, environment=environment)
        started.append(teammate)
        return teammate

    yield start
    for teammate in started:
        if teammate.process.poll() is None:
            teammate.process.kill()
        teammate.process.wait(30)


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float = DEADLINE_SECONDS
) -> float:
    """Poll `condition` until it holds (deadline `timeout`); the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def integrity(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("PRAGMA integrity_check")]
    finally:
        connection.close()
