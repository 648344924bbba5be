"""Benchmark of the store (feature B3): `python -m agent17.bench [--quick]`.

Three questions, one run, one table:

a) Does claim_next cost the same on a small and a large board? The board is
   all blocked behind one in-progress task, the worst case for a scan, so each
   call finds nothing. Goal: large/small median <= 1.5.
b) How close is a claim+complete cycle to the floor SQLite itself sets? The
   floor is two minimal write transactions with the same pragmas on the same
   file system, because a cycle is two durable commits. Goal: store/floor >= 0.5.
c) Do 8 processes draining one board get errors or double claims? Goal: 0.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, Final, Protocol

from agent17.domain import EventKind
from agent17.store.connection import BUSY_TIMEOUT_SECONDS, apply_pragmas, use_wal
from agent17.store.sqlite import SqliteTaskStore

CLAIM_COST_RATIO_GOAL: Final = 1.5
FLOOR_RATIO_GOAL: Final = 0.5
WAIT_SECONDS: Final = 120.0
_DB_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
# Long enough that no lease runs out during a measurement.
_BENCH_LEASE_SECONDS: Final = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Measurement:
    """One row of the report: a number, its unit, and the goal it is held to (if any)."""

    section: str
    name: str
    value: float
    unit: str
    goal: str = ""
    passed: bool | None = None

    @property
    def verdict(self) -> str:
        """PASS, MISS, or empty for a number without a goal."""
        if self.passed is None:
            return ""
        return "PASS" if self.passed else "MISS"


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Every measurement of one run, in the order taken."""

    rows: tuple[Measurement, ...]

    @property
    def all_passed(self) -> bool:
        """True when no row with a goal missed it."""
        return all(row.passed is not False for row in self.rows)


# -- building boards fast ----------------------------------------------------------


def _bench_id(block: int, number: int) -> str:
    return f"00000000-0000-4000-8000-{block:04d}{number:08d}"


def _bulk_insert_tasks(path: Path, count: int, *, blocked_by_sequence: int | None) -> None:
    """Append `count` pending tasks in one transaction, as create_task would have stored them.

    Raw executemany instead of `count` create_task calls: a 20,000-task board
    then takes well under a second instead of one durable commit per task.
    """
    now = datetime.now(UTC).strftime(_DB_TIME_FORMAT)
    unmet = 0 if blocked_by_sequence is None else 1
    connection = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS)
    try:
        apply_pragmas(connection)
        connection.execute("BEGIN IMMEDIATE")
        (last,) = connection.execute("SELECT coalesce(max(sequence), 0) FROM tasks").fetchone()
        connection.executemany(
            "INSERT INTO tasks (id, subject, description, status, unmet_dependencies)"
            " VALUES (?, ?, '', 'pending', ?)",
            ((_bench_id(9000, last + n), f"task {last + n}", unmet) for n in range(1, count + 1)),
        )
        if blocked_by_sequence is not None:
            connection.execute(
                "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
                " SELECT sequence, ?, 0 FROM tasks WHERE sequence > ?",
                (blocked_by_sequence, last),
            )
        connection.execute(
            "INSERT INTO task_events (at_utc, kind, task_sequence)"
            " SELECT ?, 'created', sequence FROM tasks WHERE sequence > ?",
            (now, last),
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


def build_blocked_board(workspace: Path, size: int) -> SqliteTaskStore:
    """A board of `size` tasks: one in progress, every other one blocked behind it."""
    store = SqliteTaskStore(workspace, lease_seconds=_BENCH_LEASE_SECONDS)
    root = store.create_task("the one task everything waits for")
    store.claim_task(root.id, "bench")
    _bulk_insert_tasks(store.path, size - 1, blocked_by_sequence=1)
    return store


def build_ready_board(workspace: Path, size: int) -> SqliteTaskStore:
    """A board of `size` independent pending tasks."""
    store = SqliteTaskStore(workspace, lease_seconds=_BENCH_LEASE_SECONDS)
    _bulk_insert_tasks(store.path, size, blocked_by_sequence=None)
    return store


# -- a) claim cost against board size ---------------------------------------------------


def _timed_empty_claim(store: SqliteTaskStore) -> int:
    started = time.perf_counter_ns()
    found = store.claim_next("idle")
    elapsed = time.perf_counter_ns() - started
    if found is not None:
        raise AssertionError("the blocked board offered a task")
    return elapsed


def bench_claim_cost(root: Path, small: int, large: int, calls: int) -> list[Measurement]:
    """claim_next per call on a small and a large blocked board, and their ratio."""
    boards = [
        build_blocked_board(root / "small", small),
        build_blocked_board(root / "large", large),
    ]
    samples: list[list[int]] = [[], []]
    try:
        for _ in range(min(calls, 50)):  # warm both page caches first
            for store in boards:
                store.claim_next("idle")
        # Alternate call by call, so drift (CPU clock, a noisy neighbour) hits both alike.
        for _ in range(calls):
            for index, store in enumerate(boards):
                samples[index].append(_timed_empty_claim(store))
    finally:
        for store in boards:
            store.close()
    small_us, large_us = (statistics.median(board) / 1000.0 for board in samples)
    ratio = large_us / small_us
    section = "a) claim_next, blocked board"
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
        ),
    ]


# -- b) claim+complete against the raw transaction floor ----------------------------------


def store_cycles_per_second(workspace: Path, cycles: int) -> float:
    """claim_next + complete_task pairs per second on one store."""
    store = build_ready_board(workspace, cycles)
    try:
        started = time.perf_counter()
        for _ in range(cycles):
            claim = store.claim_next("bench")
            if claim is None:
                raise AssertionError("the board ran dry early")
            store.complete_task(claim.task.id, "bench", claim.claim_token)
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    return cycles / elapsed


def floor_cycles_per_second(workspace: Path, cycles: int) -> float:
    """Pairs of minimal write transactions per second, with the store's pragmas."""
    workspace.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(
        workspace / "floor.sqlite3", isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS
    )
    try:
        # The very pragmas the store uses, from the same functions.
        apply_pragmas(connection)
        use_wal(connection)
        connection.execute("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INT)")
        connection.execute("INSERT OR REPLACE INTO counter VALUES (1, 0)")
        started = time.perf_counter()
        for _ in range(cycles):
            for _ in range(2):  # a claim and a completion: two durable commits
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("UPDATE counter SET n = n + 1 WHERE id = 1")
                connection.execute("COMMIT")
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
    return cycles / elapsed


def bench_transaction_floor(root: Path, cycles: int, rounds: int = 5) -> list[Measurement]:
    """Store cycles/s against the raw floor, in `rounds` interleaved pairs of runs.

    The ratio is the median of the per-pair ratios: fsync time on a shared
    machine drifts a lot, and a pair run back to back sees the same disk.
    """
    store_runs = []
    floor_runs = []
    for round_number in range(rounds):
        store_runs.append(store_cycles_per_second(root / f"store-{round_number}", cycles))
        floor_runs.append(floor_cycles_per_second(root / f"floor-{round_number}", cycles))
    ratio = statistics.median(s / f for s, f in zip(store_runs, floor_runs, strict=True))
    section = "b) claim+complete vs floor"
    return [
        Measurement(
            section, "store: claim_next + complete_task", statistics.median(store_runs), "cyc/s"
        ),
        Measurement(
            section,
            "floor: 2 x (BEGIN IMMEDIATE; UPDATE; COMMIT)",
            statistics.median(floor_runs),
            "cyc/s",
        ),
        Measurement(
            section,
            "ratio store / floor (median of pairs)",
            ratio,
            "x",
            f">= {FLOOR_RATIO_GOAL}",
            ratio >= FLOOR_RATIO_GOAL,
        ),
    ]


# -- c) many processes draining one board -------------------------------------------


class _ResultQueue(Protocol):
    def put(self, obj: Any, block: bool = ..., timeout: float | None = ...) -> None: ...


def _drain_worker(workspace: str, name: str, barrier: Barrier, results: _ResultQueue) -> None:
    """Claim and complete until nothing is left; report (claims, errors)."""
    store = SqliteTaskStore(workspace, lease_seconds=_BENCH_LEASE_SECONDS)
    claims = errors = 0
    barrier.wait(WAIT_SECONDS)
    while errors < 1000:
        try:
            claim = store.claim_next(name)
            if claim is None:
                break  # no dependencies on this board: nothing pending means done
            claims += 1
            store.complete_task(claim.task.id, name, claim.claim_token)
        except Exception:  # counted, not hidden: any error is a MISS in the report
            errors += 1
    store.close()
    results.put((claims, errors))


def bench_process_drain(root: Path, tasks: int, processes: int) -> list[Measurement]:
    """`processes` spawned workers drain a board of `tasks`: claims/s, errors, double claims."""
    store = build_ready_board(root / "drain", tasks)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    workers = [
        context.Process(
            target=_drain_worker,
            args=(str(store.workspace), f"worker-{n}", barrier, results),
        )
        for n in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(WAIT_SECONDS)  # process start-up is not part of the measurement
        started = time.perf_counter()
        reports = [results.get(timeout=WAIT_SECONDS) for _ in workers]
        elapsed = time.perf_counter() - started
        for worker in workers:
            worker.join(WAIT_SECONDS)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()
    claims = sum(claimed for claimed, _ in reports)
    errors = sum(failed for _, failed in reports)
    claimed_events = [e.task_id for e in store.events() if e.kind == EventKind.CLAIMED]
    unfinished = sum(1 for task in store.list_tasks() if task.status != "completed")
    store.close()
    doubles = len(claimed_events) - len(set(claimed_events))
    section = f"c) {processes} processes drain {tasks:,} tasks"
    return [
        Measurement(section, "claims per second", claims / elapsed, "claims/s"),
        Measurement(section, "errors", errors, "", "== 0", errors == 0),
        Measurement(section, "tasks claimed twice", doubles, "", "== 0", doubles == 0),
        Measurement(section, "tasks left unfinished", unfinished, "", "== 0", unfinished == 0),
    ]


# -- the run and its table ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchSizes:
    """How big each part of a run is."""

    small_board: int
    large_board: int
    claim_calls: int
    cycles: int
    drain_tasks: int
    processes: int


FULL: Final = BenchSizes(200, 20_000, 2_000, 600, 3_000, 8)
QUICK: Final = BenchSizes(200, 20_000, 300, 150, 800, 8)


def run_bench(sizes: BenchSizes, root: Path | None = None) -> BenchReport:
    """Run all three parts in a temporary directory (or under `root`)."""
    with tempfile.TemporaryDirectory(prefix="agent17-bench-", dir=root) as folder:
        base = Path(folder)
        rows = [
            *bench_claim_cost(base / "a", sizes.small_board, sizes.large_board, sizes.claim_calls),
            *bench_transaction_floor(base / "b", sizes.cycles),
            *bench_process_drain(base / "c", sizes.drain_tasks, sizes.processes),
        ]
    return BenchReport(tuple(rows))


def _format_value(row: Measurement) -> str:
    if row.unit == "x":
        return f"{row.value:.2f}"
    if row.value >= 100 or float(row.value).is_integer():
        return f"{row.value:,.0f}"
    return f"{row.value:,.1f}"


def format_report(report: BenchReport) -> str:
    """The report as a plain-text table, one section per question."""
    header = ("measurement", "value", "unit", "goal", "")
    lines: list[tuple[str, str, str, str, str]] = []
    sections: list[tuple[str, list[tuple[str, str, str, str, str]]]] = []
    for row in report.rows:
        if not sections or sections[-1][0] != row.section:
            sections.append((row.section, []))
        sections[-1][1].append(
            ("  " + row.name, _format_value(row), row.unit, row.goal, row.verdict)
        )
    for _, rows in sections:
        lines.extend(rows)
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(4)]

    def render(cells: tuple[str, str, str, str, str]) -> str:
        name, value, unit, goal, verdict = cells
        return (
            f"{name:<{widths[0]}}  {value:>{widths[1]}}  {unit:<{widths[2]}}"
            f"  {goal:<{widths[3]}}  {verdict}"
        ).rstrip()

    out = [render(header), "-" * (sum(widths) + 12)]
    for title, rows in sections:
        out.append(title)
        out.extend(render(cells) for cells in rows)
    verdict = "all goals met" if report.all_passed else "some goals missed"
    out.append("-" * (sum(widths) + 12))
    out.append(verdict)
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the benchmark and print the table."""
    parser = argparse.ArgumentParser(prog="python -m agent17.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls, smaller drain")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the temp boards")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    print(
        f"agent17 store benchmark ({'quick' if args.quick else 'full'}),"
        f" SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}",
        flush=True,
    )
    report = run_bench(sizes, args.dir)
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
