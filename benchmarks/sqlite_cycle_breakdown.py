"""Where one claim_next + complete_task cycle of the SQLite store spends its time.

Run it from the repository root:

    .venv/bin/python benchmarks/sqlite_cycle_breakdown.py [--cycles N] [--synchronous NORMAL]

It measures, on one board of ready tasks in a temporary workspace:

1. the cycle against the floor (two minimal write transactions, as in
   store_bench.py) at the chosen `synchronous` level. At NORMAL a commit does
   not wait for fsync, so what is left is the store's own work. Beside them,
   the ceiling: the store's own statements, verbatim (its BEGIN IMMEDIATE,
   release of run-out leases, claim, completion, release of dependents,
   COMMIT), sent straight to a second board file by a loop with no agent17
   Python around them. No store built on this schema can beat it, so it
   says how much of the gap is the schema's work (its indexes, its event log,
   its token history) and how much is left for Python;
2. each statement of a cycle: the time inside the driver's `execute` (SQLite's
   own work, the statement's triggers included), by statement;
3. each Python layer: exclusive time by module under cProfile (which slows
   Python down, so read these as shares of the cycle, not as microseconds).

The store is opened through the public API; the instrumentation reaches its
private connection only to time it and to set `synchronous` (nothing else is
ever executed on it). The ceiling's board is a second store's file, driven
through that store's connection with the statements of `agent17.store.sqlite`.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent17 import SqliteTaskStore
from agent17.armour.wal_owner import CHECKPOINT_FRAMES
from agent17.store.sqlite import (
    CLAIM_NEXT_SQL,
    COMPLETE_SQL,
    RELEASE_EXPIRED_SQL,
    SQLITE_SQL,
    db_time,
)

RELEASE_DEPENDENTS_SQL = SQLITE_SQL.complete.then

LEASE_SECONDS = 3600.0


class TimedConnection:
    """A stand-in for the store's connection that times every `execute`, by statement."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        started = time.perf_counter()
        try:
            return self._connection.execute(sql, *args)
        finally:
            name = _statement_name(sql)
            self.seconds[name] += time.perf_counter() - started
            self.calls[name] += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def _statement_name(sql: str) -> str:
    words = " ".join(sql.split())
    for marker, name in (
        ("SET status = 'pending'", "release expired leases (UPDATE)"),
        ("SET status = 'in_progress'", "claim (UPDATE ... RETURNING)"),
        ("SET status = 'completed'", "complete (UPDATE ... RETURNING)"),
        ("unmet_dependencies - 1", "release dependents (UPDATE)"),
    ):
        if marker in words:
            return name
    return words[:40]


def _state_file(store: SqliteTaskStore) -> Any:
    """What holds the store's `_connection` (instrumentation only), in this tree or an older one."""
    holder: Any = store
    for name in ("_sqlite", "_db", "_file"):
        holder = getattr(holder, name, holder)
    return holder


def open_store(folder: Path, synchronous: str, tasks: int) -> SqliteTaskStore:
    store = SqliteTaskStore(folder, lease_seconds=LEASE_SECONDS)
    _state_file(store)._connection.execute(f"PRAGMA synchronous = {synchronous}")
    store.create_tasks([(f"T{n}", "", ()) for n in range(tasks)])
    return store


def open_floor(path: Path, synchronous: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER)")
    connection.execute("INSERT OR IGNORE INTO t VALUES (1, 0)")
    return connection


def cycle(store: SqliteTaskStore) -> None:
    claim = store.claim_next("bench")
    assert claim is not None
    store.complete_task(claim.task.id, "bench", claim.claim_token)


def floor_cycle(connection: sqlite3.Connection) -> None:
    for _ in range(2):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE t SET v = v + 1 WHERE id = 1")
        connection.execute("COMMIT")


def sql_only_cycle(connection: sqlite3.Connection) -> None:
    """The store's statements for one claim + completion, with no agent17 Python around them."""
    moment = datetime.now(UTC)
    now, expires = db_time(moment), db_time(moment + timedelta(seconds=LEASE_SECONDS))
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(RELEASE_EXPIRED_SQL, {"now": now})
    claim = {"owner": "bench", "token": str(uuid.uuid4()), "now": now, "expires": expires}
    (row,) = connection.execute(CLAIM_NEXT_SQL, claim).fetchall()
    connection.execute("COMMIT")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(RELEASE_EXPIRED_SQL, {"now": now})
    held = {"task_id": row["id"], "owner": "bench", "token": claim["token"], "now": now}
    connection.execute(COMPLETE_SQL, held).fetchall()
    connection.execute(RELEASE_DEPENDENTS_SQL, {"sequence": row["sequence"]}).fetchall()
    connection.execute("COMMIT")


def per_cycle_us(run: Callable[[], None], cycles: int) -> float:
    started = time.perf_counter()
    for _ in range(cycles):
        run()
    return (time.perf_counter() - started) / cycles * 1e6


def layer_of(filename: str, function: str) -> str:
    if filename == "~":  # a builtin: name the C call
        if "execute" in function:
            return "sqlite3 execute (SQLite itself, C)"
        return f"builtins: {function}"
    path = Path(filename)
    if "agent17" in path.parts:
        return "agent17/" + "/".join(path.parts[path.parts.index("agent17") + 1 :])
    return f"stdlib: {path.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--synchronous", default="NORMAL", choices=["NORMAL", "FULL"])
    args = parser.parse_args(argv)
    cycles = args.cycles
    with tempfile.TemporaryDirectory(prefix="agent17-breakdown-") as folder:
        root = Path(folder)
        store = open_store(root / "board", args.synchronous, 3 * cycles + 100)
        bare = open_store(root / "bare", args.synchronous, 3 * cycles + 100)
        bare_connection = _state_file(bare)._connection
        # The store checkpoints its -wal itself every CHECKPOINT_FRAMES frames (automatic
        # checkpoints are off on its connection); the bare loop has no store around it,
        # so SQLite's own does the same, or its -wal would grow without end.
        bare_connection.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_FRAMES}")
        floor = open_floor(root / "floor.sqlite3", args.synchronous)
        for _ in range(50):
            cycle(store)
            sql_only_cycle(bare_connection)
            floor_cycle(floor)
        # 1. cycle against floor, interleaved in slices so all see the same machine
        store_us, bare_us, floor_us = [], [], []
        for _ in range(10):
            store_us.append(per_cycle_us(lambda: cycle(store), cycles // 10))
            bare_us.append(per_cycle_us(lambda: sql_only_cycle(bare_connection), cycles // 10))
            floor_us.append(per_cycle_us(lambda: floor_cycle(floor), cycles // 10))
        s, b, f = (statistics.median(us) for us in (store_us, bare_us, floor_us))
        print(f"synchronous={args.synchronous}, {cycles} cycles, median of 10 slices")
        print(f"  store cycle (claim_next + complete_task) {s:8.1f} µs")
        print(f"  floor cycle (2 x BEGIN/UPDATE/COMMIT)     {f:8.1f} µs")
        print(f"  store beyond the floor                    {s - f:8.1f} µs   ratio {f / s:.2f}")
        print(f"  ceiling: the store's SQL alone            {b:8.1f} µs   ratio {f / b:.2f}")
        print(f"    the schema's work beyond the floor      {b - f:8.1f} µs")
        print(f"    the store's Python (store - ceiling)    {s - b:8.1f} µs")
        if args.synchronous == "FULL":  # the goal: 0.7 of the FULL floor
            print(f"    Python that 0.7 of the floor leaves     {f / 0.7 - b:8.1f} µs")
        else:  # the goal: the store's own work beside the floor halved
            print(f"    half of the store's own work            {(s - f) / 2:8.1f} µs")
        bare.close()
        # 2. per statement
        state_file = _state_file(store)
        timed = TimedConnection(state_file._connection)
        state_file._connection = timed
        started = time.perf_counter()
        for _ in range(cycles):
            cycle(store)
        total = (time.perf_counter() - started) / cycles * 1e6
        state_file._connection = timed._connection
        print(f"\nper statement (inside execute, µs per cycle; the cycle took {total:.1f} µs)")
        inside = 0.0
        for name, seconds in sorted(timed.seconds.items(), key=lambda item: -item[1]):
            us = seconds / cycles * 1e6
            inside += us
            print(f"  {us:8.1f}  x{timed.calls[name] / cycles:.0f}  {name}")
        print(f"  {inside:8.1f}      all statements; Python around them: {total - inside:.1f} µs")
        # 3. per Python layer
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(cycles):
            cycle(store)
        profile.disable()
        stats = pstats.Stats(profile)
        by_layer: dict[str, float] = defaultdict(float)
        for (filename, _, function), row in stats.stats.items():  # type: ignore[attr-defined]
            by_layer[layer_of(filename, function)] += row[2]
        whole = sum(by_layer.values())
        print("\nper layer (exclusive time under cProfile, share of the cycle)")
        for layer, seconds in sorted(by_layer.items(), key=lambda item: -item[1])[:14]:
            print(f"  {seconds / whole:6.1%}  {layer}")
        store.close()
        floor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
