"""The jobs table the claim exercises race on, the checker's connection, and the race itself.

    jobs(id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)   -- status: pending | taken

The checker's connection is a real `sqlite3.Connection` (autocommit, WAL, a
busy timeout) that widens the gap between look and take on purpose: each
worker's first SELECT waits until every worker has made its first SELECT
(unless the connection already holds the write lock, as after BEGIN IMMEDIATE,
when nobody else can look anyway; then the wait comes when that transaction
ends, if it wrote nothing: a look made under the lock and taken after it is two
steps too), and every SELECT pauses a little. A look-then-take that is not one
step for everyone else therefore loses the race on every run, always on job 1,
so the feedback is the same text every time.

`run_race` is shared by claim_one's check (its last step, after the schedules)
and by `race_claim_one`, the notebook's race of a student's own claim.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Self

from agent17.exercises._bounded import raised

PAUSE_AFTER_SELECT_SECONDS: Final = 0.004
# Only a candidate that makes others wait without SQLite's write lock (a file lock, say)
# ever waits this long at the first look; a racy one arrives there together.
FIRST_LOOK_TIMEOUT_SECONDS: Final = 3.0
BUSY_TIMEOUT_SECONDS: Final = 10.0
ROUND_TIMEOUT_SECONDS: Final = 40.0
WORKER_NAMES: Final = ("bob", "carol", "dave", "erin", "frank", "grace")
FIRST_WRITE: Final = (
    " With a plain BEGIN a reader cannot always become a writer: SQLite answers 'database is"
    " locked' at once instead of waiting. Take the write lock first: BEGIN IMMEDIATE."
)
"""The advice for a claim refused with 'database is locked' (a read that tried to write)."""

ClaimOne = Callable[[sqlite3.Connection, str], "int | None"]


class SlowSelectConnection(sqlite3.Connection):
    """A real connection that widens any gap between look and take (see the module docstring).

    It also counts the UPDATEs that changed no row, so that the feedback can tell
    "two steps, both wrote" from "one wrote, the other did not look at rowcount".
    Statements run through `execute` or through a `cursor()` are treated alike.
    """

    missed_updates = 0
    first_look: Any = None  # in a race: the barrier every worker's first SELECT meets
    _writing = False  # this transaction holds the write lock
    # The first look was made holding the write lock: its barrier waits for the lock's end.
    _held_look: Any = None

    # Any: typeshed spells cursor() as two overloads, and one signature serves both here.
    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or _SlowCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor()
        return cursor.execute(sql, parameters)

    def after_statement(self, sql: str, rowcount: int) -> None:
        """Note who holds the write lock and which UPDATEs missed; hold every SELECT a little."""
        words = sql.lstrip().upper().split(None, 2)
        verb = words[0] if words else ""
        if verb == "BEGIN":
            self._writing = len(words) > 1 and words[1] in ("IMMEDIATE", "EXCLUSIVE")
        elif verb in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            if verb == "UPDATE" and rowcount == 0:
                self.missed_updates += 1
            self._writing = True
            self._held_look = None  # look and take in one write transaction: one step
        elif verb == "SELECT":
            time.sleep(PAUSE_AFTER_SELECT_SECONDS)
            barrier, self.first_look = self.first_look, None
            if barrier is not None and self.in_transaction and self._writing:
                # Holding the write lock, waiting would only hold everyone else up; but if
                # the lock is let go before anything is written, the look was not protected
                # after all, and the wait comes then.
                self._held_look = barrier
            elif barrier is not None:
                _meet(barrier)
        if not self.in_transaction:
            self._writing = False
            barrier, self._held_look = self._held_look, None
            if barrier is not None:
                _meet(barrier)


def _meet(barrier: Any) -> None:
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(FIRST_LOOK_TIMEOUT_SECONDS)


class _SlowCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        connection = self.connection
        cursor = super().execute(sql, parameters)
        if isinstance(connection, SlowSelectConnection):
            connection.after_statement(sql, cursor.rowcount)
        return cursor


def make_jobs(path: Path, jobs: int, taken: Mapping[int, str] | None = None) -> None:
    """A fresh jobs table: ids 1..`jobs`; those in `taken` are already taken, by its owner."""
    taken = taken or {}
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)"
        )
        connection.executemany(
            "INSERT INTO jobs VALUES (?, ?, ?)",
            [(n, "taken" if n in taken else "pending", taken.get(n)) for n in range(1, jobs + 1)],
        )
    finally:
        connection.close()


def open_checked(path: Path) -> SlowSelectConnection:
    """The connection a candidate gets: autocommit, WAL, a busy timeout, slow after SELECT.

    A SELECT without ORDER BY returns its rows in reverse of the order SQLite would
    happen to use (PRAGMA reverse_unordered_selects): "the lowest id" must be asked
    for, not left to the table's or an index's order.
    """
    connection = sqlite3.connect(
        path,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_SECONDS,
        factory=SlowSelectConnection,
    )
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA reverse_unordered_selects = ON")
    return connection


def open_alone(path: Path) -> sqlite3.Connection:
    """The connection a candidate gets when it runs alone: autocommit, WAL, unordered SELECTs
    reversed (see `open_checked`)."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=0)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA reverse_unordered_selects = ON")
    return connection


def read_jobs(path: Path) -> dict[int, tuple[str, str | None]]:
    """Every job's (status, owner), read straight from the file."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        rows = connection.execute("SELECT id, status, owner FROM jobs ORDER BY id").fetchall()
    finally:
        connection.close()
    return {job: (status, owner) for job, status, owner in rows}


@dataclass(frozen=True, slots=True)
class Report:
    """What one racing worker said: the jobs its calls returned, its error, and its misses."""

    taken: list[int]
    error: str | None
    missed_updates: int  # UPDATEs of its that changed no row
    none_while_pending: bool  # a call of its returned None while a job was still pending


def _pending_left(path: str) -> bool:
    connection = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_SECONDS)
    try:
        row = connection.execute("SELECT 1 FROM jobs WHERE status = 'pending' LIMIT 1").fetchone()
    finally:
        connection.close()
    return row is not None


def _race_worker(
    candidate: ClaimOne, path: str, owner: str, barriers: tuple[Any, Any], out: str, jobs: int
) -> None:
    # A forked kernel's stdout is the parent's socket: what the candidate prints stays here.
    sys.stdout = sys.stderr = io.StringIO()
    taken: list[int] = []
    error: str | None = None
    gave_up = False
    connection: SlowSelectConnection | None = None
    start, first_look = barriers
    try:
        connection = open_checked(Path(path))
        connection.first_look = first_look
        start.wait(ROUND_TIMEOUT_SECONDS)
        for _ in range(jobs + 1):
            job = candidate(connection, owner)
            if job is None:
                # Pending jobs only ever become fewer: one seen now was pending at the None.
                gave_up = _pending_left(path)
                break
            taken.append(int(job))
    except BaseException as failure:
        error = raised(failure)
    finally:
        missed = 0 if connection is None else connection.missed_updates
        # A file, written before the process ends: nothing in flight is lost at exit.
        Path(out).write_text(json.dumps([taken, error, missed, gave_up]), encoding="utf-8")
        os._exit(0)


RaceOutcome = tuple[dict[str, Report], dict[int, tuple[str, str | None]]]


def run_race(candidate: ClaimOne, folder: Path, workers: int, jobs: int) -> str | RaceOutcome:
    """`workers` processes started together each call `candidate` until it returns None.

    The answer: what each worker said and the table afterwards, or why the race
    could not be judged (a hang, a worker that ended without a word).
    """
    path = folder / "race.sqlite3"
    make_jobs(path, jobs)
    # fork: a candidate defined in a notebook cell is in every worker, as it is.
    context: Any = multiprocessing.get_context("fork")
    barriers = (context.Barrier(workers), context.Barrier(workers))
    names = WORKER_NAMES[:workers]
    outs = {name: folder / f"{name}.json" for name in names}
    processes = [
        context.Process(
            target=_race_worker,
            args=(candidate, str(path), name, barriers, str(outs[name]), jobs),
        )
        for name in names
    ]
    for process in processes:
        process.start()
    try:
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
        for process in processes:
            process.join(max(deadline - time.monotonic(), 0.0))
        if any(process.is_alive() for process in processes):
            return (
                f"{workers} processes racing did not finish within {ROUND_TIMEOUT_SECONDS:g} s:"
                " is a transaction left open somewhere, or a loop that never ends?"
            )
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(10)
    reports: dict[str, Report] = {}
    for name, out in outs.items():
        if not out.exists():
            return f"{name}'s process ended without a word (did your code end the process?)"
        taken, error, missed, gave_up = json.loads(out.read_text(encoding="utf-8"))
        reports[name] = Report([int(job) for job in taken], error, int(missed), bool(gave_up))
    return reports, read_jobs(path)
