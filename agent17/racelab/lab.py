"""The race lab: the same interleaving of two workers on a naive JSON board and on SQLite.

Both boards start the same way: A and B completed, C blocked by both and now
ready. Two workers each take two steps, `scan` then `claim`, and a schedule
fixes who moves when (by default: alice scans, bob scans, alice claims, bob
claims). Nothing depends on timing:

- On the JSON board each worker is a generator paused between its steps, so
  the schedule is followed exactly. Both scans see C free, both claims write,
  and both workers believe they own C.
- On SQLite a worker's `scan` opens its claim transaction (BEGIN IMMEDIATE
  takes the write lock; the scan runs inside it) and pauses there, held by an
  injected clock that waits for the worker's `claim` step. A second worker's
  scan cannot start while the first holds the lock: the lab proves that with a
  probe that fails with "database is locked" instead of waiting. The second
  worker then scans after the first committed, finds C taken, and gets None.

`run_process_race` is the same question asked of real OS processes.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import EventKind, Task, TaskClaim, TaskError
from agent17.racelab.json_board import NaiveJsonTaskBoard
from agent17.store.sqlite import SqliteTaskStore

Action = Literal["scan", "claim"]
Step = tuple[str, Action]

DEFAULT_SCHEDULE: Final[tuple[Step, ...]] = (
    ("alice", "scan"),
    ("bob", "scan"),
    ("alice", "claim"),
    ("bob", "claim"),
)
"""The interleaving of the chapter: both scan before either writes."""

GATE_TIMEOUT_SECONDS: Final = 30.0
"""A safety net only: no step waits on time to be ordered, but nothing may hang forever."""


@dataclass(frozen=True, slots=True)
class RaceStep:
    """One line of a race: who did what (number 0 marks a consequence, not a scheduled step)."""

    number: int
    worker: str
    action: str
    outcome: str

    def __str__(self) -> str:
        number = f"{self.number}." if self.number else "  ->"
        return f"{number:<4} {self.worker:<6} {self.action:<6} {self.outcome}"


@dataclass(frozen=True, slots=True)
class RaceResult:
    """What a race did: its steps, who believes they own the contested task, who the board says."""

    board: str
    contested: str
    steps: tuple[RaceStep, ...]
    believers: tuple[str, ...]
    recorded_owner: str | None
    claims_committed: int
    notes: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = ()

    @property
    def double_claim(self) -> bool:
        """True when more than one worker believes it owns the contested task."""
        return len(self.believers) > 1

    def __str__(self) -> str:
        lines = [f"race on the {self.board}", *(str(step) for step in self.steps)]
        believers = ", ".join(self.believers) or "nobody"
        lines += [
            f"the board says {self.contested} is owned by: {self.recorded_owner or 'nobody'}",
            f"workers who believe they own {self.contested}: {believers}",
            f"claims of {self.contested} that committed: {self.claims_committed}",
            f"double claim: {'YES' if self.double_claim else 'no'}",
            *self.notes,
        ]
        return "\n".join(lines)


def _check_schedule(schedule: Sequence[Step]) -> list[str]:
    workers: list[str] = []
    seen: dict[str, list[str]] = {}
    for worker, action in schedule:
        if action not in ("scan", "claim"):
            raise ValueError(f"unknown action {action!r}: use 'scan' or 'claim'")
        if worker not in workers:
            workers.append(worker)
        seen.setdefault(worker, []).append(action)
    for worker, actions in seen.items():
        if actions != ["scan", "claim"]:
            raise ValueError(f"{worker} must scan once and then claim once, got {actions}")
    return workers


@contextmanager
def _workspace(workspace: str | Path | None) -> Iterator[Path]:
    if workspace is not None:
        yield Path(workspace)
        return
    with tempfile.TemporaryDirectory(prefix="agent17-race-") as folder:
        yield Path(folder)


# -- the naive JSON board ---------------------------------------------------------------


def run_json_race(
    schedule: Sequence[Step] = DEFAULT_SCHEDULE, *, workspace: str | Path | None = None
) -> RaceResult:
    """Run the schedule on the naive JSON board (one file per task, scan then claim)."""
    workers = _check_schedule(schedule)
    with _workspace(workspace) as folder:
        board = NaiveJsonTaskBoard(folder / "json-board", new_task_id=uuid_sequence(17))
        a = board.create_task("A")
        b = board.create_task("B")
        board.complete(a.id, workers[0])
        board.complete(b.id, workers[-1])
        c = board.create_task("C", blocked_by=(a.id, b.id))
        beliefs: dict[str, str] = {}

        def worker(name: str) -> Generator[str, None, None]:
            ready = board.scan_unclaimed()
            if not ready:
                yield "sees nothing ready"
                return
            target = ready[0]
            yield f"sees {', '.join(task.subject for task in ready)} ready; picks {target.subject}"
            board.claim(target.id, name)
            beliefs[name] = target.subject
            now_says = _file_says(board, target.id)
            yield f"writes owner={name}; {target.subject}'s file now says {now_says}"

        running = {name: worker(name) for name in workers}
        steps = []
        for number, (name, action) in enumerate(schedule, start=1):
            outcome = next(running[name], "(nothing left to do)")
            steps.append(RaceStep(number, name, action, outcome))
        final = board.read(c.id)
        believers = tuple(name for name in workers if beliefs.get(name) == c.subject)
        writes = sum(1 for step in steps if step.action == "claim" and "writes" in step.outcome)
        return RaceResult(
            board="naive JSON board",
            contested=c.subject,
            steps=tuple(steps),
            believers=believers,
            recorded_owner=final.owner,
            claims_committed=writes,
            notes=(
                f"{c.subject}'s file on disk says {_file_says(board, c.id)}",
                *(
                    ["the last write won silently; every believer will now do the work"]
                    if len(believers) > 1
                    else []
                ),
            ),
        )


def _file_says(board: NaiveJsonTaskBoard, task_id: str) -> str:
    task = board.read(task_id)
    return f"status={task.status} owner={task.owner}"


# -- the SQLite store -----------------------------------------------------------------


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
    results: list[str] = field(default_factory=list)

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
    workers = _check_schedule(schedule)
    clock = ManualClock()
    tokens = uuid_sequence(71)
    with _workspace(workspace) as folder:
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


def race_both(schedule: Sequence[Step] = DEFAULT_SCHEDULE) -> tuple[RaceResult, RaceResult]:
    """The same schedule on both boards: (JSON result, SQLite result)."""
    return run_json_race(schedule), run_sqlite_race(schedule)


# -- real processes ----------------------------------------------------------------


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
