"""A state file's and its -shm's descriptors, shared in this process: closing one drops locks.

POSIX record locks belong to a process and a file, not to a descriptor: closing
any descriptor of a file drops every such lock the process holds on it. SQLite
keeps its locks on the database file and the -shm that way, so a plain
open() and close() of either, anywhere in a process that has a connection
there, silently takes that connection's locks away: another process may then
believe itself the last one open and delete the -wal under it, or reset the
-shm it reads. So agent17 reads those two files only through a descriptor of
this registry, one per file, closed when its last holder lets it go; a state
file holds its database file's from before its connection opens until after it
closes. (The -wal and agent17's own files carry no SQLite locks.)

Lock probes use open-file-description locks (`F_OFD_GETLK`): they see every
process's locks, this one's included.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_FLOCK: Final = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid

FileKey = tuple[int, int]
"""(st_dev, st_ino): which file, whatever its name."""


@dataclass
class _Entry:
    descriptors: list[int]
    holders: int = 0


_registry: dict[FileKey, _Entry] = {}
_registry_lock = threading.Lock()
# Shares let go from a finalizer (garbage collection may run one while this very
# thread holds the lock): closed by the next call that takes the lock.
_let_go_later: list[Held] = []


class Held:
    """One holder's share of a file's descriptor; give it back with `release()`."""

    def __init__(self, key: FileKey, descriptor: int) -> None:
        self.key = key
        self.descriptor = descriptor
        self._released = False

    def release(self, *, later: bool = False) -> None:
        """Let the descriptor go (idempotent); the last holder's release closes it.

        `later`: from a finalizer; takes no lock, and the descriptor closes at the
        next hold or release.
        """
        if later:
            _let_go_later.append(self)
            return
        with _registry_lock:
            _let_go_pending()
            self._let_go()

    def _let_go(self) -> None:
        if self._released:
            return
        self._released = True
        entry = _registry[self.key]
        entry.holders -= 1
        if entry.holders == 0:
            del _registry[self.key]
            for descriptor in entry.descriptors:
                os.close(descriptor)


def _let_go_pending() -> None:
    while _let_go_later:
        _let_go_later.pop()._let_go()


def hold(path: Path) -> Held | None:
    """A descriptor of the file now at `path`, shared with its other holders; None if none."""
    with _registry_lock:
        _let_go_pending()
        try:
            key = _key(os.stat(path))
        except FileNotFoundError:
            return None
        entry = _registry.get(key)
        if entry is None:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                descriptor = os.open(path, flags)
            except FileNotFoundError:
                return None
            key = _key(os.fstat(descriptor))
            entry = _registry.get(key)
            if entry is None:
                entry = _registry[key] = _Entry([descriptor])
            else:  # replaced between the stat and the open, by a file already held
                entry.descriptors.append(descriptor)  # closing it now would drop the locks
        entry.holders += 1
        return Held(key, entry.descriptors[0])


@contextlib.contextmanager
def held(path: Path) -> Iterator[Held | None]:
    """`hold(path)` for the length of a `with` block."""
    share = hold(path)
    try:
        yield share
    finally:
        if share is not None:
            share.release()


def locked(path: Path, start: int, length: int) -> bool:
    """Whether any process, this one too, locks bytes [start, start+length) of `path`."""
    getlk = getattr(fcntl, "F_OFD_GETLK", None)
    if not hasattr(fcntl, "fcntl"):
        return False  # the browser edition: one process, and nothing else can open its files
    with held(path) as share:
        if share is None:
            return False
        if getlk is None:
            return True  # no way to see this process's own locks: assume the file is in use
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
        answer = fcntl.fcntl(share.descriptor, getlk, probe)
        return bool(_FLOCK.unpack(answer)[0] != fcntl.F_UNLCK)


def _key(info: os.stat_result) -> FileKey:
    return info.st_dev, info.st_ino
