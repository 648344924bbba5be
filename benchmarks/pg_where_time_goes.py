"""Where a PostgreSQL claim's time goes: the board lock's own ceiling, and the store's steps.

store_bench.py --postgres measures PostgresTaskStore against two minimal write
transactions; this script explains the gap. Both parts run on one durable
throwaway cluster (fsync, full page writes, synchronous commit), in one run:

1) The ceiling of a board lock. 8 processes each run transactions that take one
   transaction-level advisory lock and update one row of their own, so every
   transaction waits for the one before it (as the store's claims do):
   - in three round trips (`BEGIN; lock` / `UPDATE` / `COMMIT`), the store's shape;
   - in one round trip (a function that locks and updates, called in autocommit);
   - without the lock, as a reference (no chain: group commit overlaps them).
   A PostgreSQL transaction keeps its locks until its commit record is flushed, so
   the chained variants bound any store built this way; the ratios say how much of
   the ceiling is lost to round trips held under the lock.
2) One process, `claim_next` + `complete_task` cycles on a board of ready tasks:
   wall time per cycle split by statement (each statement's time includes its round
   trip), and the client's CPU time. The split wraps the store's private statement
   method; that is the one reason this is a script of its own.

Nothing here is a test: no time is asserted, it prints numbers and ratios.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pg_cluster

VARIANTS = ("three round trips", "one round trip", "no lock")


def chain_worker(dsn: str, variant: str, row: int, count: int, barrier: Any, out: Any) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        barrier.wait(60)
        started = time.perf_counter()
        for _ in range(count):
            if variant == "three round trips":
                connection.execute("BEGIN; SELECT pg_advisory_xact_lock(17)")
                connection.execute("UPDATE chain SET n = n + 1 WHERE id = %s", (row,))
                connection.execute("COMMIT")
            elif variant == "one round trip":
                connection.execute("SELECT chain_step(%s)", (row,))
            else:
                connection.execute("UPDATE chain SET n = n + 1 WHERE id = %s", (row,))
        out.put(time.perf_counter() - started)


def lock_chain(dsn: str, processes: int, count: int, rounds: int) -> dict[str, float]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE chain (id int PRIMARY KEY, n int NOT NULL)")
        connection.execute(
            "INSERT INTO chain SELECT g, 0 FROM generate_series(0, %s) AS g", (processes,)
        )
        connection.execute(
            "CREATE FUNCTION chain_step(row_id int) RETURNS void LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM pg_advisory_xact_lock(17);"
            " UPDATE chain SET n = n + 1 WHERE id = row_id; END $$"
        )
    context = multiprocessing.get_context("spawn")
    best: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):  # alternate the variants, so all see the same disk
        for variant in VARIANTS:
            barrier, out = context.Barrier(processes), context.Queue()
            workers = [
                context.Process(target=chain_worker, args=(dsn, variant, i, count, barrier, out))
                for i in range(processes)
            ]
            for worker in workers:
                worker.start()
            seconds = max(out.get(timeout=300) for _ in workers)
            for worker in workers:
                worker.join(60)
            best[variant].append(processes * count / seconds)
    return {variant: sorted(rates)[len(rates) // 2] for variant, rates in best.items()}


def store_split(dsn: str, cycles: int) -> tuple[float, float, list[tuple[str, float]]]:
    from agent17 import PostgresTaskStore
    from agent17.store import pg_transaction

    store = PostgresTaskStore(dsn)
    store.create_tasks([(f"task {i}", "", ()) for i in range(cycles)])
    spent: dict[str, float] = collections.defaultdict(float)
    send = pg_transaction.PgTransaction._send

    def timed(self: Any, sql: str, params: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return send(self, sql, params)
        finally:
            spent[" ".join(sql.split())[:58]] += time.perf_counter() - started

    pg_transaction.PgTransaction._send = timed  # type: ignore[method-assign]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(cycles):
        claim = store.claim_next("bench")
        assert claim is not None
        store.complete_task(claim.task.id, "bench", claim.claim_token)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    pg_transaction.PgTransaction._send = send  # type: ignore[method-assign]
    store.close()
    per_cycle = [(sql, seconds / cycles) for sql, seconds in spent.items()]
    return wall / cycles, cpu / cycles, sorted(per_cycle, key=lambda item: -item[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--count", type=int, default=400, help="transactions per process")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the lock chain")
    parser.add_argument("--cycles", type=int, default=1500, help="claim+complete cycles")
    options = parser.parse_args()
    server = pg_cluster.start_cluster(durable=True)
    try:
        with server.admin() as connection:
            version = connection.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}, durable throwaway cluster")
        rates = lock_chain(
            server.dsn(server.new_database()),
            **{"processes": options.processes, "count": options.count, "rounds": options.rounds},
        )
        unchained = rates["no lock"]
        print(
            f"\n1) {options.processes} processes, one row each, median of {options.rounds}"
            " rounds (transactions per second)"
        )
        for variant in VARIANTS:
            print(
                f"   {variant:18} {rates[variant]:8,.0f} tx/s   {rates[variant] / unchained:5.2f}"
                " of no lock"
            )
        print(
            f"   one round trip / three: {rates['one round trip'] / rates['three round trips']:.2f}"
        )
        per_cycle, cpu, split = store_split(server.dsn(server.new_database()), options.cycles)
        print(
            f"\n2) PostgresTaskStore, 1 process, {options.cycles:,} claim+complete cycles:"
            f" {1 / per_cycle:,.0f} cycles/s, {per_cycle * 1e6:,.0f} µs per cycle"
            f" (client CPU {cpu * 1e6:,.0f} µs)"
        )
        for sql, seconds in split:
            print(f"   {seconds * 1e6:7,.0f} µs  {sql}")
        print(f"   {(per_cycle - sum(s for _, s in split)) * 1e6:7,.0f} µs  the rest (Python)")
        print(
            f"\n   two lock-holding transactions per task at the three-round-trip ceiling:"
            f" at most {rates['three round trips'] / 2:,.0f} tasks/s for any store of this shape"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
