"""The queues peers_bench.py holds agent17 against, each driven only through its public API.

Every system here gets the same three things: `enqueue(place, jobs)` puts jobs
0..jobs-1 through the library's own way of adding work and returns the keys it
will know them by; `work(place, ready)` is one worker, taking jobs through the
library's own worker path until none is left (it calls `ready()` once it is set
up, so that the clock starts for every worker at once); `done(place)` reads back,
from the system's own storage, how many times each job was marked done.

Every job is a no-op that notes its key and the time in RAN, this worker process's
record of what it ran; `tally` sets that record against storage's, so a job run
twice or never shows, whatever the library itself would admit.

`place` is a directory (SQLite) or a libpq connection string (PostgreSQL); every
run gets a fresh one. The libraries are imported where they are used, so this
module imports without the `bench` extra.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

LEASE_SECONDS = 3600.0  # no lease runs out while a run drains its board


@dataclass
class Record:
    """What this worker process's no-op jobs did: their keys, in order, and when."""

    keys: list[int] = field(default_factory=list)
    first: float = 0.0  # time.perf_counter() when the first job ran
    last: float = 0.0

    def ran(self, key: int) -> None:
        """The no-op job itself: note its key and the time."""
        self.last = time.perf_counter()
        if not self.keys:
            self.first = self.last
        self.keys.append(key)


RAN = Record()

Ready = Callable[[], None]


@dataclass(frozen=True)
class Peer:
    """One queue system as the benchmark drives it, and what it does per job."""

    name: str
    distribution: str  # the package whose version the table prints
    enqueue: Callable[[str, int], list[int]]
    work: Callable[[str, Ready], None]
    done: Callable[[str], collections.Counter[int]]
    per_job: str  # what one job costs it, read from its code
    install: Callable[[str], None] | None = None  # its schema, once, into a template database
    history_sql: str | None = None  # counts its history rows (PostgreSQL), if it keeps any


def tally(
    expected: Iterable[int], ran: collections.Counter[int], done: collections.Counter[int]
) -> tuple[int, int]:
    """(doubles, lost): jobs run or marked done more than once; jobs never run or never done."""
    doubles = lost = 0
    for job in expected:
        doubles += ran[job] > 1 or done[job] > 1
        lost += ran[job] == 0 or done[job] == 0
    return doubles, lost


# agent17: claim_next + complete_task, on either store.


def _agent17_store(engine: str, place: str) -> Any:
    if engine == "postgres":
        from agent17 import PostgresTaskStore

        return PostgresTaskStore(place, lease_seconds=LEASE_SECONDS)
    from agent17 import SqliteTaskStore

    return SqliteTaskStore(place, lease_seconds=LEASE_SECONDS)


def _agent17_enqueue(engine: str, place: str, jobs: int) -> list[int]:
    with _agent17_store(engine, place) as store:
        store.create_tasks([(str(job), "", ()) for job in range(jobs)])
    return list(range(jobs))


def _agent17_work(engine: str, place: str, ready: Ready) -> None:
    owner = f"worker-{os.getpid()}"
    with _agent17_store(engine, place) as store:
        ready()
        while (claim := store.claim_next(owner)) is not None:
            RAN.ran(int(claim.task.subject))
            store.complete_task(claim.task.id, owner, claim.claim_token)


def _agent17_done(engine: str, place: str) -> collections.Counter[int]:
    with _agent17_store(engine, place) as store:
        key = {task.id: int(task.subject) for task in store.list_tasks()}
        return collections.Counter(
            key[event.task_id] for event in store.events() if event.kind == "completed"
        )


def _agent17_install(place: str) -> None:
    _agent17_store("postgres", place).close()


def agent17(engine: str) -> Peer:
    """agent17's own store on `engine`."""
    lock = "BEGIN IMMEDIATE" if engine == "sqlite" else "the board lock through each COMMIT"
    return Peer(
        name="agent17",
        distribution="agent17",
        enqueue=lambda place, jobs: _agent17_enqueue(engine, place, jobs),
        work=lambda place, ready: _agent17_work(engine, place, ready),
        done=lambda place: _agent17_done(engine, place),
        per_job=(
            f"2 write transactions ({lock}); claim token checked on completion "
            "(owner, token, lease); 2 rows in a dense commit-order event log; "
            "dependency graph kept; NOTIFY only when a task becomes ready"
        ),
        install=_agent17_install if engine == "postgres" else None,
        history_sql="SELECT count(*) FROM agent17.task_events",
    )


# huey 3.5: SqliteHuey, its consumer's own worker loop (dequeue, then execute).


def _huey(place: str) -> tuple[Any, Any]:
    from huey import SqliteHuey

    huey = SqliteHuey("peers", filename=os.path.join(place, "huey.db"), fsync=True)

    @huey.task(name="noop")
    def noop(job: int) -> int:
        RAN.ran(job)
        return job  # its result is huey's only record that the job ran

    return huey, noop


def _huey_enqueue(place: str, jobs: int) -> list[int]:
    huey, noop = _huey(place)
    for job in range(jobs):
        noop(job)
    huey.storage.close()
    return list(range(jobs))


def _huey_work(place: str, ready: Ready) -> None:
    huey, _ = _huey(place)
    ready()
    while (task := huey.dequeue()) is not None:
        huey.execute(task)


def _huey_done(place: str) -> collections.Counter[int]:
    huey, _ = _huey(place)
    results = huey.all_results().values()
    return collections.Counter(huey.serializer.deserialize(value) for value in results)


HUEY = Peer(
    name="huey (SqliteHuey)",
    distribution="huey",
    enqueue=_huey_enqueue,
    work=_huey_work,
    done=_huey_done,
    per_job=(
        "2 write transactions (BEGIN EXCLUSIVE: dequeue deletes the task before it runs, "
        "so a crash loses it; then its result) and a third that only checks for a revoke; "
        "no history; fsync=True set here (default: SQLite's own, FULL in this build)"
    ),
)


# litequeue 0.9: pop (BEGIN IMMEDIATE; UPDATE ... RETURNING), then done.


def litequeue_at(place: str) -> Any:
    from litequeue import LiteQueue

    queue = LiteQueue(os.path.join(place, "litequeue.db"))
    # Its default is NORMAL, under which a power cut may forget the last commits.
    queue.conn.execute("PRAGMA synchronous = FULL")
    return queue


def _litequeue_enqueue(place: str, jobs: int) -> list[int]:
    queue = litequeue_at(place)
    with queue.transaction():
        for job in range(jobs):
            queue.put(str(job))
    queue.close()
    return list(range(jobs))


def _litequeue_work(place: str, ready: Ready) -> None:
    queue = litequeue_at(place)
    ready()
    while (message := queue.pop()) is not None:
        RAN.ran(int(message.data))
        queue.done(message.message_id)
    queue.close()


def _litequeue_done(place: str) -> collections.Counter[int]:
    from litequeue import MessageStatus

    queue = litequeue_at(place)
    rows = queue.conn.execute("SELECT data FROM Queue WHERE status = ?", (MessageStatus.DONE,))
    done = collections.Counter(int(data) for (data,) in rows)
    queue.close()
    return done


LITEQUEUE = Peer(
    name="litequeue",
    distribution="litequeue",
    enqueue=_litequeue_enqueue,
    work=_litequeue_work,
    done=_litequeue_done,
    per_job=(
        "2 write transactions (BEGIN IMMEDIATE pop; autocommit done, which checks no "
        "owner); no history; synchronous=FULL set here (its default: NORMAL)"
    ),
)


# persist-queue 1.1: SQLiteAckQueue, get then ack.


def _persist_queue(place: str) -> Any:
    from persistqueue import SQLiteAckQueue

    return SQLiteAckQueue(os.path.join(place, "persist-queue"))


def _persist_queue_enqueue(place: str, jobs: int) -> list[int]:
    queue = _persist_queue(place)
    for job in range(jobs):
        queue.put(job)
    queue.close()
    return list(range(jobs))


def _persist_queue_work(place: str, ready: Ready) -> None:
    from persistqueue.exceptions import Empty

    queue = _persist_queue(place)
    ready()
    while True:
        try:
            item = queue.get(block=False, raw=True)
        except Empty:
            break
        RAN.ran(item["data"])
        queue.ack(item)
    queue.close()


def _persist_queue_done(place: str) -> collections.Counter[int]:
    from persistqueue.sqlackqueue import AckStatus

    queue = _persist_queue(place)
    acked = int(AckStatus.acked)
    done = collections.Counter(row["data"] for row in queue.queue() if int(row["status"]) == acked)
    queue.close()
    return done


PERSIST_QUEUE = Peer(
    name="persist-queue (SQLiteAckQueue)",
    distribution="persist-queue",
    enqueue=_persist_queue_enqueue,
    work=_persist_queue_work,
    done=_persist_queue_done,
    per_job=(
        "2 write transactions (get: a SELECT outside any transaction, then an UPDATE of "
        "that row, so two processes can take one job; ack); no history; "
        "SQLite's default synchronous (FULL in this build)"
    ),
)


# procrastinate 3.10: its worker (App.run_worker_async), one job at a time per process.


def _procrastinate(place: str) -> tuple[Any, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=place))

    @app.task(name="noop", queue="peers")
    async def noop(job: int) -> None:
        RAN.ran(job)

    return app, noop


def _procrastinate_install(place: str) -> None:
    app, _ = _procrastinate(place)
    with app.open():
        app.schema_manager.apply_schema()


def _procrastinate_enqueue(place: str, jobs: int) -> list[int]:
    app, noop = _procrastinate(place)
    with app.open():
        noop.batch_defer(*({"job": job} for job in range(jobs)))
    return list(range(jobs))


def _procrastinate_work(place: str, ready: Ready) -> None:
    app, _ = _procrastinate(place)

    async def worker() -> None:
        async with app.open_async():
            ready()
            await app.run_worker_async(
                queues=["peers"], concurrency=1, wait=False, install_signal_handlers=False
            )

    asyncio.run(worker())


def _rows(place: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(place, autocommit=True) as connection:
        return connection.execute(sql).fetchall()


PROCRASTINATE = Peer(
    name="procrastinate",
    distribution="procrastinate",
    enqueue=_procrastinate_enqueue,
    work=_procrastinate_work,
    done=lambda place: collections.Counter(
        job
        for (job,) in _rows(
            place,
            "SELECT (j.args->>'job')::int FROM procrastinate_events e"
            " JOIN procrastinate_jobs j ON j.id = e.job_id WHERE e.type = 'succeeded'",
        )
    ),
    per_job=(
        "2 transactions (fetch: FOR UPDATE SKIP LOCKED, a row lock; finish, which checks "
        "no worker); 2 event rows (started, succeeded); NOTIFY on defer only"
    ),
    install=_procrastinate_install,
    history_sql="SELECT count(*) FROM procrastinate_events",
)


# pgqueuer 1.6: PgQueuer's QueueManager in drain mode, with batch size 1 or 10, on
# asyncpg as its documentation shows. (Its psycopg driver waits on the one connection
# for notifications up to a second at a time, and a single worker waits with it.)


async def _asyncpg_connection(place: str) -> Any:
    import asyncpg
    import psycopg

    parts = psycopg.conninfo.conninfo_to_dict(place)
    return await asyncpg.connect(
        host=parts["host"], port=parts["port"], user=parts["user"], database=parts["dbname"]
    )


def _pgqueuer_install(place: str) -> None:
    from pgqueuer import AsyncpgDriver, Queries

    async def install() -> None:
        connection = await _asyncpg_connection(place)
        await Queries(AsyncpgDriver(connection)).install()
        await connection.close()

    asyncio.run(install())


def _pgqueuer_enqueue(place: str, jobs: int) -> list[int]:
    from pgqueuer import AsyncpgDriver, Queries

    async def enqueue() -> list[int]:
        connection = await _asyncpg_connection(place)
        ids = await Queries(AsyncpgDriver(connection)).enqueue(
            ["noop"] * jobs, [str(job).encode() for job in range(jobs)], [0] * jobs
        )
        await connection.close()
        return [int(job_id) for job_id in ids]

    return asyncio.run(enqueue())


def _pgqueuer_work(batch_size: int, place: str, ready: Ready) -> None:
    from pgqueuer import AsyncpgDriver, PgQueuer
    from pgqueuer.domain.types import QueueExecutionMode
    from pgqueuer.models import Job

    async def worker() -> None:
        connection = await _asyncpg_connection(place)
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            RAN.ran(int(job.id))

        ready()
        await pgq.qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain)
        await connection.close()

    asyncio.run(worker())


def pgqueuer(batch_size: int) -> Peer:
    """pgqueuer's consumer taking `batch_size` jobs per dequeue."""
    shared = "" if batch_size == 1 else f", shared by up to {batch_size} jobs"
    return Peer(
        name=f"pgqueuer, batch {batch_size}",
        distribution="pgqueuer",
        enqueue=_pgqueuer_enqueue,
        work=lambda place, ready: _pgqueuer_work(batch_size, place, ready),
        done=lambda place: collections.Counter(
            job_id
            for (job_id,) in _rows(
                place, "SELECT job_id FROM pgqueuer_log WHERE status = 'successful'"
            )
        ),
        per_job=(
            f"a dequeue (FOR UPDATE SKIP LOCKED, a row lock) and a buffered completion "
            f"(deletes the job row){shared}; 2 log rows (picked, successful); a NOTIFY "
            "from every statement on its queue table"
        ),
        install=_pgqueuer_install,
        history_sql="SELECT count(*) FROM pgqueuer_log",
    )


SQLITE_PEERS = (agent17("sqlite"), HUEY, LITEQUEUE, PERSIST_QUEUE)
POSTGRES_PEERS = (agent17("postgres"), PROCRASTINATE, pgqueuer(1), pgqueuer(10))
