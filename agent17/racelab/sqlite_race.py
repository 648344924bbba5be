"""The race on SQLite: a worker's scan opens its claim transaction and pauses inside it.

BEGIN IMMEDIATE takes the write lock and the scan runs inside it; an injected
clock that waits for the worker's `claim` step holds it there. A second
worker's scan cannot start while the first holds the lock: the lab proves that
with a probe that fails with "database is locked" instead of waiting. The
second worker then scans after the first committed, finds C taken, and gets
None.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import EventKind, TaskClaim, TaskError
from agent17.racelab.schedule import (
    DEFAULT_SCHEDULE,
    GATE_TIMEOUT_SECONDS,
    RaceResult,
    RaceStep,
    Step,
    check_schedule,
    race_workspace,
)
from agent17.store.sqlite import SqliteTaskStore


class _GatedClock:
    """A clock that, once armed, stops its caller until released.

    The store reads its clock right after BEGIN IMMEDIATE, so a worker stopped
    here is inside its claim transaction, holding the write lock.
    """

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self.entered = threading.Event()
        self.proceed = threading.Event()

    def __call__(self) -> datetime:
        self.entered.set()
        if not self.proceed.wait(GATE_TIMEOUT_SECONDS):
            raise RuntimeError("race lab: a worker was never released from its transaction")
        return self._clock()


@dataclass
class _SqliteWorker:
    name: str
    store: SqliteTaskStore
    gate: _GatedClock
    thread: threading.Thread | None = None
    claim: TaskClaim | None = None
    error: BaseException | None = None
    claim_requested: bool = False
    finished: bool = False

    def start(self) -> None:
        def run() -> None:
            try:
                self.claim = self.store.claim_next(self.name)
            except BaseException as error:  # re-raised in the runner's thread
                self.error = error

        self.thread = threading.Thread(target=run, name=f"race-{self.name}", daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.gate.proceed.set()
        assert self.thread is not None
        self.thread.join(GATE_TIMEOUT_SECONDS)
        if self.thread.is_alive():
            raise RuntimeError(f"race lab: {self.name}'s claim did not finish")
        if self.error is not None:
            raise self.error
        self.finished = True


def _first_inside(waiters: Sequence[_SqliteWorker]) -> str:
    """The waiter whose BEGIN IMMEDIATE got the lock (only one can hold it)."""
    deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        for worker in waiters:
            if worker.gate.entered.wait(0.005):
                return worker.name
    names = ", ".join(worker.name for worker in waiters)
    raise RuntimeError(f"race lab: none of {names} entered the claim transaction")


def _holds(claim: TaskClaim | None, task_id: str) -> bool:
    return claim is not None and claim.task.id == task_id


def _probe_write_lock(path: Path) -> str:
    """Try to begin a write without waiting: proves whether someone holds the lock now."""
    connection = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        return str(error)
    else:
        connection.execute("ROLLBACK")
        return "free"
    finally:
        connection.close()


def _claim_outcome(worker: _SqliteWorker) -> str:
    if worker.claim is None:
        return "finds nothing ready: claim_next returns None"
    return (
        f"claim of {worker.claim.task.subject} commits (token ...{worker.claim.claim_token[-4:]})"
    )


def run_sqlite_race(
    schedule: Sequence[Step] = DEFAULT_SCHEDULE, *, workspace: str | Path | None = None
) -> RaceResult:
    """Run the same schedule on SqliteTaskStore, where scan and claim are one transaction."""
    workers = check_schedule(schedule)
    clock = ManualClock()
    tokens = uuid_sequence(71)
    with race_workspace(workspace) as folder:
        lead = SqliteTaskStore(
            folder, clock=clock, new_task_id=uuid_sequence(17), new_claim_token=tokens
        )
        a = lead.create_task("A")
        b = lead.create_task("B")
        for task, owner in ((a, workers[0]), (b, workers[-1])):
            claim = lead.claim_task(task.id, owner)
            lead.complete_task(task.id, owner, claim.claim_token)
        c = lead.create_task("C", blocked_by=(a.id, b.id))
        team: dict[str, _SqliteWorker] = {}
        for name in workers:
            gate = _GatedClock(clock)
            # One store (one connection) per worker, as if each were its own process.
            team[name] = _SqliteWorker(
                name, SqliteTaskStore(folder, clock=gate, new_claim_token=tokens), gate
            )
        try:
            steps, holder = _run_sqlite_schedule(schedule, team, lead.path)
            assert holder is None
            notes = []
            for worker in team.values():
                if worker.claim is None:
                    try:
                        worker.store.claim_task(c.id, worker.name)
                    except TaskError as error:
                        notes.append(
                            f"{worker.name} then tries claim_task({c.subject}) -> {error.code}"
                        )
            committed = sum(
                1
                for event in lead.events()
                if event.kind is EventKind.CLAIMED and event.task_id == c.id
            )
            final = lead.get_task(c.id)
            believers = tuple(name for name in workers if _holds(team[name].claim, c.id))
            return RaceResult(
                board="SQLite store",
                contested=c.subject,
                steps=tuple(steps),
                believers=believers,
                recorded_owner=final.owner,
                claims_committed=committed,
                notes=tuple(notes),
                tasks=tuple(lead.list_tasks()),
            )
        finally:
            for worker in team.values():
                worker.gate.proceed.set()
                if worker.thread is not None:
                    worker.thread.join(GATE_TIMEOUT_SECONDS)
                worker.store.close()
            lead.close()


def _run_sqlite_schedule(
    schedule: Sequence[Step], team: dict[str, _SqliteWorker], path: Path
) -> tuple[list[RaceStep], str | None]:
    steps: list[RaceStep] = []
    holder: str | None = None
    waiting: list[str] = []

    def hand_over() -> None:
        # The lock is free again. SQLite's busy handler is not a queue: whichever
        # waiter retries first gets in, so with three or more workers it need not be
        # the one that has waited longest. Watch them all and follow the one inside.
        nonlocal holder
        while holder is None and waiting:
            name = _first_inside([team[n] for n in waiting])
            waiting.remove(name)
            worker = team[name]
            holder = name
            steps.append(
                RaceStep(0, name, "scan", "gets the write lock at last; scans what was committed")
            )
            if worker.claim_requested:
                worker.finish()
                holder = None
                steps.append(RaceStep(0, name, "claim", _claim_outcome(worker)))

    for number, (name, action) in enumerate(schedule, start=1):
        worker = team[name]
        if action == "scan":
            if holder is not None:
                locked = _probe_write_lock(path)
                worker.start()
                waiting.append(name)
                outcome = f"no-wait BEGIN IMMEDIATE -> {locked!r}: {holder}'s transaction"
                outcome += " holds the write lock, so the scan waits"
                steps.append(RaceStep(number, name, action, outcome))
                continue
            worker.start()
            holder = _first_inside([worker])
            steps.append(
                RaceStep(
                    number, name, action, "BEGIN IMMEDIATE: holds the write lock; scans inside it"
                )
            )
            continue
        worker.claim_requested = True
        if holder != name:
            steps.append(
                RaceStep(number, name, action, f"still waiting for {holder}'s transaction")
            )
            continue
        worker.finish()
        holder = None
        steps.append(RaceStep(number, name, action, f"{_claim_outcome(worker)}; COMMIT"))
        hand_over()
    return steps, holder
