"""The shared notes file of the append_note exercise: what two teammates both write to."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


class NotesFile:
    """A shared notes file: `read()`, `write(text)` (replace all), `append(text)`, `lock()`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> str:
        """The whole file now."""
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""

    def write(self, text: str) -> None:
        """Replace the whole file with `text`, in one step.

        Written beside it and renamed over it, so that a teammate reading at the
        same moment sees the old file or the new one, never half of one: the only
        way left to lose a note is the lesson's, a read-modify-write race.
        """
        scratch = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, self.path)

    def append(self, text: str) -> None:
        """Add `text` at the end in one system call (O_APPEND: never mixed with another)."""
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, text.encode("utf-8"))
        finally:
            os.close(descriptor)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the file's lock (a lock file beside it) for the block, across processes."""
        descriptor = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)
