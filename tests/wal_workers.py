"""Processes and helpers for the -wal tests: a teammate holding a claim, a writer that dies, reads.

The workers run in "spawn" child processes, so they live in a plain module a
child can import by name. Each leaves its transactions in the -wal the way
the story has it: no close, so no checkpoint.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, Protocol

from agent17 import Refusal, SqliteTaskStore

DEADLINE_SECONDS = 60.0


class Queue(Protocol):
    """The part of multiprocessing.Queue the workers use."""

    def put(self, obj: Any, block: bool = ..., timeout: float | None = ...) -> None: ...

    def get(self, block: bool = ..., timeout: float | None = ...) -> Any: ...


def hold_a_claim(workspace: str, claimed: Event) -> None:
    """A teammate: claim the first ready task as alice, say so, and stay open until killed."""
    store = SqliteTaskStore(workspace)
    assert store.claim_next("alice") is not None
    claimed.set()
    threading.Event().wait()


def add_and_die(workspace: str, subjects: list[str]) -> None:
    """Create tasks, then die like kill -9: no close, so they are only in the -wal."""
    store = SqliteTaskStore(workspace)
    store.create_tasks([(subject, "", ()) for subject in subjects])
    os._exit(0)


@contextlib.contextmanager
def claimed_board(
    workspace: Path, saved: list[str], later: list[str], before_later: Callable[[Path], object]
) -> Iterator[int]:
    """`saved` in the board file itself, then a claim (alice's) and `later` only in its -wal.

    `before_later` runs once `saved` is there (a backup is taken then). Yields the pid
    of the teammate holding the claim, alive; it is killed when the block ends.
    """
    spawn = multiprocessing.get_context("spawn")
    lead = SqliteTaskStore(workspace)
    lead.create_tasks([(subject, "", ()) for subject in saved])
    before_later(lead.path)
    lead.close()  # checkpointed: these are in the file itself
    claimed = spawn.Event()
    holder = spawn.Process(target=hold_a_claim, args=(str(workspace), claimed))
    holder.start()
    try:
        assert claimed.wait(DEADLINE_SECONDS)
        adder = spawn.Process(target=add_and_die, args=(str(workspace), later))
        adder.start()
        adder.join(DEADLINE_SECONDS)
        assert adder.exitcode == 0
        assert file_alone(lead.path) == saved
        assert holder.pid is not None
        yield holder.pid
    finally:
        holder.kill()
        holder.join(DEADLINE_SECONDS)


def complete_on_request(workspace: str, requests: Queue, results: Queue) -> None:
    """A teammate that completes one task per request and reports each outcome.

    A request is "work" or "stop"; an outcome is ("completed", subject) or
    ("refused", code). "stop" closes the store as a teammate does when it leaves.
    """
    store = SqliteTaskStore(workspace)
    while requests.get(timeout=60) == "work":
        try:
            claim = store.claim_next("alice")
            assert claim is not None
            store.complete_task(claim.task.id, "alice", claim.claim_token)
            results.put(("completed", claim.task.subject))
        except Refusal as refusal:
            results.put(("refused", refusal.code))
    store.close()
    results.put(("closed", ""))


def board_of(path: Path) -> list[tuple[str, str, str | None]]:
    """(subject, status, owner) of each task in a board file and its -wal, changing nothing."""
    uri = f"{path.as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        rows = connection.execute("SELECT subject, status, owner FROM tasks ORDER BY sequence")
        return [(str(subject), str(status), owner) for subject, status, owner in rows]


def file_alone(path: Path) -> list[str]:
    """The subjects in a board file itself, without its -wal (changing nothing)."""
    uri = f"{path.as_uri()}?immutable=1"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        return [str(subject) for (subject,) in connection.execute("SELECT subject FROM tasks")]


def integrity(path: Path) -> list[str]:
    """PRAGMA integrity_check of a board file and its -wal, read-only."""
    uri = f"{path.as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        return [str(line) for (line,) in connection.execute("PRAGMA integrity_check")]
