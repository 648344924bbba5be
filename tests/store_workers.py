"""Worker bodies for the multi-process store tests, run in "spawn" child processes.

They live in a plain module (not a test file) so a spawned child can import
them by name. Each opens its own store on the shared board (named by a
`StoreSpec`, so the same worker runs on every backend), as a separate
teammate process would.
"""

from __future__ import annotations

import os
import random
import signal
import time
import traceback
from multiprocessing.synchronize import Barrier
from typing import Any, Protocol

from store_backends import StoreSpec, open_spec

from agent17 import TaskError, TaskStatus

BACKENDS = ("sqlite", "postgres")
"""Every backend the contract suite runs against."""

BARRIER_TIMEOUT_SECONDS = 30.0
LONG_LEASE_SECONDS = 3600.0
# Polling back-off while other workers finish the tasks this one waits for.
# It orders nothing: correctness never depends on how long it is.
IDLE_BACKOFF_SECONDS = 0.002


class ResultQueue(Protocol):
    """The part of multiprocessing.Queue the workers use."""

    def put(self, obj: Any, block: bool = ..., timeout: float | None = ...) -> None: ...


def unfinished_count(store: Any) -> int:
    """How many tasks are not completed yet."""
    return sum(1 for task in store.list_tasks() if task.status is not TaskStatus.COMPLETED)


def race_for_one_task(
    spec: StoreSpec, name: str, rounds: int, barrier: Barrier, results: ResultQueue
) -> None:
    """Each round: wait for everyone at the barrier, then claim_next once and report."""
    try:
        store = open_spec(spec, lease_seconds=LONG_LEASE_SECONDS)
        for round_number in range(rounds):
            barrier.wait(BARRIER_TIMEOUT_SECONDS)
            claim = store.claim_next(name)
            results.put(("claim", round_number, name, None if claim is None else claim.task.id))
        store.close()
    except BaseException:
        results.put(("error", -1, name, traceback.format_exc()))
        raise


def drain_board(spec: StoreSpec, name: str, barrier: Barrier, results: ResultQueue) -> None:
    """Claim and complete ready tasks until every task on the board is completed."""
    try:
        store = open_spec(spec, lease_seconds=LONG_LEASE_SECONDS)
        claimed = 0
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
        while True:
            claim = store.claim_next(name)
            if claim is None:
                if unfinished_count(store) == 0:
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


def work_until_killed(spec: StoreSpec, name: str, lease_seconds: float, seed: int) -> None:
    """Claim, work a little, complete; the parent may SIGKILL this process at any point.

    No multiprocessing locks, queues or events here: a process killed while
    holding one would leave it held. Everything the parent checks is in the file.
    """
    rng = random.Random(seed)
    store = open_spec(spec, lease_seconds=lease_seconds)
    while True:
        claim = store.claim_next(name)
        if claim is None:
            if unfinished_count(store) == 0:
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


def drain_through_outages(
    spec: StoreSpec, name: str, lease_seconds: float, barrier: Barrier, results: ResultQueue
) -> None:
    """Drain the board like `drain_board`, riding out a server that goes away and comes back.

    `store_unavailable` mid-operation means "rolled back" or, for a lost COMMIT,
    "unknown": a claim whose answer was lost runs out its short lease and is done
    again; a completion whose answer was lost is tried again and is either done
    now or refused as already completed by us. Reports the outages it saw.
    """
    try:
        store = open_spec(spec, lease_seconds=lease_seconds)
        outages = 0
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
        while True:
            try:
                claim = store.claim_next(name)
                if claim is None:
                    if unfinished_count(store) == 0:
                        break
                    time.sleep(IDLE_BACKOFF_SECONDS)
                    continue
                _complete_through_outages(store, claim, name)
            except TaskError as error:
                if error.code != "store_unavailable":
                    raise
                outages += 1
        store.close()
        results.put(("done", outages, name, ""))
    except BaseException:
        results.put(("error", -1, name, traceback.format_exc()))
        raise


OUTAGE_RETRIES = 20  # each waits up to pg_connection.RECONNECT_SECONDS for the server


def _complete_through_outages(store: Any, claim: Any, name: str) -> None:
    for _ in range(OUTAGE_RETRIES):
        try:
            store.complete_task(claim.task.id, name, claim.claim_token)
            return
        except TaskError as error:
            if error.code == "store_unavailable":
                continue
            # Lost answer of a completion that did commit, or our lease ran out
            # while the server was away: either way the task is not ours to finish.
            if error.code in ("claim_mismatch", "lease_expired"):
                return
            raise
    raise AssertionError(f"the server stayed away through {OUTAGE_RETRIES} completions")


def claim_through_an_interrupt(
    spec: StoreSpec, wakeup_fifo: str, ready: Any, go_on: Any, results: ResultQueue
) -> None:
    """Claim while the parent holds the write lock; the parent sends SIGINT during the wait.

    The byte that `signal.set_wakeup_fd` writes from the C-level handler tells
    the parent the signal has landed, before Python raises KeyboardInterrupt
    (which happens only once the lock wait returns).
    """
    store = open_spec(spec, lease_seconds=LONG_LEASE_SECONDS)
    fifo = os.open(wakeup_fifo, os.O_WRONLY | os.O_NONBLOCK)
    signal.set_wakeup_fd(fifo)
    ready.set()
    try:
        store.claim_next("interrupted")
    except KeyboardInterrupt:
        results.put(("interrupted", None))
    else:
        results.put(("not interrupted", None))
    signal.set_wakeup_fd(-1)
    if not go_on.wait(BARRIER_TIMEOUT_SECONDS):
        return
    claim = store.claim_next("interrupted")  # the very same object, after the interrupt
    results.put(("claimed", None if claim is None else claim.task.id))
    store.close()


# Where a lock wait sleeps in the kernel: SQLite's busy handler in nanosleep, a
# PostgreSQL client in poll/select on its socket while the server waits for the lock.
LOCK_WAIT_CHANNELS = ("nanosleep", "poll", "select")


def wait_until_sleeping(pid: int, timeout: float) -> None:
    """Poll (with a deadline) until `pid`'s main thread sleeps in the kernel (a lock wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/wchan", encoding="ascii") as handle:
            channel = handle.read()
        if any(name in channel for name in LOCK_WAIT_CHANNELS):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} never went to sleep in its lock wait")
