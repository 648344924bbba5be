"""The same question asked of real OS processes: workers claiming from one board file.

Each worker process waits at a start barrier, then claims and completes until
nothing is ready; the counts come from the event log after every process ended.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent17.deterministic import uuid_sequence
from agent17.domain import EventKind
from agent17.racelab.schedule import GATE_TIMEOUT_SECONDS
from agent17.store.sqlite import SqliteTaskStore


@dataclass(frozen=True, slots=True)
class ProcessRaceResult:
    """Counts from processes claiming from one file: deterministic when the store is right."""

    workers: int
    tasks: int
    claimed_once: int
    claimed_more_than_once: int
    completed: int
    clean_exits: int

    def __str__(self) -> str:
        return "\n".join(
            [
                f"worker processes: {self.workers} (clean exits: {self.clean_exits})",
                f"tasks claimed exactly once: {self.claimed_once}/{self.tasks}",
                f"tasks claimed more than once: {self.claimed_more_than_once}",
                f"tasks completed: {self.completed}/{self.tasks}",
            ]
        )


def claim_until_empty(workspace: str, owner: str, token_block: int, start: Any) -> None:
    """Worker process body: wait for the start barrier, then claim and complete until none ready."""
    store = SqliteTaskStore(workspace, new_claim_token=uuid_sequence(token_block))
    try:
        start.wait(GATE_TIMEOUT_SECONDS)
        while (claim := store.claim_next(owner)) is not None:
            store.complete_task(claim.task.id, owner, claim.claim_token)
    finally:
        store.close()


def run_process_race(
    workspace: str | Path,
    *,
    workers: int = 4,
    tasks: int = 40,
    progress: Callable[[int], None] | None = None,
    timeout_seconds: float = 60.0,
) -> ProcessRaceResult:
    """Spawn `workers` OS processes that all claim from one fresh board of `tasks` tasks."""
    if workers < 1 or tasks < 1:
        raise ValueError("need at least one worker and one task")
    store = SqliteTaskStore(workspace, new_task_id=uuid_sequence(17))
    try:
        if store.list_tasks():
            raise ValueError("run_process_race needs an empty board")
        for number in range(1, tasks + 1):
            store.create_task(f"job {number:02d}")
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(workers)
        processes = [
            context.Process(
                target=claim_until_empty,
                args=(str(store.workspace), f"worker-{index}", 71 + index, start),
                name=f"agent17-race-{index}",
            )
            for index in range(1, workers + 1)
        ]
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout_seconds

        def completed() -> int:
            return sum(1 for event in store.events() if event.kind is EventKind.COMPLETED)

        try:
            while any(process.is_alive() for process in processes):
                if time.monotonic() > deadline:
                    raise TimeoutError("worker processes did not finish in time")
                # A bounded wait for progress display, not for ordering: the
                # result is read from the event log after every process ended.
                next(p for p in processes if p.is_alive()).join(0.05)
                if progress is not None:
                    progress(completed())
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
                process.join(GATE_TIMEOUT_SECONDS)
        if progress is not None:
            progress(completed())
        claims = Counter(
            event.task_id for event in store.events() if event.kind is EventKind.CLAIMED
        )
        return ProcessRaceResult(
            workers=workers,
            tasks=tasks,
            claimed_once=sum(1 for count in claims.values() if count == 1),
            claimed_more_than_once=sum(1 for count in claims.values() if count > 1),
            completed=completed(),
            clean_exits=sum(1 for process in processes if process.exitcode == 0),
        )
    finally:
        store.close()
