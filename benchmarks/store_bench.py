"""Benchmark of the task store, against what its engine itself costs on the same disk.

Run it from the repository root:

    .venv/bin/python benchmarks/store_bench.py [--quick] [--dir DIR] [--compare-with PATH]

It drives boards through the public API only (`from agent17 import SqliteTaskStore`)
and holds every number against a baseline measured in the same run, on the same
file system, so the ratios mean the same on a laptop SSD and on a CI runner.

The baseline, "the floor", is what a store cannot beat: a claim and a completion
are each one durable commit (WAL, synchronous=FULL, one BEGIN IMMEDIATE), so a
claim+complete cycle can be no cheaper than two minimal write transactions

    BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id = 1; COMMIT

on a plain SQLite file with the store's pragmas (journal_mode=WAL, synchronous=FULL,
busy_timeout 30 s, foreign_keys=ON). The gap between the store and the floor is
the store's own work: its statements, its indexes, its Python.

a) One process: claim_next + complete_task cycles per second on a board of ready
   tasks, against floor cycles (two floor transactions), in 20 pairs of batches.
   The two batches of a pair are interleaved cycle by cycle, so both see the same
   disk (fsync latency on a shared machine swings by several times within a
   second), and the ratio is the median of the per-pair ratios store/floor.
   Goal >= 0.8. Also split: claim_next vs complete_task, and CPU time vs wall time.
b) 8 processes (spawned together behind a barrier) drain a layered DAG, against 8
   processes doing the floor's two transactions as many times on one shared file,
   in alternating rounds. Goal: claims/s ratio >= 0.6 (median of the rounds); no
   errors, no task claimed twice (from events()), nothing left unfinished.
c) claim_next on a blocked board (one task in progress, every other task waits for
   it, so each call finds nothing) of 200 and of 200,000 tasks: the claim must be an
   index seek, not a scan. Goal: large/small median per call <= 1.1.
d) What one operation writes: SQL statements (counted with a trace callback) and
   WAL pages (frames) per commit of a claim_next, of a complete_task and of the floor.

`--compare-with PATH` runs the same measurements for another checkout's store
(PATH holds its `agent17` package, e.g. a `git worktree` of an older commit), in a
subprocess with PATH first on sys.path, and prints the two side by side. Part (c)
needs `create_tasks` to build its boards and is skipped for a store without it.

`--postgres [DSN]` runs parts (a), (b) and (c) on PostgresTaskStore as well, in the same
run, against PostgreSQL's own floor (the same two transactions on the same server), on
the server DSN names or on a durable throwaway cluster (store_bench_postgres.py); the
two engines are printed side by side.

Every file is measured in the same state: the floor file beside the board's file,
and each WAL already wrapped once (see WAL_WARMUP_TRANSACTIONS). No number here is
a test: nothing is asserted on time; a missed goal prints MISS.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agent17 import SqliteTaskStore

if TYPE_CHECKING:  # a store compared from an older checkout may not have it
    from agent17.store.board import TaskBoard as TaskStore

# Long enough that no lease runs out (and no release_expired fires) while measuring.
LEASE_SECONDS: Final = 24 * 3600.0
BUSY_TIMEOUT_SECONDS: Final = 30.0  # the store's own busy timeout
WAIT_SECONDS: Final = 120.0  # how long anything here waits for a process before giving up
CREATE_BATCH: Final = 10_000  # tasks per create_tasks call (one transaction each)
MAX_WORKER_ERRORS: Final = 100
SLICE_CYCLES: Final = 1  # a) cycles each side runs before the other side's turn
# Every file is measured with a WAL that has wrapped once (SQLite checkpoints at 1,000
# pages, then writes the WAL again from its start): appending to a fresh WAL costs a
# file-size (metadata) journal commit per fsync that overwriting does not, and a floor
# measured on a fresh file would be slower than a board that has been running a while.
WAL_WARMUP_TRANSACTIONS: Final = 1_200  # floor: one page each
WAL_WARMUP_CYCLES: Final = 300  # store: 3+ pages per commit, 2 commits per cycle

CYCLE_RATIO_GOAL: Final = 0.8
DRAIN_RATIO_GOAL: Final = 0.6
CLAIM_COST_RATIO_GOAL: Final = 1.1

T = TypeVar("T")

FLOOR_TRANSACTION: Final = ("BEGIN IMMEDIATE", "UPDATE t SET v = v + 1 WHERE id = 1", "COMMIT")
# PostgreSQL's floor: the same three statements, on the server the board is on (the
# store sends its own BEGIN too, and waits for each statement's answer, as this does).
PG_FLOOR_TRANSACTION: Final = ("BEGIN", "UPDATE t SET v = v + 1 WHERE id = 1", "COMMIT")

Spec = tuple[str, str]
"""(engine, where): a board or a floor named so that a spawned worker can open it."""


class SqlitePlace:
    """Where one run's SQLite boards go: a folder each, the floor file beside the board's."""

    engine = "SQLite"

    def __init__(self, root: Path) -> None:
        self.root = root

    def board(self, name: str) -> Spec:
        return ("sqlite", str(self.root / name))

    def floor_for(self, board: Spec) -> Spec:
        # Same directory, same file system as the board's file.
        return ("sqlite", str(Path(board[1]) / ".agent_tutorial" / "floor.sqlite3"))

    settle_note = ""

    def settle(self, board: Spec) -> None:
        """Nothing to do: SQLite has no background maintenance to wait for."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each part of a run is."""

    pairs: int  # a) pairs of batches, store and floor
    batch: int  # a) cycles per batch
    drain_tasks: int  # b) tasks on the drained board
    drain_width: int  # b) tasks per layer of the DAG
    processes: int  # b)
    drain_rounds: int  # b) store/floor rounds; the ratio is their median
    small_board: int  # c)
    large_board: int  # c)
    claim_calls: int  # c) timed calls on each board
    write_samples: int  # d) operations sampled for statements and pages


FULL: Final = Sizes(20, 200, 3_000, 300, 8, 5, 200, 200_000, 2_000, 5)
QUICK: Final = Sizes(10, 50, 1_000, 100, 8, 1, 200, 20_000, 400, 3)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One row of the report: a number, its unit, and the goal it is held to (if any)."""

    section: str
    name: str
    value: float | None  # None: not measured for this store
    unit: str = ""
    goal: str = ""
    passed: bool | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        """PASS, MISS, or empty for a number without a goal."""
        if self.passed is None:
            return ""
        return "PASS" if self.passed else "MISS"


@dataclass(slots=True)
class Report:
    """Every measurement of one run for one store, in the order taken."""

    store_module: str
    rows: list[Measurement] = field(default_factory=list)
    sql: dict[str, list[str]] = field(default_factory=dict)  # one sample operation's statements

    @property
    def all_passed(self) -> bool:
        """True when no row with a goal missed it."""
        return all(row.passed is not False for row in self.rows)


def _progress(message: str) -> None:
    sys.stdout.flush()
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- stores and the floor ----------------------------------------------------------------


def open_store(spec: Spec) -> Any:
    """The board `spec` names, with a lease no run outlasts (and the engine's default clock)."""
    engine, where = spec
    if engine == "postgres":
        from agent17 import PostgresTaskStore

        return PostgresTaskStore(where, lease_seconds=LEASE_SECONDS)
    workspace = Path(where)
    workspace.mkdir(parents=True, exist_ok=True)
    return SqliteTaskStore(workspace, lease_seconds=LEASE_SECONDS)


def has_create_tasks(store: TaskStore) -> bool:
    """Whether this store can create a batch in one transaction (older ones cannot)."""
    return callable(getattr(store, "create_tasks", None))


def create_many(store: TaskStore, drafts: Sequence[tuple[str, str, tuple[str, ...]]]) -> list[str]:
    """Create `drafts` and return their ids: create_tasks in batches, else one create_task each."""
    ids: list[str] = []
    if has_create_tasks(store):
        for start in range(0, len(drafts), CREATE_BATCH):
            tasks = store.create_tasks(list(drafts[start : start + CREATE_BATCH]))
            ids.extend(task.id for task in tasks)
    else:
        for subject, description, blocked_by in drafts:
            ids.append(store.create_task(subject, description, blocked_by).id)
    return ids


def build_ready_board(store: TaskStore, count: int) -> None:
    """Add `count` independent pending tasks."""
    create_many(store, [(f"ready {n}", "", ()) for n in range(count)])


def build_layered_board(store: TaskStore, count: int, width: int) -> None:
    """Add `count` tasks in layers of `width`; each task after the first layer waits for two
    tasks of the layer before it, so finishing a layer keeps unblocking the next."""
    previous: list[str] = []
    for start in range(0, count, width):
        layer = min(width, count - start)
        drafts = [
            (
                f"layer {start // width} task {j}",
                "",
                ()
                if not previous
                else tuple(
                    dict.fromkeys(
                        (previous[j % len(previous)], previous[(7 * j + 3) % len(previous)])
                    )
                ),
            )
            for j in range(layer)
        ]
        previous = create_many(store, drafts)


def build_blocked_board(store: TaskStore, size: int) -> None:
    """`size` tasks: one claimed by someone, every other one blocked behind it."""
    root = store.create_task("the one task everything waits for")
    store.claim_task(root.id, "holder")
    create_many(store, [(f"blocked {n}", "", (root.id,)) for n in range(size - 1)])


def open_floor(spec: Spec) -> Any:
    """One counter row: in a plain SQLite file with the store's pragmas, or in the board's
    PostgreSQL database over a connection made as the store makes its own."""
    engine, where = spec
    if engine == "postgres":
        import psycopg

        session = psycopg.connect(where, autocommit=True)
        session.execute("CREATE TABLE IF NOT EXISTS t (id integer PRIMARY KEY, v bigint NOT NULL)")
        session.execute("INSERT INTO t (id, v) VALUES (1, 0) ON CONFLICT DO NOTHING")
        return session
    path = Path(where)
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS)
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    connection.execute("INSERT OR IGNORE INTO t (id, v) VALUES (1, 0)")
    return connection


def floor_transaction(connection: Any) -> None:
    """One minimal durable write transaction."""
    sqlite = isinstance(connection, sqlite3.Connection)
    for statement in FLOOR_TRANSACTION if sqlite else PG_FLOOR_TRANSACTION:
        connection.execute(statement)


def warm_up_store_wal(store: TaskStore) -> None:
    """Claim and complete WAL_WARMUP_CYCLES throwaway tasks (by id: claim_next's order
    is left alone), so that the board's WAL has wrapped at least once."""
    for task_id in create_many(store, [(f"warm-up {n}", "", ()) for n in range(WAL_WARMUP_CYCLES)]):
        claim = store.claim_task(task_id, "warm-up")
        store.complete_task(task_id, "warm-up", claim.claim_token)


def warm_up_floor_wal(connection: sqlite3.Connection) -> None:
    """WAL_WARMUP_TRANSACTIONS floor transactions, so that the floor's WAL has wrapped."""
    for _ in range(WAL_WARMUP_TRANSACTIONS):
        floor_transaction(connection)


def store_connection(store: TaskStore) -> sqlite3.Connection:
    """INSTRUMENTATION ONLY: the store's private connection, to attach a trace callback.

    Nothing is ever executed on it here. (The current store keeps it in
    `_file._connection`, older ones in `_sqlite._db._file._connection`,
    `_db._connection` or `_connection`.)
    """
    holder: Any = store
    for name in ("_sqlite", "_db", "_file"):
        holder = getattr(holder, name, holder)
    connection = holder._connection
    assert isinstance(connection, sqlite3.Connection)
    return connection


# -- a) claim+complete cycles against the floor ------------------------------------------


@dataclass(slots=True)
class _BatchTimes:
    """Seconds one side of a pair spent, summed over its slices."""

    wall: float = 0.0
    cpu: float = 0.0
    claim: float = 0.0
    complete: float = 0.0


def _store_cycles(store: TaskStore, cycles: int, into: _BatchTimes) -> None:
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(cycles):
        started = time.perf_counter()
        claim = store.claim_next("bench")
        claimed = time.perf_counter()
        if claim is None:
            raise RuntimeError("the ready board ran dry: the benchmark built too few tasks")
        store.complete_task(claim.task.id, "bench", claim.claim_token)
        into.claim += claimed - started
        into.complete += time.perf_counter() - claimed
    into.wall += time.perf_counter() - wall_start
    into.cpu += time.process_time() - cpu_start


def _floor_cycles(connection: sqlite3.Connection, cycles: int, into: _BatchTimes) -> None:
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(cycles):
        floor_transaction(connection)  # the claim's commit
        floor_transaction(connection)  # the completion's commit
    into.wall += time.perf_counter() - wall_start
    into.cpu += time.process_time() - cpu_start


def bench_cycles(place: Any, sizes: Sizes) -> list[Measurement]:
    """claim_next + complete_task per second against floor cycles, in pairs of batches.

    The two batches of a pair run interleaved, in slices of SLICE_CYCLES cycles that
    alternate store, floor, store, ..., so that both see the same disk: fsync latency
    on a shared machine swings by several times within a second (another process's
    writes, the host), and two batches run back to back do not see the same swings.
    """
    warmup = 10  # cycles that run the code paths once before anything is timed
    board = place.board("a-board")
    store = open_store(board)
    floor = open_floor(place.floor_for(board))
    try:
        _progress(f"a) building a board of {sizes.pairs * sizes.batch + warmup:,} ready tasks")
        build_ready_board(store, sizes.pairs * sizes.batch + warmup)
        warm_up_store_wal(store)
        warm_up_floor_wal(floor)
        _store_cycles(store, warmup, _BatchTimes())
        _floor_cycles(floor, warmup, _BatchTimes())
        _progress(f"a) {sizes.pairs} pairs of {sizes.batch}-cycle batches, store and floor")
        pairs: list[tuple[_BatchTimes, _BatchTimes]] = []
        for number in range(sizes.pairs):
            in_store, on_floor = _BatchTimes(), _BatchTimes()
            for done in range(0, sizes.batch, SLICE_CYCLES):
                cycles = min(SLICE_CYCLES, sizes.batch - done)
                # Alternate which side goes first, so neither always follows the other.
                if (number + done // SLICE_CYCLES) % 2 == 0:
                    _store_cycles(store, cycles, in_store)
                    _floor_cycles(floor, cycles, on_floor)
                else:
                    _floor_cycles(floor, cycles, on_floor)
                    _store_cycles(store, cycles, in_store)
            pairs.append((in_store, on_floor))
    finally:
        store.close()
        floor.close()
    n = sizes.batch
    ratios = [f.wall / s.wall for s, f in pairs]  # (n / s.wall) / (n / f.wall)
    # The goal is held to the whole run: every checkpoint either side paid is in it.
    # (A median of pairs would drop the few pairs in which a checkpoint landed.)
    ratio = sum(f.wall for _, f in pairs) / sum(s.wall for s, _ in pairs)
    section = f"a) claim_next + complete_task vs floor, 1 process, {sizes.pairs} x {n} cycles"

    def per_cycle_us(seconds: Callable[[tuple[_BatchTimes, _BatchTimes]], float]) -> float:
        return statistics.median(seconds(pair) for pair in pairs) / n * 1e6

    store_us = per_cycle_us(lambda pair: pair[0].wall)
    floor_us = per_cycle_us(lambda pair: pair[1].wall)
    return [
        Measurement(section, "store cycles per second", 1e6 / store_us, "cyc/s"),
        Measurement(section, "floor cycles per second (2 transactions)", 1e6 / floor_us, "cyc/s"),
        Measurement(section, "store: per cycle", store_us, "µs"),
        Measurement(section, "  claim_next", per_cycle_us(lambda pair: pair[0].claim), "µs"),
        Measurement(section, "  complete_task", per_cycle_us(lambda pair: pair[0].complete), "µs"),
        Measurement(
            section, "  store CPU time (user+sys)", per_cycle_us(lambda pair: pair[0].cpu), "µs"
        ),
        Measurement(section, "floor: per cycle", floor_us, "µs"),
        Measurement(
            section, "  floor CPU time (user+sys)", per_cycle_us(lambda pair: pair[1].cpu), "µs"
        ),
        Measurement(
            section,
            "ratio store / floor (whole run)",
            ratio,
            "x",
            f">= {CYCLE_RATIO_GOAL}",
            ratio >= CYCLE_RATIO_GOAL,
            f"median of pairs {statistics.median(ratios):.2f},"
            f" pairs ranged {min(ratios):.2f} .. {max(ratios):.2f}",
        ),
    ]


# -- b) processes draining one board, against processes on one floor file -----------------


WorkerReport = tuple[int, int, int, str]  # (claims or cycles, empty polls, errors, first error)


def drain_worker(
    board: Spec,
    owner: str,
    total: int,
    completed: Synchronized[int],
    barrier: Barrier,
    results: Any,
) -> None:
    """Claim and complete until all `total` tasks are done; report what happened.

    claim_next finds nothing while the next layer waits for tasks others still hold,
    so an empty claim only ends the loop once the shared count says the board is done.
    """
    store = open_store(board)
    claims = idle = errors = 0
    first_error = ""
    barrier.wait(WAIT_SECONDS)
    deadline = time.monotonic() + WAIT_SECONDS
    while errors < MAX_WORKER_ERRORS and time.monotonic() < deadline:
        try:
            claim = store.claim_next(owner)
            if claim is None:
                if completed.value >= total:
                    break
                idle += 1
                time.sleep(0.001)
                continue
            claims += 1
            store.complete_task(claim.task.id, owner, claim.claim_token)
            with completed.get_lock():
                completed.value += 1
        except Exception as error:  # counted, not hidden: any error is a MISS in the report
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {error}"
    report: WorkerReport = (claims, idle, errors, first_error)
    results.put(report)  # before close: the last close checkpoints the WAL, not timed here
    store.close()


def floor_worker(floor: Spec, cycles: int, barrier: Barrier, results: Any) -> None:
    """The floor's two transactions, `cycles` times, on the shared floor."""
    connection = open_floor(floor)
    errors = 0
    first_error = ""
    barrier.wait(WAIT_SECONDS)
    for _ in range(cycles):
        try:
            floor_transaction(connection)
            floor_transaction(connection)
        except Exception as error:  # counted, as in drain_worker
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {error}"
    report: WorkerReport = (cycles, 0, errors, first_error)
    results.put(report)  # before close, as in drain_worker
    connection.close()


def _run_processes(
    context: Any, target: Callable[..., None], argument_lists: Sequence[tuple[Any, ...]]
) -> tuple[float, list[WorkerReport]]:
    """One spawned process per argument list, released together by a barrier.

    Returns the wall time from the barrier to the last report, and the reports.
    (`barrier` and `results` are appended to each argument list.)
    """
    barrier = context.Barrier(len(argument_lists) + 1)
    results = context.Queue()
    workers = [
        context.Process(target=target, args=(*arguments, barrier, results))
        for arguments in argument_lists
    ]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(WAIT_SECONDS)  # process start-up is not part of the measurement
        started = time.perf_counter()
        reports: list[WorkerReport] = [results.get(timeout=WAIT_SECONDS) for _ in workers]
        elapsed = time.perf_counter() - started
        for worker in workers:
            worker.join(WAIT_SECONDS)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()
    return elapsed, reports


@dataclass(slots=True)
class _DrainTally:
    store_rates: list[float] = field(default_factory=list)
    floor_rates: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    doubles: int = 0
    unfinished: int = 0
    mismatches: int = 0
    idle: int = 0

    def add_errors(self, reports: list[WorkerReport]) -> None:
        self.errors += sum(report[2] for report in reports)
        self.first_error = self.first_error or next((r[3] for r in reports if r[3]), "")


def _drain_store_round(context: Any, board: Spec, sizes: Sizes, tally: _DrainTally) -> None:
    store = open_store(board)
    build_layered_board(store, sizes.drain_tasks, sizes.drain_width)
    warm_up_store_wal(store)
    store.close()
    completed = context.Value("i", 0)
    elapsed, reports = _run_processes(
        context,
        drain_worker,
        [(board, f"worker-{n}", sizes.drain_tasks, completed) for n in range(sizes.processes)],
    )
    claims = sum(report[0] for report in reports)
    tally.store_rates.append(claims / elapsed)
    tally.idle += sum(report[1] for report in reports)
    tally.add_errors(reports)
    store = open_store(board)
    try:
        claimed = Counter(e.task_id for e in store.events() if e.kind.value == "claimed")
        tally.doubles += sum(1 for count in claimed.values() if count > 1)
        tally.unfinished += sum(1 for task in store.list_tasks() if task.status != "completed")
        tokens = store.issued_claim_tokens()[WAL_WARMUP_CYCLES:]
    finally:
        store.close()
    events = sum(claimed.values()) - WAL_WARMUP_CYCLES  # the warm-up's claims are ours
    tally.mismatches += abs(claims - events) + abs(events - len(tokens))
    tally.mismatches += len(tokens) - len(set(tokens))


def _drain_floor_round(context: Any, floor: Spec, sizes: Sizes, tally: _DrainTally) -> None:
    connection = open_floor(floor)  # create the floor and its row before anyone races for it
    warm_up_floor_wal(connection)
    connection.close()
    cycles = math.ceil(sizes.drain_tasks / sizes.processes)
    elapsed, reports = _run_processes(
        context, floor_worker, [(floor, cycles) for _ in range(sizes.processes)]
    )
    tally.floor_rates.append(sum(report[0] for report in reports) / elapsed)
    tally.add_errors(reports)


def bench_drain(place: Any, sizes: Sizes) -> list[Measurement]:
    """`processes` spawned workers drain a layered board, against as many on one floor file."""
    context = multiprocessing.get_context("spawn")
    tally = _DrainTally()
    for number in range(sizes.drain_rounds):
        board = place.board(f"b-round-{number}")
        floor = place.floor_for(board)
        _progress(
            f"b) round {number + 1}/{sizes.drain_rounds}: {sizes.processes} processes,"
            f" {sizes.drain_tasks:,} tasks, store and floor"
        )
        if number % 2 == 0:
            _drain_store_round(context, board, sizes, tally)
            _drain_floor_round(context, floor, sizes, tally)
        else:
            _drain_floor_round(context, floor, sizes, tally)
            _drain_store_round(context, board, sizes, tally)
    ratios = [s / f for s, f in zip(tally.store_rates, tally.floor_rates, strict=True)]
    ratio = statistics.median(ratios)
    layers = math.ceil(sizes.drain_tasks / sizes.drain_width)
    section = (
        f"b) {sizes.processes} processes drain {sizes.drain_tasks:,} tasks"
        f" ({layers} layers, 2 deps each), {sizes.drain_rounds} round(s)"
    )
    return [
        Measurement(
            section, "store claims per second", statistics.median(tally.store_rates), "claims/s"
        ),
        Measurement(
            section,
            "floor cycles per second (2 transactions)",
            statistics.median(tally.floor_rates),
            "cyc/s",
        ),
        Measurement(
            section,
            "ratio store / floor (median of rounds)",
            ratio,
            "x",
            f">= {DRAIN_RATIO_GOAL}",
            ratio >= DRAIN_RATIO_GOAL,
            "rounds: " + ", ".join(f"{r:.2f}" for r in ratios) if len(ratios) > 1 else "",
        ),
        Measurement(
            section,
            "errors",
            tally.errors,
            "",
            "== 0",
            tally.errors == 0,
            f"first: {tally.first_error}" if tally.first_error else "",
        ),
        Measurement(section, "tasks claimed twice", tally.doubles, "", "== 0", tally.doubles == 0),
        Measurement(
            section, "tasks left unfinished", tally.unfinished, "", "== 0", tally.unfinished == 0
        ),
        Measurement(
            section,
            "claims: workers vs events vs tokens, off by",
            tally.mismatches,
            "",
            "== 0",
            tally.mismatches == 0,
        ),
        Measurement(section, "empty polls (waiting for a layer)", tally.idle, "calls"),
    ]


# -- c) claim_next on a blocked board, small against large ---------------------------------


def _timed_empty_claim(store: TaskStore) -> float:
    started = time.perf_counter()
    found = store.claim_next("idle")
    elapsed = time.perf_counter() - started
    if found is not None:
        raise RuntimeError("the blocked board offered a task: the benchmark's board is wrong")
    return elapsed


def bench_claim_cost(place: Any, sizes: Sizes) -> list[Measurement]:
    """Median claim_next per call on a small and a large blocked board, and their ratio."""
    small, large = sizes.small_board, sizes.large_board
    section = f"c) claim_next finding nothing, blocked board of {small:,} vs {large:,} tasks"
    specs = [place.board("c-small"), place.board("c-large")]
    boards = [open_store(spec) for spec in specs]
    try:
        if not has_create_tasks(boards[0]):
            return [
                Measurement(
                    section,
                    f"ratio {large:,} / {small:,}",
                    None,
                    note="skipped: this store has no create_tasks to build the boards with",
                )
            ]
        for store, spec, size in zip(boards, specs, (small, large), strict=True):
            _progress(f"c) building a blocked board of {size:,} tasks")
            build_blocked_board(store, size)
            place.settle(spec)
        _progress(f"c) {sizes.claim_calls:,} empty claims on each board, call by call")
        for _ in range(50):  # warm both page caches first
            for store in boards:
                _timed_empty_claim(store)
        samples: list[list[float]] = [[], []]
        # Alternate call by call, so drift (CPU clock, a noisy neighbour) hits both alike.
        for _ in range(sizes.claim_calls):
            for index, store in enumerate(boards):
                samples[index].append(_timed_empty_claim(store))
    finally:
        for store in boards:
            store.close()
    small_us, large_us = (statistics.median(board) * 1e6 for board in samples)
    ratio = large_us / small_us
    return [
        Measurement(section, f"median per call, {small:,} tasks", small_us, "µs"),
        Measurement(section, f"median per call, {large:,} tasks", large_us, "µs"),
        Measurement(
            section,
            f"ratio {large:,} / {small:,}",
            ratio,
            "x",
            f"<= {CLAIM_COST_RATIO_GOAL}",
            ratio <= CLAIM_COST_RATIO_GOAL,
            place.settle_note,
        ),
    ]


# -- d) statements and WAL pages per operation ---------------------------------------------


def _wal_frames(checkpointer: sqlite3.Connection, operation: Callable[[], T]) -> tuple[T, int]:
    """`operation`'s result, and the WAL frames (pages) its one commit wrote.

    A PASSIVE checkpoint copies the whole WAL into the database (no reader holds it),
    so the operation's commit starts the WAL over; after it, PASSIVE reports how many
    frames the WAL holds (its second column). Not TRUNCATE: a store stops writing when
    another program starts its WAL over (README, "Copying, backing up and restoring").
    """
    _, frames, copied = checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if frames != copied:
        raise RuntimeError("could not copy the WAL back: a reader is holding it")
    result = operation()
    _, frames, _ = checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return result, int(frames)


def _statement_kind(sql: str) -> str:
    words = sql.split()
    if not words:
        return "?"
    if words[0] == "--":  # how the trace reports a trigger program
        return "TRIGGER"
    first = words[0].upper()
    if first in {"BEGIN", "ROLLBACK"} and len(words) > 1 and words[1].upper() != "TRANSACTION":
        return f"{first} {words[1].upper()}"
    return first


def _breakdown(statements: list[str]) -> str:
    counts = Counter(_statement_kind(sql) for sql in statements)
    return ", ".join(f"{kind} {count}" for kind, count in counts.items())


@dataclass(slots=True)
class _Sampled:
    statements: list[int] = field(default_factory=list)
    frames: list[int] = field(default_factory=list)
    last: list[str] = field(default_factory=list)


def _sample(
    checkpointer: sqlite3.Connection,
    trace: list[str],
    operation: Callable[[], T],
    into: _Sampled,
) -> T:
    trace.clear()
    result, frames = _wal_frames(checkpointer, operation)
    # SQLite reports a trigger program that a statement runs with that statement's own
    # text again; count the statement the store sent once (the triggers' work shows in
    # its time and its pages, not as statements of its own).
    sent = [text for n, text in enumerate(trace) if n == 0 or trace[n - 1] != text]
    into.frames.append(frames)
    into.statements.append(len(sent))
    into.last = sent
    return result


def bench_writes(root: Path, sizes: Sizes) -> tuple[list[Measurement], dict[str, list[str]]]:
    """Statements and WAL pages of one claim_next, one complete_task, one floor transaction."""
    store = open_store(("sqlite", str(root / "board")))
    build_ready_board(store, 1_000)
    floor_path = store.path.parent / "floor.sqlite3"
    floor = open_floor(("sqlite", str(floor_path)))
    store_checkpointer = sqlite3.connect(store.path, isolation_level=None, timeout=30.0)
    floor_checkpointer = sqlite3.connect(floor_path, isolation_level=None, timeout=30.0)
    (page_size,) = store_checkpointer.execute("PRAGMA page_size").fetchone()
    claims, completions, floors = _Sampled(), _Sampled(), _Sampled()
    trace: list[str] = []
    # INSTRUMENTATION ONLY: a trace callback on the store's private connection records
    # the text of every statement SQLite runs for it. It executes and writes nothing.
    traced = store_connection(store)
    traced.set_trace_callback(trace.append)
    floor.set_trace_callback(trace.append)
    try:
        _progress(f"d) {sizes.write_samples} sampled claims, completions, floor transactions")
        for _ in range(sizes.write_samples):
            claim = _sample(store_checkpointer, trace, partial(store.claim_next, "b"), claims)
            if claim is None:
                raise RuntimeError("the ready board offered nothing")
            # A board of independent tasks: the completed task has no dependents.
            _sample(
                store_checkpointer,
                trace,
                partial(store.complete_task, claim.task.id, "b", claim.claim_token),
                completions,
            )
            _sample(floor_checkpointer, trace, partial(floor_transaction, floor), floors)
    finally:
        traced.set_trace_callback(None)
        floor.set_trace_callback(None)
        store_checkpointer.close()
        floor_checkpointer.close()
        floor.close()
        store.close()

    def median(values: list[int]) -> float:
        return float(statistics.median(values))

    def spread(values: list[int]) -> str:
        low, high = min(values), max(values)
        return "" if low == high else f"samples ranged {low} .. {high}"

    cycle_pages = median(claims.frames) + median(completions.frames)
    section = f"d) one operation's statements and WAL pages ({page_size:,}-byte pages)"
    rows = [
        Measurement(
            section,
            "statements per claim_next",
            median(claims.statements),
            "stmts",
            note=_breakdown(claims.last),
        ),
        Measurement(
            section,
            "statements per complete_task (no dependents)",
            median(completions.statements),
            "stmts",
            note=_breakdown(completions.last),
        ),
        Measurement(
            section,
            "statements per floor transaction",
            median(floors.statements),
            "stmts",
            note=_breakdown(floors.last),
        ),
        Measurement(
            section,
            "WAL pages per claim_next commit",
            median(claims.frames),
            "pages",
            note=spread(claims.frames),
        ),
        Measurement(
            section,
            "WAL pages per complete_task commit",
            median(completions.frames),
            "pages",
            note=spread(completions.frames),
        ),
        Measurement(
            section,
            "WAL pages per floor commit",
            median(floors.frames),
            "pages",
            note=spread(floors.frames),
        ),
        Measurement(
            section,
            "WAL pages per cycle, store / floor",
            cycle_pages / (2 * median(floors.frames)),
            "x",
        ),
    ]
    sql = {
        "claim_next": claims.last,
        "complete_task": completions.last,
        "floor transaction": floors.last,
    }
    return rows, sql


# -- the run, and its table ------------------------------------------------------------------


def run_all(sizes: Sizes, directory: Path | None) -> Report:
    """Every part, in a fresh temporary directory (under `directory` if given)."""
    import agent17

    report = Report(store_module=str(Path(agent17.__file__).resolve().parent))
    with tempfile.TemporaryDirectory(prefix="agent17-bench-", dir=directory) as folder:
        base = Path(folder)
        run_parts(report, SqlitePlace(base), sizes)
        rows, report.sql = bench_writes(base / "d", sizes)
        report.rows.extend(rows)
    check_keys(report)
    return report


def run_parts(report: Report, place: Any, sizes: Sizes) -> None:
    """Parts a), b) and c), the ones every engine runs, on boards made by `place`."""
    report.rows.extend(bench_cycles(place, sizes))
    report.rows.extend(bench_drain(place, sizes))
    report.rows.extend(bench_claim_cost(place, sizes))


def check_keys(report: Report) -> None:
    names = [(row.section, row.name) for row in report.rows]
    if len(set(names)) != len(names):  # the table is keyed by them
        raise RuntimeError("two rows of the report share a section and a name")


def run_postgres(sizes: Sizes, dsn: str) -> Report:
    """Parts a), b) and c) on PostgresTaskStore, on `dsn`'s server or a throwaway cluster."""
    import store_bench_postgres

    report = Report(store_module="agent17.store.postgres")
    with store_bench_postgres.place(dsn or None) as place:
        version = store_bench_postgres.server_version(place)
        _progress(f"PostgreSQL {version}: the same parts a), b), c) on PostgresTaskStore")
        run_parts(report, place, sizes)
    report.store_module += f" (PostgreSQL {version})"
    check_keys(report)
    return report


def _report_to_json(report: Report) -> str:
    return json.dumps(
        {
            "store_module": report.store_module,
            "rows": [asdict(row) for row in report.rows],
            "sql": report.sql,
        }
    )


def _report_from_json(text: str) -> Report:
    data = json.loads(text)
    rows = [Measurement(**row) for row in data["rows"]]
    return Report(data["store_module"], rows, data["sql"])


def package_root(path: Path) -> Path:
    """The directory to put first on sys.path so that `import agent17` finds PATH's package."""
    path = path.resolve()
    if (path / "agent17" / "__init__.py").is_file():
        return path
    if path.name == "agent17" and (path / "__init__.py").is_file():
        return path.parent
    raise SystemExit(f"--compare-with: no agent17 package in {path}")


def run_compared(path: Path, *, quick: bool, directory: Path | None) -> Report:
    """The same run for the store importable from `path`, in a subprocess."""
    root = package_root(path)
    environment = dict(os.environ)
    inherited = environment.get("PYTHONPATH")
    # PYTHONPATH comes before site-packages (and the editable install's finder), and
    # spawned children inherit it, so every process of that run imports PATH's agent17.
    environment["PYTHONPATH"] = str(root) + (os.pathsep + inherited if inherited else "")
    with tempfile.TemporaryDirectory(prefix="agent17-bench-compare-") as folder:
        output = Path(folder) / "report.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--emit-json", str(output)]
        command += ["--quick"] if quick else []
        command += ["--dir", str(directory)] if directory is not None else []
        subprocess.run(command, env=environment, check=True)
        report = _report_from_json(output.read_text(encoding="utf-8"))
    if not Path(report.store_module).is_relative_to(root):
        raise SystemExit(
            f"--compare-with: the subprocess imported agent17 from {report.store_module},"
            f" not from {root}"
        )
    return report


def _format_value(row: Measurement | None) -> str:
    if row is None or row.value is None:
        return "n/a"
    value = row.value
    if row.unit == "x":
        return f"{value:.2f}"
    if row.unit == "µs":
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    if float(value).is_integer() or value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def format_table(reports: Sequence[Report], labels: Sequence[str]) -> str:
    """Sections of rows; one value column (and verdict) per report; notes indented below."""
    keys: list[tuple[str, str]] = []
    for report in reports:
        keys.extend(k for k in ((r.section, r.name) for r in report.rows) if k not in keys)
    by_key = [{(r.section, r.name): r for r in report.rows} for report in reports]
    table: list[tuple[str, list[str]] | str] = []
    header = ["measurement"]
    for label in labels:
        header += [label, ""]
    header += ["unit", "goal"]
    section = None
    notes: list[tuple[int, list[tuple[str, str]]]] = []
    for key in keys:
        if key[0] != section:
            section = key[0]
            table.append(section)
        rows = [rows_of.get(key) for rows_of in by_key]
        first = next(row for row in rows if row is not None)
        cells = ["  " + key[1]]
        for row in rows:
            cells += [_format_value(row), "" if row is None else row.verdict]
        cells += [first.unit, first.goal]
        table.append((key[1], cells))
        row_notes = [
            (label, row.note)
            for label, row in zip(labels, rows, strict=True)
            if row is not None and row.note
        ]
        if len(row_notes) == len(reports) and len({note for _, note in row_notes}) == 1:
            row_notes = row_notes[:1]  # the same for every store: say it once
        elif len(reports) > 1:
            row_notes = [(label, f"[{label}] {note}") for label, note in row_notes]
        if row_notes:
            notes.append((len(table) - 1, row_notes))
    widths = [
        max(len(entry[1][i]) for entry in [("", header), *table] if not isinstance(entry, str))
        for i in range(len(header))
    ]
    right_aligned = {1 + 2 * n for n in range(len(reports))}

    def render(cells: list[str]) -> str:
        parts = [
            f"{cell:>{widths[i]}}" if i in right_aligned else f"{cell:<{widths[i]}}"
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    rule = "-" * len(render(["x" * w for w in widths]))
    lines = [render(header), rule]
    note_at = dict(notes)
    for index, entry in enumerate(table):
        if isinstance(entry, str):
            lines.append(entry)
            continue
        lines.append(render(entry[1]))
        lines.extend(f"      {note}" for _, note in note_at.get(index, []))
    lines.append(rule)
    return "\n".join(lines)


def _format_sql(reports: Sequence[Report], labels: Sequence[str]) -> str:
    lines = []
    for label, report in zip(labels, reports, strict=True):
        for operation, statements in report.sql.items():
            lines.append(f"{label}: the statements of one {operation}")
            lines.extend(f"  {' '.join(sql.split())[:110]}" for sql in statements)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the benchmark and print the table."""
    parser = argparse.ArgumentParser(
        prog="store_bench.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smaller boards, fewer calls")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the temporary boards")
    parser.add_argument(
        "--compare-with",
        type=Path,
        default=None,
        metavar="PATH",
        help="also measure the store importable from PATH (a checkout holding agent17/)",
    )
    parser.add_argument(
        "--postgres",
        nargs="?",
        const="",
        default=None,
        metavar="DSN",
        help="also run a), b) and c) on PostgresTaskStore, side by side: on the server DSN"
        " names, or on a throwaway cluster started for the run (store_bench_postgres.py)",
    )
    parser.add_argument(
        "--show-sql", action="store_true", help="print the statements of one sampled operation"
    )
    parser.add_argument("--emit-json", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.dir is not None:
        args.dir = args.dir.resolve()
        args.dir.mkdir(parents=True, exist_ok=True)

    if args.emit_json is not None:  # the subprocess of --compare-with
        report = run_all(sizes, args.dir)
        args.emit_json.write_text(_report_to_json(report), encoding="utf-8")
        return 0

    print(
        f"agent17 store benchmark ({'quick' if args.quick else 'full'}):"
        f" SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs",
        flush=True,
    )
    print(f"boards and floors in: {args.dir or tempfile.gettempdir()}", flush=True)
    started = time.perf_counter()
    reports = [run_all(sizes, args.dir)]
    labels = ["this tree"]
    if args.postgres is not None:
        reports.append(run_postgres(sizes, args.postgres))
        labels = ["SQLite", "PostgreSQL"]
    if args.compare_with is not None:
        _progress(f"the same run for the store in {args.compare_with}, in a subprocess")
        reports.append(run_compared(args.compare_with, quick=args.quick, directory=args.dir))
        labels.append(args.compare_with.resolve().name or "compared")
    for label, report in zip(labels, reports, strict=True):
        print(f"{label}: agent17 from {report.store_module}")
    print(format_table(reports, labels))
    if args.show_sql:
        print(_format_sql(reports, labels))
    if args.compare_with is not None:
        missed = sum(1 for row in reports[-1].rows if row.passed is False)
        print(f"(the compared store missed {missed} goal(s); the verdict below is this tree's)")
    print(f"ran for {time.perf_counter() - started:.0f} s")
    print("all goals met" if reports[0].all_passed else "some goals missed")
    return 0


def _main_by_name() -> int:
    """Run through this file imported as the module `store_bench`, not as `__main__`.

    Spawned children unpickle the worker functions by module name; `store_bench`
    resolves in every child because spawn hands them the parent's sys.path, which
    holds this directory. (`__main__` would mean a different module in the child.)
    """
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import store_bench

    return store_bench.main()


if __name__ == "__main__":
    sys.exit(_main_by_name())
