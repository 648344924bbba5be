"""Ctrl-C while a PostgreSQL board is being opened: always KeyboardInterrupt, nothing left behind.

The open connects, configures the session and checks the schema (inside a
transaction, with savepoints). An interrupt inside a libpq call leaves the
connection in a state nobody knows, so no savepoint may be rolled back on it:
the transaction's clean-up rolls it back whole or drops the connection. (A
ROLLBACK TO SAVEPOINT there failed with "another command is already in
progress", or was read as a foreign version table, and hid the interrupt.)

A child process opens a board again and again while a SIGINT lands at moments
that sweep the whole open; the CLI is stopped while it provably waits inside
the check, on a lock the test holds. And a process's first open, which imports
the PostgreSQL modules and psycopg, is interrupted at moments that sweep those
imports: the next open in the same process must work.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_cluster
import pg_interrupt_workers
import pytest
from store_backends import PostgresBoard

from agent17 import PostgresMailbox, PostgresTaskStore
from agent17.armour.pg_schema import SCHEMA_CHANGE_LOCK

WAIT_SECONDS = 120.0
spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def board() -> Iterator[PostgresBoard]:
    made = PostgresBoard(pg_cluster.server())
    PostgresTaskStore(made.dsn).close()  # a board to check, not one to make
    PostgresMailbox(made.dsn).close()
    yield made
    made.close_all()


@pytest.mark.processes
@pytest.mark.parametrize(
    ("runs", "fresh_reference"),
    [(200, True), (100, False)],
    ids=["building the schema's reference each time", "with the reference built"],
)
def test_ctrl_c_at_any_moment_of_opening_a_board_is_a_keyboard_interrupt_leaving_nothing(
    board: PostgresBoard, runs: int, fresh_reference: bool
) -> None:
    results = spawn.Queue()
    child = spawn.Process(
        target=pg_interrupt_workers.open_under_interrupts,
        args=(board.dsn, board.dsn, runs, fresh_reference, results),
    )
    child.start()
    try:
        kind, outcomes, examples = results.get(timeout=WAIT_SECONDS * 3)
        child.join(WAIT_SECONDS)
    finally:
        if child.is_alive():
            child.kill()
            child.join(WAIT_SECONDS)
    assert kind == "done", examples
    assert set(outcomes) <= {"interrupted", "opened"}, f"{outcomes}: {examples}"
    # The sweep must really land inside the open, not after it.
    assert outcomes.get("interrupted", 0) >= runs // 4, outcomes
    assert child.exitcode == 0


# -- the CLI, stopped while it waits inside the schema check -----------------------------------

WAITING_SQL = """
SELECT a.pid, a.query FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
 WHERE a.datname = current_database() AND a.application_name = 'agent17' AND NOT l.granted
"""
LEFT_SQL = """
SELECT (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'agent17'),
       (SELECT count(*) FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
         WHERE a.datname = current_database() AND a.application_name = 'agent17')
"""


def hold_schema_change_lock(connection: Any) -> str:
    connection.execute("SELECT pg_advisory_lock(%s, %s)", SCHEMA_CHANGE_LOCK)
    return "pg_advisory_xact_lock"


def hold_version_index(connection: Any) -> str:
    # The index alone: the catalog reads before the savepoint never open it, the planner
    # of the version read does. REINDEX holds it exclusively until this transaction ends.
    connection.execute("BEGIN")
    connection.execute("REINDEX INDEX agent17.task_metadata_pkey")
    return "SELECT value FROM task_metadata"


def poll(connection: Any, sql: str, done: Any) -> Any:
    """Run `sql` until `done(rows)`, or fail at the deadline."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        rows = connection.execute(sql).fetchall()
        if done(rows):
            return rows
        assert time.monotonic() < deadline, f"still {rows}"
        time.sleep(0.002)


@pytest.mark.parametrize(
    "hold",
    [hold_schema_change_lock, hold_version_index],
    ids=["at the schema-change lock", "reading the version row in its savepoint"],
)
def test_ctrl_c_while_the_board_cli_waits_inside_the_schema_check_exits_130_leaving_nothing(
    board: PostgresBoard, hold: Any
) -> None:
    with board.server.admin(board.dbname) as holder, board.server.admin(board.dbname) as watcher:
        waits_in = hold(holder)
        cli = subprocess.Popen(
            [sys.executable, "-m", "agent17", "board", "--store", board.server.url(board.dbname)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ((_, query),) = poll(watcher, WAITING_SQL, bool)
            assert query.startswith(waits_in) or waits_in in query, query
            cli.send_signal(signal.SIGINT)
            _, err = cli.communicate(timeout=WAIT_SECONDS)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
        assert cli.returncode == 130, err
        assert err.strip().splitlines() == [
            "agent17: interrupted; every finished transaction is on disk"
        ], err
        poll(watcher, LEFT_SQL, lambda rows: rows == [(0, 0)])
        holder.execute("SELECT pg_advisory_unlock_all()")
        holder.execute("ROLLBACK")


# -- Ctrl-C during a process's first open, which imports the driver ---------------------------

FIRST_OPEN_MOMENTS = 24


@pytest.mark.processes
@pytest.mark.parametrize("name", ["PostgresTaskStore", "PostgresMailbox"])
def test_ctrl_c_during_the_first_open_of_a_process_leaves_the_next_open_working(
    board: PostgresBoard, name: str
) -> None:
    worker = Path(__file__).with_name("pg_first_import_worker.py")
    done = subprocess.run(
        [sys.executable, str(worker), board.dsn, name, str(FIRST_OPEN_MOMENTS)],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 3,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    trials = json.loads(done.stdout)
    assert len(trials) == FIRST_OPEN_MOMENTS
    # Every interrupt was raised inside the first open and reached its caller ...
    missed = [
        trial for trial in trials if (trial["raised"], trial["first"]) != (True, "interrupted")
    ]
    assert missed == []
    # ... and left nothing half imported: the same process opens the board again.
    broken = [f"at event {t['moment']}: {t['second']}" for t in trials if t["second"] != "opened"]
    assert broken == []
