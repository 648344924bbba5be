"""PostgresTaskStore against its floor, and where a claim+complete cycle's time goes.

    .venv/bin/python benchmarks/pg_where_time_goes.py [--pairs 10] [--batch 100]
        [--processes 8] [--tasks 100] [--rounds 3]

The floor is what any durable claim+complete must pay on PostgreSQL: two write
transactions per task, each a single-statement autocommit UPDATE of one row,
on the same durable server (fsync, full page writes, synchronous commit: a
throwaway cluster started for the run) and the same kind of connection (psycopg,
Unix socket). Everything runs in one run, store and floor interleaved, so both
see the same disk and the same neighbours on the machine:

1) One process: batches of claim_next + complete_task cycles on a board of ready
   tasks, alternating with batches of floor cycles; the ratio is the median of
   the per-pair ratios store/floor (goal >= 0.5).
2) N processes (spawned together behind a barrier) drain one board, against N
   processes doing the floor's two UPDATEs as many times on one shared row
   (a row lock queues them as the board lock queues claims), in alternating
   rounds; tasks per second, the median of the rounds (goal >= 0.4).
3) Where one process's cycle goes: each statement's wall time (its round trip
   and the server's work, the COMMIT's flush included), and the rest, which is
   the client's Python (the board, the engine, psycopg).
4) The ceiling, interleaved with the floor: the schema's board functions called
   bare on the store's own board, no agent17 Python around them, (a) as the
   store sends them (BEGIN, the function, COMMIT: one message) and (b) each as
   one autocommit statement; and (c) the smallest durable claim and completion
   there is: two autocommit UPDATEs of a bare queue table with a ready index (no
   board lock, no event log, no token history, no graph check). No store built on
   these functions can beat (a) or (b), so they say how much of the gap to the
   goal is the server's work and how much the client's.

To measure another checkout's store, put it first on the path:
`PYTHONPATH=<checkout> .venv/bin/python benchmarks/pg_where_time_goes.py`.
Nothing here is a test: no time is asserted; a missed goal prints MISS.
"""

from __future__ import annotations

import argparse
import collections
import functools
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pg_cluster

LEASE_SECONDS = 24 * 3600.0  # no lease runs out while measuring
CYCLE_GOAL = 0.5
PROCESSES_GOAL = 0.4
FLOOR_UPDATE = "UPDATE floor SET v = v + 1 WHERE id = 1"


def floor_connection(dsn: str) -> Any:
    import psycopg

    connection = psycopg.connect(dsn, autocommit=True)
    connection.execute("CREATE TABLE IF NOT EXISTS floor (id int PRIMARY KEY, v bigint NOT NULL)")
    connection.execute("INSERT INTO floor VALUES (1, 0) ON CONFLICT DO NOTHING")
    return connection


def floor_cycles(connection: Any, cycles: int) -> None:
    for _ in range(cycles):
        connection.execute(FLOOR_UPDATE)  # the claim's commit
        connection.execute(FLOOR_UPDATE)  # the completion's commit


def store_cycles(store: Any, cycles: int) -> None:
    for _ in range(cycles):
        claim = store.claim_next("bench")
        assert claim is not None
        store.complete_task(claim.task.id, "bench", claim.claim_token)


def one_process(dsn: str, pairs: int, batch: int) -> tuple[float, float, float, float]:
    """(store cycles/s, floor cycles/s, median ratio, store CPU per cycle in s)."""
    from agent17 import PostgresTaskStore

    store = PostgresTaskStore(dsn, lease_seconds=LEASE_SECONDS)
    store.create_tasks([(f"task {n}", "", ()) for n in range((pairs + 1) * batch)])
    floor = floor_connection(dsn)
    store_cycles(store, batch)  # warm: connections, plans, caches
    floor_cycles(floor, batch)
    ratios, store_wall, floor_wall, cpu = [], 0.0, 0.0, 0.0
    for _ in range(pairs):
        started, cpu_started = time.perf_counter(), time.process_time()
        store_cycles(store, batch)
        in_store = time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        started = time.perf_counter()
        floor_cycles(floor, batch)
        on_floor = time.perf_counter() - started
        ratios.append(on_floor / in_store)
        store_wall += in_store
        floor_wall += on_floor
    store.close()
    floor.close()
    cycles = pairs * batch
    return cycles / store_wall, cycles / floor_wall, statistics.median(ratios), cpu / cycles


def drain_worker(dsn: str, barrier: Any, out: Any) -> None:
    from agent17 import PostgresTaskStore

    store = PostgresTaskStore(dsn, lease_seconds=LEASE_SECONDS)
    done = 0
    barrier.wait(60)
    started = time.perf_counter()
    while (claim := store.claim_next("bench")) is not None:
        store.complete_task(claim.task.id, "bench", claim.claim_token)
        done += 1
    out.put((done, started, time.perf_counter()))
    store.close()


def floor_worker(dsn: str, cycles: int, barrier: Any, out: Any) -> None:
    connection = floor_connection(dsn)
    barrier.wait(60)
    started = time.perf_counter()
    floor_cycles(connection, cycles)
    out.put((cycles, started, time.perf_counter()))
    connection.close()


def _round(context: Any, target: Any, args: tuple[Any, ...], processes: int) -> float:
    barrier, out = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=target, args=(*args, barrier, out)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(60)
    done = sum(count for count, _, _ in results)
    return done / (max(end for _, _, end in results) - min(start for _, start, _ in results))


def many_processes(
    server: pg_cluster.Server, processes: int, tasks: int, rounds: int
) -> tuple[float, float]:
    """(store tasks/s, floor tasks/s), medians of alternating rounds."""
    from agent17 import PostgresTaskStore

    context = multiprocessing.get_context("spawn")
    in_store, on_floor = [], []
    for _ in range(rounds):
        dsn = server.dsn(server.new_database())
        with PostgresTaskStore(dsn) as store:
            store.create_tasks([(f"task {n}", "", ()) for n in range(processes * tasks)])
        floor_connection(dsn).close()
        in_store.append(_round(context, drain_worker, (dsn,), processes))
        on_floor.append(_round(context, floor_worker, (dsn, tasks), processes))
    return statistics.median(in_store), statistics.median(on_floor)


def split(dsn: str, cycles: int) -> tuple[float, list[tuple[str, float]]]:
    """Wall time per cycle, and each statement's share of it (wrapping the driver call)."""
    from agent17 import PostgresTaskStore
    from agent17.armour import pg_transaction

    store = PostgresTaskStore(dsn, lease_seconds=LEASE_SECONDS)
    store.create_tasks([(f"task {n}", "", ()) for n in range(cycles + 50)])
    store_cycles(store, 50)
    spent: dict[str, float] = collections.defaultdict(float)
    send = pg_transaction.PgTransaction._send

    def timed(self: Any, sql: str, params: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return send(self, sql, params)
        finally:
            shown = " ".join(sql.split())
            shown = shown.split("; ", 1)[-1] if shown.startswith("BEGIN") else shown
            spent[shown.split("(", 1)[0][:56] if "FROM" in shown[:30] else shown[:56]] += (
                time.perf_counter() - started
            )

    pg_transaction.PgTransaction._send = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    store_cycles(store, cycles)
    wall = time.perf_counter() - started
    pg_transaction.PgTransaction._send = send  # type: ignore[method-assign]
    store.close()
    per_cycle = [(sql, seconds / cycles) for sql, seconds in spent.items()]
    return wall / cycles, sorted(per_cycle, key=lambda item: -item[1])


CEILING_TABLE = """
CREATE TABLE public.bare_queue (sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE, status text NOT NULL, owner text, claim_token text,
    lease_expires_at_utc timestamptz, unmet_dependencies integer NOT NULL DEFAULT 0);
CREATE INDEX bare_queue_ready ON public.bare_queue (sequence)
    WHERE status = 'pending' AND unmet_dependencies = 0"""
BARE_CLAIM = """UPDATE bare_queue SET status = 'in_progress', owner = %(owner)s,
    claim_token = %(token)s, lease_expires_at_utc = clock_timestamp() + %(lease)s
 WHERE sequence = (SELECT sequence FROM bare_queue WHERE status = 'pending'
                     AND unmet_dependencies = 0 ORDER BY sequence LIMIT 1)
RETURNING id"""
BARE_COMPLETE = """UPDATE bare_queue SET status = 'completed', claim_token = NULL,
    lease_expires_at_utc = NULL
 WHERE id = %(task_id)s AND status = 'in_progress' AND owner = %(owner)s
   AND claim_token = %(token)s"""


def ceiling(dsn: str, pairs: int, batch: int) -> list[tuple[str, float, float]]:
    """(what, µs per cycle, median ratio floor/it) for the three ceilings of part 4."""
    import uuid
    from datetime import timedelta

    import psycopg

    from agent17 import PostgresTaskStore
    from agent17.armour.pg_transaction import BEGIN

    cycles = (pairs + 1) * batch
    with PostgresTaskStore(dsn, lease_seconds=LEASE_SECONDS) as store:
        store.create_tasks([(f"task {n}", "", ()) for n in range(2 * cycles)])
    connection = psycopg.connect(dsn, autocommit=True)
    connection.execute("SET search_path = agent17, public")
    connection.execute(CEILING_TABLE)
    connection.execute(
        "INSERT INTO public.bare_queue (id, status)"
        " SELECT gen_random_uuid()::text, 'pending' FROM generate_series(1, %(n)s)",
        {"n": cycles},
    )
    client = psycopg.ClientCursor(connection)  # simple queries, bound in the client
    floor = floor_connection(dsn)
    lease = timedelta(seconds=LEASE_SECONDS)

    def last_row(cursor: Any) -> Any:
        row = None
        while True:
            if cursor.description is not None:
                row = cursor.fetchone()
            if not cursor.nextset():
                return row

    claim = "SELECT * FROM claim_next(NULL, %(lease)s, %(owner)s, %(token)s)"
    done = "SELECT * FROM complete_task(NULL, %(task_id)s, %(owner)s, %(token)s)"

    def functions(count: int, claim: str, done: str) -> None:
        for _ in range(count):
            bound = {"lease": lease, "owner": "bench", "token": str(uuid.uuid4())}
            bound["task_id"] = last_row(client.execute(claim, bound))[3]  # part, at, seq, id
            last_row(client.execute(done, bound))

    def bare(count: int) -> None:
        for _ in range(count):
            bound: dict[str, Any] = {"lease": lease, "owner": "bench", "token": str(uuid.uuid4())}
            (bound["task_id"],) = client.execute(BARE_CLAIM, bound).fetchone()
            client.execute(BARE_COMPLETE, bound)

    kinds = {
        "(a) the functions bare, BEGIN; fn; COMMIT": functools.partial(
            functions, claim=f"{BEGIN}; {claim}; COMMIT", done=f"{BEGIN}; {done}; COMMIT"
        ),
        "(b) the functions bare, autocommit": functools.partial(functions, claim=claim, done=done),
        "(c) two plain UPDATEs, nothing else": bare,
    }
    for run in kinds.values():
        run(batch // 2)  # warm: plans, caches
    floor_cycles(floor, batch // 2)
    spent: dict[str, list[float]] = {name: [] for name in kinds}
    ratios: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(pairs):
        for name, run in kinds.items():
            started = time.perf_counter()
            run(batch // 2)
            took = time.perf_counter() - started
            started = time.perf_counter()
            floor_cycles(floor, batch // 2)
            ratios[name].append((time.perf_counter() - started) / took)
            spent[name].append(took / (batch // 2))
    connection.close()
    floor.close()
    return [
        (name, statistics.median(spent[name]) * 1e6, statistics.median(ratios[name]))
        for name in kinds
    ]


def _verdict(ratio: float, goal: float) -> str:
    return f"{ratio:.2f} of the floor (goal >= {goal}: {'ok' if ratio >= goal else 'MISS'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=10, help="1) pairs of batches")
    parser.add_argument("--batch", type=int, default=100, help="1) cycles per batch")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=100, help="2) tasks per process")
    parser.add_argument("--rounds", type=int, default=3, help="2) rounds of each")
    parser.add_argument("--cycles", type=int, default=1000, help="3) cycles split")
    options = parser.parse_args()
    import agent17

    server = pg_cluster.start_cluster(durable=True)
    try:
        with server.admin() as connection:
            version = connection.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}, durable throwaway cluster;")
        print(f"agent17 from {Path(agent17.__file__).parent}")
        rate, floor, ratio, cpu = one_process(
            server.dsn(server.new_database()), options.pairs, options.batch
        )
        print(f"\n1) 1 process, {options.pairs} x {options.batch} cycles, interleaved:")
        print(
            f"   store {rate:8,.0f} cycles/s  ({1e6 / rate:,.0f} µs, its CPU {cpu * 1e6:,.0f} µs)"
        )
        print(f"   floor {floor:8,.0f} cycles/s  ({1e6 / floor:,.0f} µs: two autocommit UPDATEs)")
        print(f"   store/floor, median of the pairs: {_verdict(ratio, CYCLE_GOAL)}")
        in_store, on_floor = many_processes(
            server, options.processes, options.tasks, options.rounds
        )
        print(f"\n2) {options.processes} processes, median of {options.rounds} rounds:")
        print(f"   store {in_store:8,.0f} tasks/s (claim_next + complete_task)")
        print(f"   floor {on_floor:8,.0f} tasks/s (two autocommit UPDATEs of one shared row)")
        print(f"   store/floor: {_verdict(in_store / on_floor, PROCESSES_GOAL)}")
        per_cycle, statements = split(server.dsn(server.new_database()), options.cycles)
        print(f"\n3) where one process's cycle goes ({per_cycle * 1e6:,.0f} µs per cycle):")
        for sql, seconds in statements:
            print(f"   {seconds * 1e6:7,.0f} µs  {sql}")
        rest = per_cycle - sum(seconds for _, seconds in statements)
        print(f"   {rest * 1e6:7,.0f} µs  the rest: the client's Python")
        print("\n4) the ceiling, each interleaved with the floor (median of the pairs):")
        for name, micros, ratio in ceiling(
            server.dsn(server.new_database()), options.pairs, options.batch
        ):
            print(f"   {micros:7,.0f} µs per cycle  {name:44s} {ratio:.2f} of the floor")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
