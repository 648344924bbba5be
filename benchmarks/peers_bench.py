"""agent17 against the queues a user would pick instead, in one run.

    .venv/bin/pip install -e '.[bench]'                 # the peers (never needed by the tests)
    .venv/bin/python benchmarks/peers_bench.py          # full run, a few minutes on 2 cores
    .venv/bin/python benchmarks/peers_bench.py --quick  # under a minute
    .venv/bin/python benchmarks/peers_bench.py --engine sqlite   # or postgres

On SQLite: agent17's SqliteTaskStore, huey's SqliteHuey, litequeue and
persist-queue's SQLiteAckQueue, each on a fresh file. On PostgreSQL: agent17's
PostgresTaskStore, procrastinate and pgqueuer (batch size 1 and 10), each in a fresh
database of one throwaway cluster (agent17.store.pg_cluster) with fsync, full page
writes and synchronous commit on. Every system is durable here: WAL with
synchronous=FULL on SQLite (peer_queues.py says what each library's default is).

Each run enqueues the same number of no-op jobs through the system's own API,
then 1 or 8 worker processes (forked, set up, released together by a barrier) take
them through the system's own worker path until none is left. The clock runs from
the first job any worker runs to the last: a worker's start (pgqueuer checks its
schema first) and stop (its psycopg driver waits up to a second for its listener)
are not per-job costs. Rounds interleave the systems (A, B, C, A, B, C, ... with the
order rotated each round), so all see the same machine; the table shows medians,
and each ratio is the median of the per-round ratios to agent17 with the same
number of workers.

Afterwards every job is counted twice: in the record the no-op job itself keeps
(each worker sends back the keys it ran) and in the system's own storage (its
done rows, events or results). A job run or marked done more than once is a
double; one never run or never marked done is lost. On PostgreSQL each run also
reads, per job, the commits the database counted (reads included), the WAL
flushes and WAL bytes of the whole cluster, and the rows added to the system's
history table.

Nothing here is a test: no time is asserted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.metadata
import itertools
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import peer_queues
from peer_queues import Peer

WORKER_COUNTS = (1, 8)
BARRIER_SECONDS = 120.0
RUN_SECONDS = 600.0  # a worker silent for longer stops the benchmark


@dataclass
class Runs:
    """What the rounds measured for one system with one number of workers."""

    rates: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    doubles: int = 0
    lost: int = 0
    errors: list[str] = field(default_factory=list)
    per_job: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))


def _worker(peer: Peer, place: str, barrier: Any, out: Any) -> None:
    try:
        peer.work(place, lambda: barrier.wait(BARRIER_SECONDS))
    except BaseException as error:
        barrier.abort()
        out.put(([], 0.0, 0.0, f"{type(error).__name__}: {error}"))
        return
    record = peer_queues.RAN
    out.put((record.keys, record.first, record.last, None))


def drain(
    peer: Peer, place: str, workers: int
) -> tuple[float, collections.Counter[int], list[str]]:
    """(seconds from the first job run to the last, runs per job key, errors) of a drain."""
    # Forked, not spawned: eight fresh interpreters importing the libraries would
    # take longer than the drain. The parent holds no connection while it forks.
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(target=_worker, args=(peer, place, barrier, out)) for _ in range(workers)
    ]
    for process in processes:
        process.start()
    reports = []
    try:
        reports = [out.get(timeout=RUN_SECONDS) for _ in processes]
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
    errors = [error for *_, error in reports if error]
    ran = collections.Counter(key for keys, *_ in reports for key in keys)
    busy = [(first, last) for keys, first, last, _ in reports if keys]
    if errors or not busy:
        return 0.0, ran, errors or ["no worker ran a job"]
    return max(last for _, last in busy) - min(first for first, _ in busy), ran, []


class SqlitePlaces:
    """A fresh directory for every SQLite run."""

    def __init__(self, root: str | None) -> None:
        self.root = tempfile.mkdtemp(prefix="agent17-peers-", dir=root)
        self._names = itertools.count(1)

    def new(self, peer: Peer) -> str:
        place = os.path.join(self.root, f"run-{next(self._names)}")
        os.mkdir(place)
        return place

    def after_enqueue(self, place: str) -> None:
        """Nothing: a SQLite file needs no settling."""

    def counters(self, peer: Peer, place: str) -> dict[str, float]:
        return {}

    def drop(self, place: str) -> None:
        shutil.rmtree(place, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def describe(self) -> str:
        with sqlite3.connect(os.path.join(self.root, "probe.db")) as probe:
            probe.execute("PRAGMA journal_mode = WAL")
            default = probe.execute("PRAGMA synchronous").fetchone()[0]
        names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        return (
            f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=FULL for every system "
            f"(this build's default: {names.get(default, default)})"
        )


class PostgresPlaces:
    """A fresh database for every PostgreSQL run, copied from its system's template."""

    def __init__(self, peers: Sequence[Peer]) -> None:
        from agent17.store import pg_cluster

        self.cluster = pg_cluster.start_cluster(durable=True)
        self._names = itertools.count(1)
        for peer in peers:
            self._admin(f'CREATE DATABASE "{self._template(peer)}"')
            if peer.install is not None:
                peer.install(self.cluster.dsn(self._template(peer)))

    @staticmethod
    def _template(peer: Peer) -> str:
        return "template_" + "".join(c if c.isalnum() else "_" for c in peer.name.lower())

    def _admin(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.cluster.admin() as connection:
            cursor = connection.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def new(self, peer: Peer) -> str:
        name = f"run_{next(self._names)}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{self._template(peer)}"')
        return self.cluster.dsn(name)

    def after_enqueue(self, place: str) -> None:
        """VACUUM ANALYZE: every system drains a queue the planner knows, as autovacuum would."""
        import psycopg

        with psycopg.connect(place, autocommit=True) as connection:
            connection.execute("VACUUM (ANALYZE)")

    def counters(self, peer: Peer, place: str) -> dict[str, float]:
        """The database's commits, the cluster's WAL flushes and bytes, the history rows."""
        import psycopg

        dbname = psycopg.conninfo.conninfo_to_dict(place)["dbname"]
        deadline = time.monotonic() + 30
        # A backend reports its counts as it exits: wait until the workers' have.
        while self._admin(
            "SELECT 1 FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        ):
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        ((commits,),) = self._admin(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
        )
        ((flushes, wal_bytes),) = self._admin("SELECT wal_sync, wal_bytes FROM pg_stat_wal")
        counts = {"commits": float(commits), "WAL flushes": float(flushes)}
        counts["WAL kB"] = float(wal_bytes) / 1000
        if peer.history_sql is not None:
            with psycopg.connect(place, autocommit=True) as connection:
                row = connection.execute(peer.history_sql).fetchone()
                counts["history rows"] = float(row[0]) if row else 0.0
        return counts

    def drop(self, place: str) -> None:
        import psycopg

        name = psycopg.conninfo.conninfo_to_dict(place)["dbname"]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self.cluster.stop()

    def describe(self) -> str:
        settings = ("server_version", "fsync", "synchronous_commit", "full_page_writes")
        shown = [f"{name} {self._admin(f'SHOW {name}')[0][0]}" for name in settings]
        return "PostgreSQL throwaway cluster, Unix socket: " + ", ".join(shown)


def run_once(places: Any, peer: Peer, workers: int, jobs: int, runs: Runs) -> float | None:
    """One run of `peer` with `workers` processes; its rate, or None if a worker failed."""
    place = places.new(peer)
    try:
        expected = peer.enqueue(place, jobs)
        places.after_enqueue(place)
        before = places.counters(peer, place)
        seconds, ran, errors = drain(peer, place, workers)
        after = places.counters(peer, place)
        doubles, lost = peer_queues.tally(expected, ran, peer.done(place))
    finally:
        places.drop(place)
    runs.doubles += doubles
    runs.lost += lost
    runs.errors += errors
    for name, value in after.items():
        runs.per_job[name].append((value - before[name]) / jobs)
    if errors:
        return None
    rate = (jobs - 1) / seconds  # the jobs after the first, over the time they took
    runs.rates.append(rate)
    return rate


def measure(places: Any, peers: Sequence[Peer], jobs: int, rounds: int) -> dict[Any, Runs]:
    """Every peer, 1 and 8 workers, `rounds` interleaved rounds; Runs by (peer name, workers)."""
    results: dict[Any, Runs] = collections.defaultdict(Runs)
    for round_number in range(rounds):
        for workers in WORKER_COUNTS:
            shift = round_number % len(peers)
            rates = {}
            for peer in [*peers[shift:], *peers[:shift]]:
                rates[peer.name] = run_once(
                    places, peer, workers, jobs, results[peer.name, workers]
                )
            baseline = rates[peers[0].name]
            for name, rate in rates.items():
                if rate is not None and baseline is not None:
                    results[name, workers].ratios.append(rate / baseline)
        print(f"  round {round_number + 1} of {rounds} done", flush=True)
    return results


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f}" if values else "n/a"


def report(title: str, peers: Sequence[Peer], results: dict[Any, Runs]) -> None:
    """The table: jobs/s and ratio to agent17 for 1 and 8 workers, doubles and losses."""
    print(f"\n{title}")
    print(f"{'':34}{'1 worker':>20}{'8 worker processes':>24}")
    columns = f"{'jobs/s':>10}{'x agent17':>10}{'jobs/s':>14}{'x agent17':>10}"
    print(f"{'system':34}{columns}  jobs run twice or lost, all rounds")
    for peer in peers:
        cells, checks = [], []
        for workers in WORKER_COUNTS:
            runs = results[peer.name, workers]
            ratio = f"{statistics.median(runs.ratios):.2f}" if runs.ratios else "n/a"
            cells.append(f"{_median(runs.rates):>{10 if workers == 1 else 14}}{ratio:>10}")
            checks.append(f"{workers}w: {runs.doubles} doubles, {runs.lost} lost")
            if runs.errors:
                checks.append(f"{len(runs.errors)} failed workers ({runs.errors[0]})")
        name = f"{peer.name} {importlib.metadata.version(peer.distribution)}"
        print(f"{name:34}{''.join(cells)}  {'; '.join(checks)}")
    measured = list(results[peers[0].name, 8].per_job)
    if measured:
        print(f"\nper job, 8 workers (medians): {', '.join(measured)}")
        for peer in peers:
            per_job = results[peer.name, 8].per_job
            values = ", ".join(
                f"{statistics.median(per_job[name]):.2f}" if per_job[name] else "n/a"
                for name in measured
            )
            print(f"  {peer.name:32} {values}")
    print("\nwhat each does per job (from its code):")
    for peer in peers:
        print(f"  {peer.name}: {peer.per_job}")


@contextlib.contextmanager
def _places(engine: str, peers: Sequence[Peer], root: str | None) -> Iterator[Any]:
    places: Any = SqlitePlaces(root) if engine == "sqlite" else PostgresPlaces(peers)
    try:
        yield places
    finally:
        places.close()


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs and rounds")
    parser.add_argument("--jobs", type=int, help="jobs per run (default 1000; --quick 200)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 6; --quick 2)")
    parser.add_argument("--engine", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--dir", help="where the SQLite runs' files go (default: the temp dir)")
    options = parser.parse_args(argv)
    jobs = options.jobs or (200 if options.quick else 1000)
    rounds = options.rounds or (2 if options.quick else 6)
    engines = ("sqlite", "postgres") if options.engine == "both" else (options.engine,)
    print(f"{jobs} no-op jobs per run, {rounds} interleaved rounds, 1 and 8 worker processes")
    print(f"{os.cpu_count()} cores; load average {_load()}; python {sys.version.split()[0]}")
    started = time.monotonic()
    for engine in engines:
        peers = peer_queues.SQLITE_PEERS if engine == "sqlite" else peer_queues.POSTGRES_PEERS
        with _places(engine, peers, options.dir) as places:
            title = places.describe()
            print(f"\n{title}", flush=True)
            results = measure(places, peers, jobs, rounds)
        report(title, peers, results)
    print(f"\nload average {_load()} at the end; {time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
