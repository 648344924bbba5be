"""Shared helpers of the store tests: deterministic stores, raw SQLite access, byte snapshots.

Plain functions rather than pytest fixtures, so each test module says in one
line which store it builds (and no conftest.py is needed).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent17 import SqliteTaskStore, TaskError
from agent17.armour.held_files import held
from agent17.deterministic import COURSE_START, ManualClock, uuid_sequence

TASK_ID_BLOCK = 17
TOKEN_BLOCK = 71
ONE_MICROSECOND = timedelta(microseconds=1)


def new_store(
    workspace: Path,
    *,
    clock: ManualClock | None = None,
    new_task_id: Callable[[], str] | None = None,
    new_claim_token: Callable[[], str] | None = None,
    lease_seconds: float = 300.0,
) -> SqliteTaskStore:
    """A store with a manual clock and counting ids/tokens unless told otherwise."""
    return SqliteTaskStore(
        workspace,
        clock=clock if clock is not None else ManualClock(),
        new_task_id=new_task_id if new_task_id is not None else uuid_sequence(TASK_ID_BLOCK),
        new_claim_token=(
            new_claim_token if new_claim_token is not None else uuid_sequence(TOKEN_BLOCK)
        ),
        lease_seconds=lease_seconds,
    )


def task_id(number: int) -> str:
    """The id the n-th task of a default store gets (1-based)."""
    return f"00000000-0000-4000-8000-{TASK_ID_BLOCK:04d}{number:08d}"


def token(number: int) -> str:
    """The n-th claim token of a default store (1-based)."""
    return f"00000000-0000-4000-8000-{TOKEN_BLOCK:04d}{number:08d}"


def db_path(workspace: Path) -> Path:
    """Where the store keeps its database inside `workspace`."""
    return workspace / ".agent_tutorial" / "tasks.sqlite3"


@contextlib.contextmanager
def raw_connection(path: Path, *, unchecked: bool = False) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection in autocommit mode; `unchecked` turns off FK and CHECKs.

    Used to plant corruption the store itself would never write.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        if unchecked:
            connection.execute("PRAGMA foreign_keys = OFF")
            connection.execute("PRAGMA ignore_check_constraints = ON")
        yield connection
    finally:
        connection.close()


def sequence_of(path: Path, task_id_: str) -> int:
    """The creation sequence of a task, read straight from the file."""
    with raw_connection(path) as connection:
        row = connection.execute("SELECT sequence FROM tasks WHERE id = ?", (task_id_,)).fetchone()
    assert row is not None, task_id_
    return int(row[0])


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes (proves "left untouched").

    Read through agent17's shared descriptor: closing a descriptor of its own would
    drop the SQLite locks this process's stores hold on the file (held_files.py).
    """
    hasher, offset = hashlib.sha256(), 0
    with held(path) as share:
        if share is None:
            raise FileNotFoundError(path)
        while chunk := os.pread(share.descriptor, 1 << 20, offset):
            hasher.update(chunk)
            offset += len(chunk)
    return hasher.hexdigest()


def raises_code(code: str, action: Callable[[], object]) -> TaskError:
    """Run `action`, require a TaskError with `code`, and return it."""
    with pytest.raises(TaskError) as caught:
        action()
    assert caught.value.code == code, f"expected {code}, got {caught.value.code}: {caught.value}"
    return caught.value


def descending_ids(count: int) -> Callable[[], str]:
    """Adversarial task ids: ffffffff-…, eeeeeeee-…, so UUID order is the reverse of creation."""
    digits = "fedcba9876543210"
    if count > len(digits):
        raise ValueError("at most 16 descending ids")
    values = iter(f"{d * 8}-{d * 4}-4{d * 3}-8{d * 3}-{d * 12}" for d in digits[:count])
    return lambda: next(values)


def fixed_ids(*ids: str) -> Callable[[], str]:
    """An id factory returning exactly these ids, then failing loudly."""
    values = iter(ids)
    return lambda: next(values)


def at(seconds: float) -> datetime:
    """COURSE_START plus `seconds`: the manual clock's instants in tests."""
    return COURSE_START + timedelta(seconds=seconds)


__all__ = [
    "COURSE_START",
    "ONE_MICROSECOND",
    "UTC",
    "ManualClock",
    "at",
    "db_path",
    "descending_ids",
    "digest",
    "fixed_ids",
    "new_store",
    "raises_code",
    "raw_connection",
    "sequence_of",
    "task_id",
    "token",
]
