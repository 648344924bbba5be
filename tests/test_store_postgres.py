"""What only the PostgreSQL store can meet: a server that drops, kills and restarts under it.

The contract both stores keep is `test_store_contract.py`; here are the faults
of a client/server engine. A backend terminated by an operator between two
operations (reconnected) or in the middle of one (a clear `store_unavailable`,
nothing half done), a client killed -9 inside its transaction (the server
rolls back and frees the board lock), a server restarted while workers drain
a board (no task lost, none done twice), the schema check (another version,
tables of the same names that are not a board, a board missing a piece), the
one board clock, and the store without its driver.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pg_cluster
import pytest
import store_workers
from store_backends import ManualClock, PostgresBoard, task_id, token

from agent17 import EventKind, PostgresTaskStore, TaskError, TaskStatus
from agent17.armour import pg_connection
from agent17.armour.pg_transaction import ConnectionLost, PgTransaction
from agent17.deterministic import uuid_sequence

WAIT_SECONDS = 60.0
TESTS_FOLDER = str(Path(__file__).parent)
spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def board() -> Iterator[PostgresBoard]:
    made = PostgresBoard(pg_cluster.server())
    yield made
    made.close_all()


def raises_code(code: str, action: Any) -> TaskError:
    with pytest.raises(TaskError) as caught:
        action()
    assert caught.value.code == code, f"expected {code}, got {caught.value.code}: {caught.value}"
    return caught.value


def terminate(board: PostgresBoard) -> None:
    """pg_terminate_backend of the board's one store session, waiting until it is gone."""
    (pid,) = pg_cluster.backend_pids(board.dsn)
    with board.connection() as connection:
        ((done,),) = connection.execute(
            "SELECT pg_terminate_backend(%s, %s)", (pid, int(WAIT_SECONDS * 1000))
        ).fetchall()
    assert done, f"backend {pid} did not end"


def board_state(store: PostgresTaskStore) -> tuple[Any, ...]:
    return (store.list_tasks(), store.events(), store.issued_claim_tokens())


# -- a backend terminated by an operator ---------------------------------------------------


@pytest.mark.parametrize("clock", ["injected", "server"])
def test_a_connection_terminated_between_operations_is_replaced_unseen(
    board: PostgresBoard, clock: str
) -> None:
    # On the server's clock the claim's message carries its COMMIT and may never be sent
    # twice: the dead session is seen (it has the server's goodbye to read) before it is.
    store = board.store() if clock == "injected" else board.raw_store()
    a = store.create_task("A")
    terminate(board)
    claim = store.claim_next("alice")  # the next BEGIN finds the dead session and reconnects
    assert claim is not None and claim.task.id == a.id
    terminate(board)
    assert store.complete_task(a.id, "alice", claim.claim_token).task.status is TaskStatus.COMPLETED
    assert [e.kind for e in store.events()] == [
        EventKind.CREATED,
        EventKind.CLAIMED,
        EventKind.COMPLETED,
    ]


def test_a_connection_terminated_mid_operation_is_store_unavailable_and_nothing_half_done(
    board: PostgresBoard,
) -> None:
    seed = board.store(new_claim_token=uuid_sequence(72))
    a = seed.create_task("A")
    before = board_state(seed)
    base, armed = ManualClock(), [True]

    def clock() -> Any:
        # Read once the board lock is held, before the claim statement: the session that
        # holds the lock right now is struck there.
        if armed:
            armed.clear()
            with board.connection() as connection:
                pids = pg_cluster.backend_pids(board.dsn)
                ((pid,),) = connection.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND pid = ANY(%s)",
                    (pids,),
                ).fetchall()
                connection.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
        return base()

    store = board.raw_store(clock=clock, new_claim_token=uuid_sequence(71))
    error = raises_code("store_unavailable", lambda: store.claim_next("alice"))
    assert "rolled it back" in str(error)
    assert board_state(seed) == before  # no claim, no event, no token
    assert board.write_lock_free()
    # The same object reconnects; a token drawn for the lost claim was never issued,
    # so it is the one this claim gets.
    claim = store.claim_next("alice")
    assert claim is not None and claim.task.id == a.id
    assert seed.issued_claim_tokens() == [claim.claim_token] == [token(1)]


def lose_the_commit(monkeypatch: pytest.MonkeyPatch, *, committed: bool) -> None:
    """The answer to the next message that commits never arrives: after the server
    committed it, or before it reached the server. (On the server's clock a claim's
    COMMIT goes with its BEGIN, in one message.)"""
    original = PgTransaction._send

    def send(tx: PgTransaction, sql: str, params: Any = None) -> Any:
        if not sql.rstrip().endswith("COMMIT"):
            return original(tx, sql, params)
        monkeypatch.setattr(PgTransaction, "_send", original)  # this one message only
        assert tx.commit_sent
        if committed:
            original(tx, sql, params)
        else:
            tx._connection.close()  # never sent: the server rolls the transaction back
        raise ConnectionLost("server closed the connection unexpectedly")

    monkeypatch.setattr(PgTransaction, "_send", send)


def store_on(board: PostgresBoard, clock: str) -> Any:
    """A store on an injected clock (COMMIT apart) or on the server's (COMMIT with BEGIN)."""
    if clock == "injected":
        return board.store()
    return board.raw_store(new_claim_token=uuid_sequence(71))


CLOCKS = ["injected", "server"]


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("operation", ["claim_next", "claim_task"])
def test_a_claim_whose_commit_answer_was_lost_is_found_in_the_token_history(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch, operation: str, clock: str
) -> None:
    store = store_on(board, clock)
    a = store.create_task("A")
    lose_the_commit(monkeypatch, committed=True)
    claim = (
        store.claim_next("alice") if operation == "claim_next" else store.claim_task(a.id, "alice")
    )
    assert claim is not None and (claim.task.id, claim.claim_token) == (a.id, token(1))
    assert store.issued_claim_tokens() == [token(1)]
    assert store.complete_task(a.id, "alice", claim.claim_token).task.owner == "alice"


@pytest.mark.parametrize("clock", CLOCKS)
def test_a_claim_whose_commit_never_reached_the_server_is_store_unavailable_and_undone(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch, clock: str
) -> None:
    store = store_on(board, clock)
    a = store.create_task("A")
    before = board_state(store)
    lose_the_commit(monkeypatch, committed=False)
    error = raises_code("store_unavailable", lambda: store.claim_next("alice"))
    assert "no such claim: nothing was changed" in str(error)
    assert board_state(store) == before
    claim = store.claim_next("alice")  # the token was never issued: this claim gets it
    assert claim is not None and (claim.task.id, claim.claim_token) == (a.id, token(1))


def interrupt_after_the_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next message that commits runs on the server, then Ctrl-C lands before its
    answer is read: what an interrupt during a claim's lock wait can leave behind."""
    original = PgTransaction._send

    def send(tx: PgTransaction, sql: str, params: Any = None) -> Any:
        if not sql.rstrip().endswith("COMMIT"):
            return original(tx, sql, params)
        monkeypatch.setattr(PgTransaction, "_send", original)  # this one message only
        original(tx, sql, params)
        raise KeyboardInterrupt

    monkeypatch.setattr(PgTransaction, "_send", send)


def test_an_interrupted_claim_that_committed_is_given_back_at_once(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = board.raw_store(new_claim_token=uuid_sequence(71))  # the server's clock
    a = store.create_task("A")
    interrupt_after_the_commit(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        store.claim_next("alice")
    # Nobody holds that claim, so its lease ended then, not a lease's length later.
    assert store.get_task(a.id).status == TaskStatus.PENDING
    assert board.write_lock_free()
    assert [(e.kind, e.claim_token) for e in store.events()][1:] == [
        (EventKind.CLAIMED, token(1)),
        (EventKind.LEASE_EXPIRED, token(1)),
    ]
    # The token reached the board, so it is never offered again.
    claim = store.claim_next("alice")
    assert claim is not None and (claim.task.id, claim.claim_token) == (a.id, token(2))


def test_an_interrupted_claim_that_never_committed_leaves_the_board_as_it_was(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = board.raw_store(new_claim_token=uuid_sequence(71))  # the server's clock
    a = store.create_task("A")
    before = board_state(store)
    original = PgTransaction._send

    def send(tx: PgTransaction, sql: str, params: Any = None) -> Any:
        if sql.rstrip().endswith("COMMIT"):
            monkeypatch.setattr(PgTransaction, "_send", original)
            raise KeyboardInterrupt  # before the message went out
        return original(tx, sql, params)

    monkeypatch.setattr(PgTransaction, "_send", send)
    with pytest.raises(KeyboardInterrupt):
        store.claim_next("alice")
    assert board_state(store) == before  # the give-back found nothing to give back
    claim = store.claim_next("alice")
    assert claim is not None and claim.task.id == a.id


@pytest.mark.parametrize("clock", CLOCKS)
def test_a_completion_whose_commit_answer_was_lost_says_its_outcome_is_unknown(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch, clock: str
) -> None:
    store = store_on(board, clock)
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    lose_the_commit(monkeypatch, committed=True)
    error = raises_code(
        "store_unavailable", lambda: store.complete_task(a.id, "alice", claim.claim_token)
    )
    assert "outcome is unknown" in str(error)
    # Asking again tells: it did happen.
    again = raises_code(
        "claim_mismatch", lambda: store.complete_task(a.id, "alice", claim.claim_token)
    )
    assert "already completed by alice" in str(again)


# -- a client killed -9 inside its transaction ---------------------------------------------

KILLED_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[2])
from datetime import timedelta
from store_backends import open_spec
from agent17.deterministic import COURSE_START, ManualClock, uuid_sequence

later = ManualClock(COURSE_START + timedelta(hours=1))


def clock():
    # Inside claim_next: the board lock is held, the claim statement not sent yet.
    print("inside", flush=True)
    sys.stdin.readline()  # never answered: the parent kills us here
    return later()


store = open_spec(("postgres", sys.argv[1]), clock=clock, new_claim_token=uuid_sequence(72))
store.claim_next("doomed")
"""


@pytest.mark.processes
def test_a_client_killed_inside_its_transaction_frees_the_lock_and_leaves_no_trace(
    board: PostgresBoard,
) -> None:
    clock = ManualClock()
    store = board.store(clock=clock, lease_seconds=60)
    a = store.create_task("A")
    held = store.claim_task(a.id, "alice")  # its lease has run out by the child's clock
    before = board_state(store)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, board.dsn, TESTS_FOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        readable, _, _ = select.select([child.stdout], [], [], WAIT_SECONDS)
        assert readable and child.stdout.readline().strip() == b"inside"
        assert not board.write_lock_free()  # the child holds the board lock, mid-claim
        os.kill(child.pid, signal.SIGKILL)
        child.wait(WAIT_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # The server rolled the child's transaction back: its release of alice's lease is gone
    # too, and the lock is free (this claim would time out otherwise).
    assert board_state(store) == before
    assert store.complete_task(a.id, "alice", held.claim_token).task.owner == "alice"
    assert board.integrity_problems() == []


# -- a server restarted while workers drain the board --------------------------------------


@pytest.mark.processes
def test_a_server_restart_mid_run_loses_no_task_and_does_none_twice(board: PostgresBoard) -> None:
    server = board.server
    if not isinstance(server, pg_cluster.Cluster):
        pytest.skip(f"{pg_cluster.ENV_DSN} names a server the tests may not restart")
    store = board.raw_store()
    ids = [task.id for task in store.create_tasks([(f"T{n}", "", ()) for n in range(300)])]
    workers = 4
    barrier = spawn.Barrier(workers + 1)
    results = spawn.Queue()
    processes = [
        spawn.Process(
            target=store_workers.drain_through_outages,
            args=(board.spec, f"worker-{n}", 2.0, barrier, results),
        )
        for n in range(workers)
    ]
    for process in processes:
        process.start()
    try:
        barrier.wait(WAIT_SECONDS)
        deadline = time.monotonic() + WAIT_SECONDS
        # Restart once the drain is under way (a fifth of the board done), not at a time.
        while sum(1 for e in store.events() if e.kind is EventKind.COMPLETED) < 60:
            assert time.monotonic() < deadline, "the drain never got going"
            time.sleep(0.01)
        server.restart()
        completed_by_then = sum(1 for e in store.events() if e.kind is EventKind.COMPLETED)
        reports = [results.get(timeout=WAIT_SECONDS) for _ in range(workers)]
        for process in processes:
            process.join(WAIT_SECONDS)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
    assert all(report[0] == "done" for report in reports), reports
    print("outages seen by the workers:", [report[1] for report in reports], completed_by_then)
    assert completed_by_then < len(ids), "the board drained before the restart: nothing tested"
    tasks = store.list_tasks()  # this store reconnects after the restart as well
    assert [t.id for t in tasks] == ids and all(t.status is TaskStatus.COMPLETED for t in tasks)
    completed = Counter(e.task_id for e in store.events() if e.kind is EventKind.COMPLETED)
    assert set(completed.values()) == {1} and len(completed) == len(ids)
    assert board.integrity_problems() == []


def test_a_store_open_across_a_server_restart_carries_on(board: PostgresBoard) -> None:
    server = board.server
    if not isinstance(server, pg_cluster.Cluster):
        pytest.skip(f"{pg_cluster.ENV_DSN} names a server the tests may not restart")
    store = board.store()
    a = store.create_task("A")
    server.restart()
    claim = store.claim_next("alice")
    assert claim is not None and claim.task.id == a.id


# -- the lock, the clock ---------------------------------------------------------------------


def test_a_board_lock_held_too_long_is_store_unavailable_and_changes_nothing(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_connection, "LOCK_TIMEOUT_SECONDS", 0.2)
    store = board.store()
    store.create_task("A")
    before = board_state(store)
    with board.write_lock_held():
        error = raises_code("store_unavailable", lambda: store.claim_next("alice"))
    assert "lock was held" in str(error)
    assert board_state(store) == before
    assert store.claim_next("alice") is not None


def test_without_a_clock_the_board_reads_the_servers_clock_after_the_lock(
    board: PostgresBoard,
) -> None:
    store = board.raw_store(lease_seconds=60)
    a = store.create_task("A")
    claimed: list[Any] = []
    with board.connection() as holder, holder.transaction():
        holder.execute("SELECT pg_advisory_xact_lock(board_lock_key())")
        worker = threading.Thread(target=lambda: claimed.append(store.claim_next("alice")))
        worker.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while not holder.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the claim never waited for the lock"
            time.sleep(0.001)
        ((released_at,),) = holder.execute("SELECT clock_timestamp()").fetchall()
    worker.join(WAIT_SECONDS)
    (claim,) = claimed
    event = store.events()[-1]
    # Read after the lock was granted, by the server: not the BEGIN's now(), not the host.
    assert event.kind is EventKind.CLAIMED and event.at_utc > released_at
    assert claim.lease_expires_at_utc == event.at_utc + timedelta(seconds=60)
    assert store.events()[0].at_utc < released_at  # the creation came before
    assert claim.task.id == a.id


# -- the schema check ------------------------------------------------------------------------


def count(connection: Any, schema: str, table: str) -> int:
    return int(connection.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0])


def catalog(board: PostgresBoard) -> list[tuple[Any, ...]]:
    """Every object and row count in the database's own schemas, to prove "nothing changed"."""
    with board.connection() as connection:
        objects = connection.execute(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname NOT LIKE 'pg\\_%%' AND n.nspname NOT IN"
            " ('information_schema', 'amcheck') ORDER BY 1, 2"
        ).fetchall()
        rows = [
            (
                schema,
                name,
                connection.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchone(),
            )
            for schema, name, kind in objects
            if kind == "r"
        ]
    return [*objects, *rows]


def test_another_schema_version_is_refused_and_left_as_it_is(board: PostgresBoard) -> None:
    board.store().create_task("A")
    with board.connection() as connection:
        connection.execute("UPDATE task_metadata SET value = '99' WHERE key = 'schema_version'")
    before = catalog(board)
    error = raises_code("schema_version_mismatch", board.raw_store)
    assert "'99'" in str(error) and "'3'" in str(error)
    assert catalog(board) == before


@pytest.mark.parametrize("old", ["1", "2"])
def test_an_older_board_is_refused_with_both_versions_named(board: PostgresBoard, old: str) -> None:
    # Version 1 had no board functions; version 2's functions did not check the graph
    # themselves, so a claim sent with its COMMIT could commit on a broken one.
    board.store().create_task("A")
    with board.connection() as connection:
        connection.execute(
            "UPDATE task_metadata SET value = %s WHERE key = 'schema_version'", (old,)
        )
    before = catalog(board)
    error = raises_code("schema_version_mismatch", board.raw_store)
    assert f"schema version '{old}'; this agent17 needs '3'" in str(error)
    assert catalog(board) == before


@pytest.mark.parametrize(
    "foreign",
    [
        "CREATE TABLE agent17.tasks (id serial PRIMARY KEY, title text)",
        "CREATE TABLE agent17.task_metadata (name text, setting text)",
        "CREATE TABLE agent17.task_metadata (key text, value text);"
        " INSERT INTO agent17.task_metadata VALUES ('owner', 'someone else')",
    ],
    ids=["their tasks", "their metadata", "metadata without a version"],
)
def test_tables_of_the_same_names_that_are_not_a_board_are_refused_untouched(
    board: PostgresBoard, foreign: str
) -> None:
    with board.server.admin(board.dbname) as connection:
        connection.execute("CREATE SCHEMA agent17")
        connection.execute(foreign)
    before = catalog(board)
    raises_code("schema_version_mismatch", board.raw_store)
    assert catalog(board) == before


def test_an_application_tasks_table_in_public_does_not_matter(board: PostgresBoard) -> None:
    with board.server.admin(board.dbname) as connection:
        connection.execute("CREATE TABLE public.tasks (id serial PRIMARY KEY, title text)")
        connection.execute("INSERT INTO public.tasks (title) VALUES ('theirs')")
    store = board.store()
    assert store.create_task("A").id == task_id(1)
    with board.server.admin(board.dbname) as connection:
        assert connection.execute("SELECT title FROM public.tasks").fetchall() == [("theirs",)]


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TRIGGER tasks_log_every_transition ON tasks",
        "ALTER TABLE task_events DISABLE TRIGGER task_events_are_append_only",
        "ALTER TABLE tasks DROP CONSTRAINT tasks_status_matches_the_claim",
        "DROP INDEX tasks_ready",
        "CREATE OR REPLACE FUNCTION refuse_history_rewrite() RETURNS trigger"
        " LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    ],
    ids=["no transition log", "history rewritable", "no claim check", "no ready index", "no-op"],
)
def test_a_board_missing_a_piece_is_store_unreadable_and_left_as_it_is(
    board: PostgresBoard, damage: str
) -> None:
    board.store().create_task("A")
    with board.connection() as connection:
        connection.execute(damage)
    before = catalog(board)
    error = raises_code("store_unreadable", board.raw_store)
    assert "not an intact agent17 task board" in str(error)
    assert catalog(board) == before


def test_a_constraint_the_store_does_not_know_refusing_its_write_is_store_unreadable(
    board: PostgresBoard,
) -> None:
    store = board.store()
    a = store.create_task("A")
    before = board_state(store)
    with board.connection() as connection:  # planted under an open store
        connection.execute(
            "ALTER TABLE tasks ADD CONSTRAINT planted CHECK (owner IS DISTINCT FROM 'mallory')"
        )
    error = raises_code("store_unreadable", lambda: store.claim_next("mallory"))
    assert "planted" in str(error)
    assert board_state(store) == before
    assert store.claim_next("alice") is not None and store.get_task(a.id).owner == "alice"


def test_the_event_log_refuses_update_delete_and_truncate_even_in_replica_mode(
    board: PostgresBoard,
) -> None:
    store = board.store()
    store.create_task("A")
    before = store.events()
    import psycopg

    for statement in (
        "UPDATE task_events SET owner = 'mallory'",
        "DELETE FROM task_events",
        "TRUNCATE task_events",
        "TRUNCATE tasks CASCADE",
    ):
        with board.connection() as connection:
            connection.execute("SET session_replication_role = replica")
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                connection.execute(statement)
    assert store.events() == before


def test_two_stores_opening_an_empty_database_at_once_make_one_board(
    board: PostgresBoard,
) -> None:
    start = threading.Barrier(4)
    opened: list[PostgresTaskStore] = []
    failures: list[BaseException] = []

    def open_one() -> None:
        try:
            start.wait(WAIT_SECONDS)
            opened.append(board.raw_store())
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    assert failures == [] and len(opened) == 4
    opened[0].create_task("A")
    assert [t.subject for t in opened[3].list_tasks()] == ["A"]


# -- connecting, and the store without its driver --------------------------------------------


def test_a_database_that_does_not_exist_is_store_unavailable_without_the_password(
    board: PostgresBoard,
) -> None:
    dsn = board.server.dsn("agent17_no_such_database") + " password=hunter2"
    error = raises_code("store_unavailable", lambda: PostgresTaskStore(dsn))
    assert "agent17_no_such_database" in str(error) and "hunter2" not in str(error)


def test_a_malformed_connection_string_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="connection string"):
        PostgresTaskStore("this is not a connection string")


NO_DRIVER_CHILD = r"""
import sys
sys.modules["psycopg"] = None  # as if the postgres extra were not installed
import agent17
from agent17 import PostgresTaskStore, SqliteTaskStore
print("imported", PostgresTaskStore.__name__, flush=True)
try:
    PostgresTaskStore("dbname=anything")
except ImportError as error:
    print("refused:", error, flush=True)
"""


def test_without_the_driver_the_name_imports_and_construction_names_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_DRIVER_CHILD],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "imported PostgresTaskStore"
    assert lines[1].startswith("refused:") and "pip install 'agent17[postgres]'" in lines[1]


NO_SERVER_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import pg_cluster
import pytest

pg_cluster.find_bindir = lambda: None  # a machine without PostgreSQL's binaries
try:
    pg_cluster.server()
except pytest.skip.Exception as outcome:
    print("skipped:", outcome.msg)
except pytest.fail.Exception as outcome:
    print("failed:", outcome.msg)
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_without_a_server_the_postgres_tests_skip_but_fail_in_ci(ci: str) -> None:
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", pg_cluster.ENV_DSN)}
    if ci:
        environment["CI"] = ci
    done = subprocess.run(
        [sys.executable, "-c", NO_SERVER_CHILD, TESTS_FOLDER],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=True,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    verdict, _, message = done.stdout.strip().partition(": ")
    assert verdict == ("failed" if ci else "skipped"), done.stdout + done.stderr
    assert "apt-get install postgresql" in message and pg_cluster.ENV_DSN in message
