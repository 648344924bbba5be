"""Worker bodies for the PostgreSQL stress tests, run in "spawn" child processes.

Unlike the contract suite's workers, which stop at the first error, these keep
going and count every error by what it was (a raw driver exception, or a
refusal's code): the test wants the whole tally of a hostile run, not its first
failure. A claim whose completion failed is completed again, so a failure never
strands a task.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from multiprocessing.synchronize import Barrier
from typing import Any

from store_backends import StoreSpec, open_spec
from store_workers import (
    BARRIER_TIMEOUT_SECONDS,
    IDLE_BACKOFF_SECONDS,
    LONG_LEASE_SECONDS,
    ResultQueue,
    unfinished_count,
)

from agent17 import TaskError

DRAIN_SECONDS = 90.0
"""How long a worker keeps trying: past it, the board is reported as stuck."""
COMPLETION_ATTEMPTS = 50


def what_failed(error: BaseException) -> str:
    """A TaskError as its code, anything else as its class (a driver's error by its name)."""
    if isinstance(error, TaskError):
        return f"refusal {error.code}"
    return f"raw {type(error).__module__}.{type(error).__qualname__}"


def drain_counting(spec: StoreSpec, name: str, barrier: Barrier, results: ResultQueue) -> None:
    """Drain the board; report ("done", name, ids completed, {failure: count}, example)."""
    failures: Counter[str] = Counter()
    examples: dict[str, str] = {}
    completed: list[str] = []

    def failed(error: Exception) -> None:
        failures[what_failed(error)] += 1
        examples.setdefault(what_failed(error), f"{error}"[:300])

    try:
        store = None
        barrier.wait(BARRIER_TIMEOUT_SECONDS)
        deadline = time.monotonic() + DRAIN_SECONDS
        while store is None and time.monotonic() < deadline:
            try:
                store = open_spec(spec, lease_seconds=LONG_LEASE_SECONDS)
            except Exception as error:
                failed(error)
        while store is not None and time.monotonic() < deadline:
            try:
                claim = store.claim_next(name)
                if claim is None:
                    if unfinished_count(store) == 0:
                        break
                    time.sleep(IDLE_BACKOFF_SECONDS)
                    continue
            except Exception as error:
                failed(error)
                continue
            for _ in range(COMPLETION_ATTEMPTS):
                try:
                    store.complete_task(claim.task.id, name, claim.claim_token)
                except Exception as error:
                    failed(error)
                    if isinstance(error, TaskError) and error.code == "claim_mismatch":
                        break  # not ours (any more): counted, and not tried again
                else:
                    completed.append(claim.task.id)
                    break
        if store is not None:
            store.close()
        results.put(("done", name, completed, dict(failures), examples))
    except BaseException:
        results.put(("error", name, [], {}, {"traceback": traceback.format_exc()}))
        raise


def tally(reports: list[tuple[Any, ...]]) -> tuple[list[str], Counter[str], dict[str, str]]:
    """Every completed id of every worker, every failure counted, one example of each."""
    completed: list[str] = []
    failures: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for kind, name, done, counted, example in reports:
        if kind == "error":
            failures[f"worker {name} crashed"] += 1
            examples[f"worker {name} crashed"] = example["traceback"]
        completed += done
        failures.update(counted)
        examples.update(example)
    return completed, failures, examples
