"""File locks between the workers of one schedule: `fcntl.flock` and `fcntl.lockf`, played.

The workers of a schedule are threads (or tasks) of one process, standing for
processes. A kernel lock cannot stand in for the lock between processes here:
a POSIX record lock never excludes a thread of the same process, and a flock
that makes a worker wait blocks a thread the scheduler then waits for. So while
a schedule is explored, `fcntl.flock`, `fcntl.lockf` and `os.close` called by a
worker go through a table of the scheduler's own (and `os.open` notes each
descriptor's file name, for the timeline), one entry per file (device
and inode): taking a lock is a point, a lock another worker holds makes the
worker wait there (or raises BlockingIOError for LOCK_NB), and closing the
descriptor lets the lock go, as the kernel would. Called by anything that is
not a worker's turn, they are the real functions.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from agent17.exercises.schedules.run import Run, Worker, WouldWait

Key = tuple[int, int]

_PLAYED: Final = (("flock", fcntl), ("lockf", fcntl), ("close", os), ("open", os))
# The functions played over, as they were when `played` began (the browser's stand-in
# fcntl has a flock, from agent17.browser, but no lockf: None then).
_REAL: dict[str, Any] = {}
_ACTIVE: list[FileLocks] = []  # the table of the schedule being played, while one is


def _key(descriptor: int) -> Key:
    status = os.fstat(descriptor)
    return status.st_dev, status.st_ino


@dataclass(eq=False)
class _Wanted:
    """A lock a worker waits for: free once no other worker holds the file in a clashing mode."""

    locks: FileLocks
    key: Key
    exclusive: bool

    def is_free(self, worker: Worker) -> bool:
        return not self.locks.clashes(worker.name, self.key, self.exclusive)


@dataclass(eq=False)
class FileLocks:
    """Which worker holds which file's lock (and through which descriptor) in one schedule."""

    run: Run
    held: dict[Key, dict[str, tuple[int, bool]]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # descriptor -> the file's name

    def clashes(self, name: str, key: Key, exclusive: bool) -> bool:
        """Whether worker `name` would have to wait for that lock."""
        others = [mode for holder, (_, mode) in self.held.get(key, {}).items() if holder != name]
        return bool(others) and (exclusive or any(others))

    def lock(self, descriptor: Any, operation: int) -> None:
        """flock/lockf by the running worker, at a point of its own."""
        number = descriptor if isinstance(descriptor, int) else descriptor.fileno()
        key, name = _key(number), self._name(descriptor, number)
        if operation & fcntl.LOCK_UN:
            self.run.point("unlock")
            self.run.record("unlock", name, "")
            self.held.get(key, {}).pop(self._worker(), None)
            return
        exclusive = bool(operation & fcntl.LOCK_EX)
        action = "lock" if exclusive else "lock (shared)"

        def take() -> None:
            worker = self._worker()
            if self.clashes(worker, key, exclusive):
                if operation & fcntl.LOCK_NB:
                    self.run.record(action, name, "refused: someone else holds it")
                    self.run.give_way()  # a retry loop must not starve the holder
                    raise BlockingIOError(errno.EWOULDBLOCK, os.strerror(errno.EWOULDBLOCK))
                raise WouldWait(_Wanted(self, key, exclusive), "another worker holds this lock")
            self.held.setdefault(key, {})[worker] = (number, exclusive)

        self.run.attempt(action, name, take)
        self.run.record(action, name, "held")

    def _name(self, descriptor: Any, number: int) -> str:
        # A file object knows its name; a bare descriptor's was noted when `os.open` made it.
        name = getattr(descriptor, "name", None)
        if isinstance(name, str | os.PathLike):
            return os.path.basename(name)
        return self.names.get(number, "a file")

    def opened(self, path: Any, descriptor: int) -> None:
        """The running worker opened `path` as `descriptor`: its name, for the timeline."""
        self.names[descriptor] = os.path.basename(os.fsdecode(path))

    def closing(self, descriptor: int) -> None:
        """The running worker closes `descriptor`: the locks taken through it end."""
        worker = self._worker()
        for holders in self.held.values():
            if holders.get(worker, (None,))[0] == descriptor:
                del holders[worker]

    def sweep(self) -> None:
        """Let go of locks whose descriptor is closed (a file object closed, not `os.close`)."""
        for key, holders in self.held.items():
            for worker, (descriptor, _) in list(holders.items()):
                try:
                    still = _key(descriptor) == key
                except OSError:
                    still = False
                if not still:
                    del holders[worker]

    def release_all(self, worker: str) -> None:
        """A worker's process ended: every lock it held is gone."""
        for holders in self.held.values():
            holders.pop(worker, None)

    def _worker(self) -> str:
        current = self.run.current
        assert current is not None
        return current.name


def _in_turn() -> FileLocks | None:
    if _ACTIVE and _ACTIVE[-1].run.current is not None:
        return _ACTIVE[-1]
    return None


def _flock(descriptor: Any, operation: int) -> Any:
    table = _in_turn()
    if table is None:
        return _REAL["flock"](descriptor, operation)
    table.lock(descriptor, operation)
    return None


def _lockf(descriptor: Any, cmd: int, *rest: Any) -> Any:
    table = _in_turn()
    if table is None:
        return _REAL["lockf"](descriptor, cmd, *rest)
    table.lock(descriptor, cmd)
    return None


def _close(descriptor: int) -> Any:
    table = _in_turn()
    if table is not None:
        table.closing(descriptor)
    return _REAL["close"](descriptor)


def _open(path: Any, flags: int, *rest: Any, **options: Any) -> Any:
    descriptor = _REAL["open"](path, flags, *rest, **options)
    table = _in_turn()
    if table is not None:
        table.opened(path, descriptor)
    return descriptor


_STAND_INS: Final = {"flock": _flock, "lockf": _lockf, "close": _close, "open": _open}


@contextlib.contextmanager
def played(locks: FileLocks) -> Iterator[FileLocks]:
    """While the block runs, a worker's flock, lockf, os.open and os.close go through `locks`."""
    if _ACTIVE:
        raise RuntimeError("one schedule at a time")
    _ACTIVE.append(locks)
    for name, module in _PLAYED:
        _REAL[name] = getattr(module, name, None)
        if _REAL[name] is not None:
            setattr(module, name, _STAND_INS[name])
    try:
        yield locks
    finally:
        for name, module in _PLAYED:
            if _REAL[name] is not None:
                setattr(module, name, _REAL[name])
        _ACTIVE.remove(locks)
