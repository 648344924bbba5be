"""Exercises on taking work atomically: the conditional update, and `claim_one` under a real race.

The table is the smallest board there is:

    jobs(id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)   -- status: pending | taken

`claim_one` is checked the way the store is tested: first in one process,
then by several worker processes started together on one file, each taking
jobs until none is left. The checker's connection is a real
`sqlite3.Connection` (autocommit, WAL, a busy timeout) that widens the gap
between look and take on purpose: each worker's first SELECT waits until every
worker has made its first SELECT (unless the connection already holds the
write lock, as after BEGIN IMMEDIATE, when nobody else can look anyway), and
every SELECT pauses a little. A look-then-take that is not one step for
everyone else therefore loses the race on every run, always on job 1, so the
feedback is the same text every time.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Self

from agent17.exercises._bounded import FORK_AVAILABLE, CheckResult, raised

WORKERS: Final = 4
JOBS: Final = 24
PAUSE_AFTER_SELECT_SECONDS: Final = 0.004
# Only a candidate that makes others wait without SQLite's write lock (a file lock, say)
# ever waits this long at the first look; a racy one arrives there together.
FIRST_LOOK_TIMEOUT_SECONDS: Final = 3.0
BUSY_TIMEOUT_SECONDS: Final = 10.0
ROUND_TIMEOUT_SECONDS: Final = 40.0

ClaimOne = Callable[[sqlite3.Connection, str], "int | None"]
TakeIfPending = Callable[[sqlite3.Connection, int, str], bool]


class SlowSelectConnection(sqlite3.Connection):
    """A real connection that widens any gap between look and take (see the module docstring).

    It also counts the UPDATEs that changed no row, so that the feedback can tell
    "two steps, both wrote" from "one wrote, the other did not look at rowcount".
    Statements run through `execute` or through a `cursor()` are treated alike.
    """

    missed_updates = 0
    first_look: Any = None  # in a race: the barrier every worker's first SELECT meets
    _writing = False  # this transaction holds the write lock

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
        elif verb == "SELECT":
            time.sleep(PAUSE_AFTER_SELECT_SECONDS)
            barrier, self.first_look = self.first_look, None
            # Holding the write lock, waiting would only hold everyone else up.
            if barrier is not None and not (self.in_transaction and self._writing):
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(FIRST_LOOK_TIMEOUT_SECONDS)
        if not self.in_transaction:
            self._writing = False


class _SlowCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        cursor = super().execute(sql, parameters)
        connection = self.connection
        if isinstance(connection, SlowSelectConnection):
            connection.after_statement(sql, cursor.rowcount)
        return cursor


def make_jobs(path: Path, jobs: int, taken: frozenset[int] = frozenset()) -> None:
    """A fresh jobs table: ids 1..`jobs`; those in `taken` are already taken by 'earlier'."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)"
        )
        connection.executemany(
            "INSERT INTO jobs VALUES (?, ?, ?)",
            [
                (n, "taken" if n in taken else "pending", "earlier" if n in taken else None)
                for n in range(1, jobs + 1)
            ],
        )
    finally:
        connection.close()


def open_checked(path: Path) -> SlowSelectConnection:
    """The connection a candidate gets: autocommit, WAL, a busy timeout, slow after SELECT."""
    connection = sqlite3.connect(
        path,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_SECONDS,
        factory=SlowSelectConnection,
    )
    connection.execute("PRAGMA journal_mode = WAL")
    return connection


def read_jobs(path: Path) -> dict[int, tuple[str, str | None]]:
    """Every job's (status, owner), read straight from the file."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        rows = connection.execute("SELECT id, status, owner FROM jobs ORDER BY id").fetchall()
    finally:
        connection.close()
    return {job: (status, owner) for job, status, owner in rows}


# -- claim_one -------------------------------------------------------------------------


def claim_one_starter(connection: sqlite3.Connection, owner: str) -> int | None:
    """Take the lowest-id pending job for `owner` and return its id (None if there is none)."""
    # The earlier lesson's way: look, then take. What can happen in between?
    row = connection.execute(
        "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    connection.execute("UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?", (owner, row[0]))
    return int(row[0])


def claim_one_solution(connection: sqlite3.Connection, owner: str) -> int | None:
    """Take the lowest-id pending job for `owner` and return its id (None if there is none)."""
    # BEGIN IMMEDIATE takes the write lock before the first read: look and take are
    # one step for everyone else. (One UPDATE ... RETURNING would be one step too.)
    connection.execute("BEGIN IMMEDIATE")
    try:
        row = connection.execute(
            "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1"
        ).fetchone()
        if row is not None:
            connection.execute(
                "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?", (owner, row[0])
            )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return None if row is None else int(row[0])


CLAIM_ONE_HINT = (
    "Between your SELECT and your UPDATE another process can run the same SELECT and see the"
    " same job. Make the look and the take one step for everyone else: start a write"
    " transaction before you read (BEGIN IMMEDIATE ... COMMIT), or do it all in one statement"
    " (UPDATE jobs SET ... WHERE id = (SELECT ... LIMIT 1) RETURNING id). Roll back if"
    " anything fails, and return only an id you really took."
)


def _sequential(candidate: ClaimOne, folder: Path) -> str | None:
    path = folder / "alone.sqlite3"
    make_jobs(path, 6, taken=frozenset({1, 4}))
    connection = open_checked(path)
    got: list[int | None] = []
    try:
        for _ in range(5):
            try:
                got.append(candidate(connection, "alice"))
            except Exception as error:
                return f"with one process and no race, {raised(error)}"
            if connection.in_transaction:
                return (
                    f"after your call {len(got)} a transaction was still open: every BEGIN"
                    " needs its COMMIT (or ROLLBACK), or no one else can ever write"
                )
    finally:
        connection.close()
    jobs = read_jobs(path)
    if got[:4] != [2, 3, 5, 6]:
        return (
            f"alone on a board where jobs 2, 3, 5 and 6 are pending, you took {got[:4]}: take"
            " the lowest pending id each time (ORDER BY id), and only pending ones"
        )
    if got[4] is not None:
        return f"with nothing left pending you returned {got[4]!r}: return None"
    wrong = [job for job in (2, 3, 5, 6) if jobs[job] != ("taken", "alice")]
    if wrong:
        return f"you returned job {wrong[0]} but the table says {jobs[wrong[0]]}"
    if jobs[1] != ("taken", "earlier") or jobs[4] != ("taken", "earlier"):
        return "you changed a job that was already taken by someone else"
    return None


Report = tuple[list[int], str | None, int]  # jobs it said it got, its error, missed UPDATEs


def _race_worker(
    candidate: ClaimOne, path: str, owner: str, barriers: tuple[Any, Any], out: str
) -> None:
    taken: list[int] = []
    error: str | None = None
    connection: SlowSelectConnection | None = None
    start, first_look = barriers
    try:
        connection = open_checked(Path(path))
        connection.first_look = first_look
        start.wait(ROUND_TIMEOUT_SECONDS)
        for _ in range(JOBS + 1):
            job = candidate(connection, owner)
            if job is None:
                break
            taken.append(int(job))
    except BaseException as failure:
        error = raised(failure)
    finally:
        missed = 0 if connection is None else connection.missed_updates
        # A file, written before the process ends: nothing in flight is lost at exit.
        Path(out).write_text(json.dumps([taken, error, missed]), encoding="utf-8")
        os._exit(0)


def _race(candidate: ClaimOne, folder: Path) -> str | None:
    path = folder / "race.sqlite3"
    make_jobs(path, JOBS)
    # fork: a candidate defined in a notebook cell is in every worker, as it is.
    context: Any = multiprocessing.get_context("fork" if FORK_AVAILABLE else "spawn")
    barriers = (context.Barrier(WORKERS), context.Barrier(WORKERS))
    names = ("bob", "carol", "dave", "erin", "frank", "grace")[:WORKERS]
    outs = {name: folder / f"{name}.json" for name in names}
    workers = [
        context.Process(
            target=_race_worker, args=(candidate, str(path), name, barriers, str(outs[name]))
        )
        for name in names
    ]
    for worker in workers:
        worker.start()
    try:
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
        for worker in workers:
            worker.join(max(deadline - time.monotonic(), 0.0))
        if any(worker.is_alive() for worker in workers):
            return (
                f"{WORKERS} processes racing did not finish within {ROUND_TIMEOUT_SECONDS:g} s:"
                " is a transaction left open somewhere, or a loop that never ends?"
            )
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join(10)
    reports: dict[str, Report] = {}
    for name, out in outs.items():
        if not out.exists():
            return f"{name}'s process ended without a word (did your code end the process?)"
        taken, error, missed = json.loads(out.read_text(encoding="utf-8"))
        reports[name] = (list(taken), error, int(missed))
    return _judge_race(reports, read_jobs(path))


def _judge_race(reports: dict[str, Report], jobs: dict[int, tuple[str, str | None]]) -> str | None:
    # Name only what the widened window makes the same on every run: the first job, and
    # who failed or was told what about it, never who happened to write last.
    failed = [owner for owner, (_, error, _) in sorted(reports.items()) if error is not None]
    if failed:
        error = str(reports[failed[0]][1])
        locked = "locked" in error or "busy" in error.lower()
        advice = (
            " With a plain BEGIN a reader cannot always become a writer: SQLite answers"
            " 'database is locked' at once instead of waiting. Take the write lock"
            " first: BEGIN IMMEDIATE."
            if locked
            else ""
        )
        who = "one of them failed" if len(failed) == 1 else f"{len(failed)} of them failed"
        return f"while {WORKERS} processes raced, {who}: {error}.{advice}"
    said: dict[int, list[str]] = {}
    for owner, (taken, _, _) in sorted(reports.items()):
        for job in taken:
            said.setdefault(job, []).append(owner)
    for job, owners in sorted(said.items()):
        holder = jobs[job][1]
        wrongly_told = [owner for owner in owners if owner != holder]
        if not wrongly_told:
            continue
        if len(owners) > 1 and all(reports[owner][2] == 0 for owner in owners):
            who = f"{', '.join(owners[:-1])} and {owners[-1]}"
            every = "both" if len(owners) == 2 else "all"
            return (
                f"{who} {every} got job {job}: your SELECT and UPDATE are two separate steps, so"
                " one looked while another had not written yet, and each wrote. Make them one"
                " transaction (BEGIN IMMEDIATE ... COMMIT) or one statement."
            )
        if len(owners) > 1:
            return (
                f"{len(owners)} processes were told they got job {job}, but the table gives it"
                f" to one of them: the UPDATE of the other {len(wrongly_told)} changed no row"
                " (someone was first), yet your code returned the id. Return an id only when"
                " the cursor's rowcount is 1."
            )
        return (
            f"{wrongly_told[0]} was told it got job {job}, but the table says it is {holder}'s:"
            " your UPDATE changed no row for it (someone was first), yet you returned the id."
            " Return an id only when the cursor's rowcount is 1."
        )
    pending = [job for job, (status, _) in jobs.items() if status == "pending"]
    if pending:
        return (
            f"the processes stopped while job {pending[0]} was still pending: a job was lost"
            " (did a call return None while work was left?)"
        )
    unreported = [job for job in jobs if job not in said]
    if unreported:
        job = unreported[0]
        return f"job {job} is marked taken by {jobs[job][1]}, but no call returned it"
    return None


def check_claim_one(candidate: ClaimOne) -> CheckResult:
    """One process, then a race of several processes: each job to exactly one caller."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        problem = _sequential(candidate, Path(folder))
        if problem is not None:
            return CheckResult(False, problem)
        problem = _race(candidate, Path(folder))
        if problem is not None:
            return CheckResult(False, problem)
    return CheckResult(
        True,
        f"{WORKERS} processes started together took {JOBS} jobs, each exactly once, with no"
        " error, every id returned was really taken by its caller, and alone it took the"
        " lowest pending id each time.",
    )


# -- take_if_pending: the conditional update and its rowcount ---------------------------


def take_if_pending_starter(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """Take job `job_id` for `owner` only if it is still pending; True if you took it."""
    connection.execute("UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?", (owner, job_id))
    return True


def take_if_pending_solution(connection: sqlite3.Connection, job_id: int, owner: str) -> bool:
    """Take job `job_id` for `owner` only if it is still pending; True if you took it."""
    # The condition is part of the write: a job someone else took is simply not matched,
    # and rowcount says whether the row changed.
    cursor = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'",
        (owner, job_id),
    )
    return cursor.rowcount == 1


TAKE_IF_PENDING_HINT = (
    "Put the condition into the UPDATE itself (... WHERE id = ? AND status = 'pending'), so a"
    " job someone else took is not matched at all, and answer with what the database did:"
    " cursor.rowcount is 1 when your UPDATE changed the row and 0 when it did not."
)


def check_take_if_pending(candidate: TakeIfPending) -> CheckResult:
    """Pending: taken and True. Taken by someone else: untouched and False. Missing: False."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        path = Path(folder) / "jobs.sqlite3"
        make_jobs(path, 3, taken=frozenset({2}))
        connection = open_checked(path)
        try:
            answers = {}
            for job in (1, 2, 9):
                answers[job] = candidate(connection, job, "carol")
        except Exception as error:
            return CheckResult(False, raised(error))
        finally:
            connection.close()
        jobs = read_jobs(path)
    if jobs[2] != ("taken", "earlier"):
        return CheckResult(
            False,
            f"job 2 was already taken by 'earlier', and now the table says {jobs[2]}: you took"
            " someone else's job. Your UPDATE needs the condition status = 'pending'.",
        )
    if answers[2] is not False:
        return CheckResult(
            False,
            f"for job 2, taken by someone else, you answered {answers[2]!r}: the caller would"
            " now do work that is not theirs. Answer from the cursor's rowcount.",
        )
    if answers[9] is not False:
        return CheckResult(False, f"for job 9, which does not exist, you answered {answers[9]!r}")
    if jobs[1] != ("taken", "carol") or answers[1] is not True:
        return CheckResult(
            False,
            f"job 1 was pending: it should now be ('taken', 'carol') and your answer True; the"
            f" table says {jobs[1]} and you answered {answers[1]!r}",
        )
    if jobs[3] != ("pending", None):
        return CheckResult(False, "you changed job 3, which nobody asked for")
    return CheckResult(
        True,
        "the pending job was taken and you said so; the job someone else had was left alone"
        " and you said no; the missing job was a no.",
    )
