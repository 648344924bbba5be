"""Worker bodies for the multi-process store tests, run in "spawn" child processes.

They live in a plain module (not a test file) so a spawned child can import
them by name. Each opens its own SqliteTaskStore on the shared file, as a
separate teammate process would.
"""

from __future__ import annotations

import random
import sqlite3
import time
import traceback
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, Protocol

from agent17.domain import TaskError
from agent17.store.sqlite import SqliteTaskStore

BARRIER_TIMEOUT_SECONDS = 30.0
LONG_LEASE_SECONDS = 3600.0
# Polling back-off while other workers finish the tasks this one waits for.
# It orders nothing: correctness never depends on how long it is.
IDLE_BACKOFF_SECONDS = 0.002


class ResultQueue(Protocol):
    """The part of multiprocessing.Queue the workers use."""

    def put(self, obj: Any, block: bool = ..., timeout: float | None = ...) -> None: ...


def unfinished_count(path: Path) -> int:
    """How many tasks are not completed, read without taking the write lock."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    try:
        (count,) = connection.execute(
            "SELECT count(*) FROM tasks WHERE status != 'completed'"
        ).fetchone()
    finally:
        connection.close()
    return int(count)


def race_for_one_task(
    workspace: str, name: str, rounds: int, barrier: Barrier, results: ResultQueue
) -> None:
    """Each round: wait for everyone at the barrier, then claim_next once and report."""
    try:
        store = SqliteTaskStore(workspace, lease_seconds=LONG_LEASE_SECONDS)
        for round_number in range(rounds):
            barrier.wait(BARRIER_TIMEOUT_SECONDS)
            claim = store.claim_next(name)
            results.put(("claim", round_number, name, None if claim is None else claim.task.id))
        store.close()
    except BaseException:
        results.put(("error", -1, name, traceback.format_exc()))
        raise


def drain_board(workspace: str, name: str, barrier: Barrier, results: ResultQueue) -> None:
    """Claim and complete ready tasks until every task on the board is completed."""
    try:
        store = SqliteTaskStore(workspace, lease_seconds=LONG_LEASE_SECONDS)
        claimed = 0
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
        while True:
            claim = store.claim_next(name)
            if claim is None:
                if unfinished_count(store.path) == 0:
                    break
                time.sleep(IDLE_BACKOFF_SECONDS)
                continue
            claimed += 1
            store.complete_task(claim.task.id, name, claim.claim_token)
        store.close()
        results.put(("done", claimed, name, ""))
    except BaseException:
        results.put(("error", -1, name, traceback.format_exc()))
        raise


def work_until_killed(workspace: str, name: str, lease_seconds: float, seed: int) -> None:
    """Claim, work a little, complete; the parent may SIGKILL this process at any point.

    No multiprocessing locks, queues or events here: a process killed while
    holding one would leave it held. Everything the parent checks is in the file.
    """
    rng = random.Random(seed)
    store = SqliteTaskStore(workspace, lease_seconds=lease_seconds)
    while True:
        claim = store.claim_next(name)
        if claim is None:
            if unfinished_count(store.path) == 0:
                break
            # Waiting for dependencies, or for a killed worker's lease to run out.
            time.sleep(IDLE_BACKOFF_SECONDS * 5)
            continue
        # Pretend to work, so that kills land between claim and complete as well.
        time.sleep(rng.uniform(0.0, 0.02))
        try:
            store.complete_task(claim.task.id, name, claim.claim_token)
        except TaskError as error:
            # Starved past our own lease on a busy machine: the task went back to
            # pending and someone else will finish it. Anything else is a bug.
            if error.code not in ("lease_expired", "claim_mismatch"):
                raise
    store.close()
