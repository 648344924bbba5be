"""The PostgreSQL store under session defaults an operator chose for other programs.

The board is designed for READ COMMITTED behind its board lock. A database whose
default isolation is SERIALIZABLE (`ALTER DATABASE ... SET`), or a URL whose
`options` ask for REPEATABLE READ, must change nothing: six real processes drain
a board with no driver error, no refusal, each task completed once. A deadlock
the server breaks by aborting the store's transaction is retried; a read-only
default and a tiny statement timeout are coded refusals, never a traceback.
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pg_cluster
import pg_stress_workers
import pytest
from store_backends import PostgresBoard

from agent17 import EventKind, PostgresTaskStore, TaskError, TaskStatus
from agent17.armour import pg_connection, pg_schema
from agent17.team.mailbox import MailboxError
from agent17.team.pg_mailbox import PostgresMailbox

WORKERS = 6
TASKS = 120
WAIT_SECONDS = 120.0
spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def board() -> Iterator[PostgresBoard]:
    made = PostgresBoard(pg_cluster.server())
    try:
        yield made
    finally:
        # A database's own defaults outlive its schemas: the next test reusing it must
        # not inherit them.
        with made.server.admin() as connection:
            connection.execute(f"ALTER DATABASE {made.dbname} RESET ALL")
        made.close_all()


@pytest.fixture
def processes() -> Iterator[list[BaseProcess]]:
    """Started children; any still alive at the end (a failed test) are killed, not leaked."""
    started: list[BaseProcess] = []
    yield started
    for process in started:
        if process.is_alive():
            process.kill()
        process.join(WAIT_SECONDS)


def with_options(board: PostgresBoard, options: str) -> str:
    """The board's `postgresql://` URL with libpq `options` (a space in a value escaped)."""
    return board.server.url(board.dbname) + "&options=" + urllib.parse.quote(options, safe="")


def database_default(setting: str, value: str) -> Callable[[PostgresBoard], str]:
    def attack(board: PostgresBoard) -> str:
        with board.server.admin() as connection:
            connection.execute(f"ALTER DATABASE {board.dbname} SET {setting} = '{value}'")
        return board.server.url(board.dbname)

    return attack


def url_option(setting: str, value: str) -> Callable[[PostgresBoard], str]:
    def attack(board: PostgresBoard) -> str:
        return with_options(board, f"-c {setting}={value.replace(' ', chr(92) + ' ')}")

    return attack


ISOLATION_ATTACKS = {
    "the database defaults to serializable": (
        database_default("default_transaction_isolation", "serializable"),
        "serializable",
    ),
    "the url's options ask for repeatable read": (
        url_option("default_transaction_isolation", "repeatable read"),
        "repeatable read",
    ),
}


def session_setting(dsn: str, setting: str) -> str:
    """What a plain session on `dsn` gets: proof that the attack is in place."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        ((value,),) = connection.execute(f"SHOW {setting}").fetchall()
    return str(value)


def build_dag(store: PostgresTaskStore, size: int, seed: int) -> dict[str, tuple[str, ...]]:
    """`size` tasks, most of them waiting on one or two of the ten made just before."""
    rng = random.Random(seed)
    deps: dict[str, tuple[str, ...]] = {}
    for n in range(size):
        older = list(deps)[-10:]
        blocked_by = rng.sample(older, min(len(older), rng.choice((0, 1, 1, 2))))
        deps[store.create_task(f"T{n}", blocked_by=blocked_by).id] = tuple(blocked_by)
    return deps


@pytest.mark.processes
@pytest.mark.parametrize("attack", list(ISOLATION_ATTACKS))
def test_six_processes_drain_the_board_cleanly_whatever_isolation_the_session_defaults_to(
    attack: str, board: PostgresBoard, processes: list[BaseProcess]
) -> None:
    make, expected = ISOLATION_ATTACKS[attack]
    dsn = make(board)
    assert session_setting(dsn, "default_transaction_isolation") == expected
    store = PostgresTaskStore(dsn)  # the parent runs under the same default
    try:
        deps = build_dag(store, TASKS, seed=606)
        barrier = spawn.Barrier(WORKERS + 1)
        results = spawn.Queue()
        for n in range(WORKERS):
            process = spawn.Process(
                target=pg_stress_workers.drain_counting,
                args=(("postgres", dsn), f"worker-{n}", barrier, results),
                name=f"worker-{n}",
            )
            process.start()
            processes.append(process)
        barrier.wait(WAIT_SECONDS)
        reports = [results.get(timeout=WAIT_SECONDS) for _ in range(WORKERS)]
        for process in processes:
            process.join(WAIT_SECONDS)
            assert process.exitcode == 0, f"{process.name} exited with {process.exitcode}"

        completed, failures, examples = pg_stress_workers.tally(reports)
        assert not failures, f"{dict(failures)}; for example {examples}"
        assert Counter(completed) == Counter(list(deps)), "a task not completed exactly once"
        events = store.events()
        assert [event.sequence for event in events] == list(range(1, len(events) + 1))
        by_task: dict[str, list[Any]] = {task: [] for task in deps}
        for event in events:
            by_task[event.task_id].append(event)
        for task, its_events in by_task.items():
            kinds = [event.kind for event in its_events]
            assert kinds == [EventKind.CREATED, EventKind.CLAIMED, EventKind.COMPLETED], task
            assert its_events[1].claim_token == its_events[2].claim_token
            for dependency in deps[task]:
                assert by_task[dependency][2].sequence < its_events[1].sequence
        assert all(task.status is TaskStatus.COMPLETED for task in store.list_tasks())
    finally:
        store.close()
    assert board.integrity_problems() == []


@pytest.mark.parametrize("attack", list(ISOLATION_ATTACKS))
def test_every_transaction_and_dedicated_session_runs_at_read_committed(
    attack: str, board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, expected = ISOLATION_ATTACKS[attack]
    dsn = make(board)
    assert session_setting(dsn, "default_transaction_isolation") == expected
    isolation = "SELECT current_setting('transaction_isolation')"
    seen: dict[str, str] = {}
    real_open_schema = pg_connection.open_schema

    def recording_open_schema(tx: Any, schema: Any, *args: Any, **kwargs: Any) -> None:
        ((seen[f"the check of {schema.what}"],),) = tx.execute(isolation).fetchall()
        real_open_schema(tx, schema, *args, **kwargs)

    monkeypatch.setattr(pg_connection, "open_schema", recording_open_schema)
    store = PostgresTaskStore(dsn)
    mailbox = PostgresMailbox(dsn)
    session = store._db.session("test")
    try:
        ((seen["a board operation"],),) = store._db.transaction(
            lambda tx: tx.execute(isolation).fetchall(), opening="SELECT 1"
        )
        ((seen["a mailbox read"],),) = mailbox.snapshot(
            lambda connection: connection.execute(isolation).fetchall()
        )
        ((seen["a mailbox write"],),) = mailbox.transaction(
            lambda handle: handle.connection.execute(isolation).fetchall()
        )
        ((seen["a statement on a dedicated session"],),) = session.execute(isolation).fetchall()
    finally:
        session.close()
        mailbox.close()
        store.close()
    assert len(seen) == 6, seen
    assert set(seen.values()) == {"read committed"}, seen


def poll(connection: Any, sql: str, params: Any, until: Callable[[Any], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not until(connection.execute(sql, params).fetchall()):
        assert time.monotonic() < deadline, f"never: {sql}"
        time.sleep(0.002)


WAITING_FOR_A_LOCK_SQL = "SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted"
A_STORE_WAITING_SQL = """
SELECT 1 FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
 WHERE a.datname = current_database() AND a.application_name = 'agent17' AND NOT l.granted
"""


class DeadlockOnce:
    """A clock that, once armed, holds the store inside its transaction until a deadlock is set.

    The store calls the clock with the board lock held. The other session holds the
    task's row and now waits for the board lock; the store, let go, waits for the
    row: a cycle, which the server breaks by aborting the store's transaction (its
    deadlock check runs first: it is the later waiter, with the shorter timeout).
    """

    def __init__(self, board: PostgresBoard) -> None:
        from agent17.deterministic import ManualClock

        self._clock = ManualClock()
        self._board = board
        self.calls = 0
        self.armed_for: int | None = None
        self.inside = threading.Event()

    def __call__(self) -> Any:
        self.calls += 1
        other, self.armed_for = self.armed_for, None
        if other is not None:
            self.inside.set()
            with self._board.server.admin(self._board.dbname) as watcher:
                poll(watcher, WAITING_FOR_A_LOCK_SQL, (other,), bool)
        return self._clock()


def deadlocking(board: PostgresBoard) -> tuple[PostgresTaskStore, DeadlockOnce, str, str]:
    """A store whose deadlock check runs after 10 ms, with task A claimed."""
    clock = DeadlockOnce(board)
    dsn = with_options(board, "-c deadlock_timeout=10ms")  # superuser's to set
    store = PostgresTaskStore(dsn, clock=clock)
    task = store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None
    return store, clock, task.id, claim.claim_token


def complete_across_a_deadlock(
    board: PostgresBoard, store: PostgresTaskStore, clock: DeadlockOnce, task: str, token: str
) -> list[Any]:
    """complete_task(task) meeting one deadlock; returns [its result or its exception]."""
    outcome: list[Any] = []
    with board.connection() as other:
        other.execute("SET deadlock_timeout = '1h'")
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM tasks WHERE id = %s FOR UPDATE", (task,))
        clock.armed_for = other.info.backend_pid

        def complete() -> None:
            try:
                outcome.append(store.complete_task(task, "alice", token))
            except Exception as error:
                outcome.append(error)

        worker = threading.Thread(target=complete)
        worker.start()
        assert clock.inside.wait(WAIT_SECONDS)
        # Granted only once the store's transaction is gone: it could not commit, since
        # its UPDATE waited for the row this session holds.
        other.execute("SELECT pg_advisory_xact_lock(board_lock_key())")
        other.execute("COMMIT")
        worker.join(WAIT_SECONDS)
    return outcome


def test_a_transaction_the_server_aborts_to_break_a_deadlock_runs_again_and_succeeds(
    board: PostgresBoard,
) -> None:
    store, clock, task, token = deadlocking(board)
    try:
        calls_before = clock.calls
        (outcome,) = complete_across_a_deadlock(board, store, clock, task, token)
        assert not isinstance(outcome, Exception), outcome
        assert outcome.task.status is TaskStatus.COMPLETED
        assert clock.calls - calls_before == 2  # the aborted transaction, and the one again
        kinds = [event.kind for event in store.events()]
        assert kinds == [EventKind.CREATED, EventKind.CLAIMED, EventKind.COMPLETED]
    finally:
        store.close()


def test_a_deadlock_past_the_retries_is_store_unavailable_and_changes_nothing(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_connection, "CONFLICT_RETRIES", 0)
    store, clock, task, token = deadlocking(board)
    try:
        before = (store.list_tasks(), store.events())
        (outcome,) = complete_across_a_deadlock(board, store, clock, task, token)
        assert isinstance(outcome, TaskError), outcome
        assert outcome.code == "store_unavailable"
        assert "deadlock" in outcome.message and "nothing was changed" in outcome.message
        assert (store.list_tasks(), store.events()) == before
        store.complete_task(task, "alice", token)  # the claim still holds
    finally:
        store.close()


# -- other session defaults an operator may set ----------------------------------------------

READ_ONLY_ATTACKS = {
    "the database defaults to read-only": database_default("default_transaction_read_only", "on"),
    "the url's options ask for read-only": url_option("default_transaction_read_only", "on"),
}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent17", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize("attack", list(READ_ONLY_ATTACKS))
def test_a_read_only_default_is_a_coded_refusal_and_the_board_is_left_as_it_is(
    attack: str, board: PostgresBoard, tmp_path: Path
) -> None:
    store = board.raw_store()
    store.create_task("A")
    url = READ_ONLY_ATTACKS[attack](board)
    assert session_setting(url, "default_transaction_read_only") == "on"
    done = cli("board", "--store", url, cwd=tmp_path)  # a fresh process: the whole check
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("agent17: store_unavailable:") and "read-only" in line, line
    # This process has the schema's reference already, so the open only reads.
    read_only = PostgresTaskStore(url)
    try:
        for action in (
            lambda: read_only.create_task("B"),
            lambda: read_only.claim_next("bob"),
            lambda: PostgresMailbox(url),  # the team's tables cannot be made
        ):
            with pytest.raises((TaskError, MailboxError)) as refused:
                action()
            assert refused.value.code == "store_unavailable"
            assert "read-only" in refused.value.message
    finally:
        read_only.close()
    assert [task.subject for task in store.list_tasks()] == ["A"]


def test_a_tiny_statement_timeout_is_store_unavailable_wherever_it_strikes(
    board: PostgresBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    PostgresTaskStore(board.dsn).close()
    codes: Counter[str] = Counter()
    for milliseconds in (1, 2, 3, 5, 8, 13, 21) * 5:
        # A new reference each time: the timeout may strike inside its savepoint too.
        monkeypatch.setattr(pg_schema, "_REFERENCES", {})
        url = with_options(board, f"-c statement_timeout={milliseconds}")
        try:
            with PostgresTaskStore(url) as store:
                store.create_task("A")
                store.list_tasks()
            codes["worked"] += 1
        except TaskError as error:
            assert error.code == "store_unavailable", error
            assert "cancel" in error.message and "nothing was changed" in error.message, error
            codes[error.code] += 1
    assert codes["store_unavailable"] > 0, codes  # the timeout did strike


def test_a_tiny_idle_in_transaction_timeout_or_lock_timeout_in_the_url_changes_nothing(
    board: PostgresBoard,
) -> None:
    url = with_options(board, "-c idle_in_transaction_session_timeout=1 -c lock_timeout=1")
    assert session_setting(url, "lock_timeout") == "1ms"
    with PostgresTaskStore(url) as store, PostgresMailbox(url) as mailbox:
        ((idle, lock),) = store._db.transaction(
            lambda tx: tx.execute(
                "SELECT current_setting('idle_in_transaction_session_timeout'),"
                " current_setting('lock_timeout')"
            ).fetchall()
        )
        assert (idle, lock) == ("1min", "30s")  # the store's own, over the URL's
        task = store.create_task("A")
        claimed: list[Any] = []
        with board.write_lock_held(), board.server.admin(board.dbname) as watcher:
            worker = threading.Thread(target=lambda: claimed.append(store.claim_next("alice")))
            worker.start()
            # Waiting for the board lock far longer than 1 ms, and still waiting.
            poll(watcher, A_STORE_WAITING_SQL, (), bool)
        worker.join(WAIT_SECONDS)
        (claim,) = claimed
        assert claim is not None and claim.task.id == task.id
        store.complete_task(task.id, "alice", claim.claim_token)
        mailbox.send("bob", sender="alice", kind="message", body="hi")
        assert mailbox.unacked_count("bob") == 1
