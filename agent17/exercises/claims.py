"""Exercises on taking work atomically: the conditional update, and `claim_one` under a real race.

The table is the smallest board there is:

    jobs(id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)   -- status: pending | taken

`claim_one` is checked the way the store is tested: first in one process,
then by several worker processes started together on one file, each taking
jobs until none is left (the table, the checker's connection and the race are
in `_jobs`). `take_if_pending` gets the same connection, and on one of its jobs
another writer takes the row between the candidate's SELECT and its next
statement: a look-then-write is caught by what it did, not by how it reads.
"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from agent17.exercises._bounded import CheckResult, raised
from agent17.exercises._jobs import (
    ClaimOne,
    Report,
    make_jobs,
    open_checked,
    read_jobs,
    run_race,
)

# Notebook 04 shows the checker's connection from here, the claim exercises' own module.
from agent17.exercises._jobs import SlowSelectConnection as SlowSelectConnection

WORKERS: Final = 4
JOBS: Final = 24

TakeIfPending = Callable[[sqlite3.Connection, int, str], bool]


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
    "Play the starter in your head with two processes: where can the second one slip in"
    " between the first one's look and its take? You have met two ways of making a look and a"
    " take one step that nobody can come between. And when a job you wanted is gone, is"
    " there really nothing left to take?"
)


def _sequential(candidate: ClaimOne, folder: Path) -> str | None:
    path = folder / "alone.sqlite3"
    make_jobs(path, 6, taken={1: "earlier", 4: "earlier"})
    connection = open_checked(path)
    got: list[int | None] = []
    took_first = 0  # how many jobs the first call took for alice
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
            if len(got) == 1:
                took_first = sum(owner == "alice" for _, owner in read_jobs(path).values())
    finally:
        connection.close()
    jobs = read_jobs(path)
    odd = [answer for answer in got if answer is not None and type(answer) is not int]
    if odd:
        return (
            f"alone, one of your calls returned {odd[0]!r} ({type(odd[0]).__name__}):"
            " return the job's id as an int (or None), not the row or the cursor"
        )
    if took_first > 1:
        return (
            f"alone on a board where jobs 2, 3, 5 and 6 are pending, your first call returned"
            f" {got[0]!r} but the table says it took {took_first} jobs for alice. One call"
            " takes one job: which rows does your UPDATE match?"
        )
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


def judge_race(reports: dict[str, Report], jobs: dict[int, tuple[str, str | None]]) -> str | None:
    """What went wrong in a race, in words (None: each job went to exactly one caller)."""
    # Name only what the widened window makes the same on every run: the first job, and
    # who failed or was told what about it, never who happened to write last.
    failed = [owner for owner, report in sorted(reports.items()) if report.error is not None]
    if failed:
        error = str(reports[failed[0]].error)
        locked = "locked" in error or "busy" in error.lower()
        advice = (
            " With a plain BEGIN a reader cannot always become a writer: SQLite answers"
            " 'database is locked' at once instead of waiting. Take the write lock"
            " first: BEGIN IMMEDIATE."
            if locked
            else ""
        )
        who = "one of them failed" if len(failed) == 1 else f"{len(failed)} of them failed"
        return f"while {len(reports)} processes raced, {who}: {error}.{advice}"
    said: dict[int, list[str]] = {}
    for owner, report in sorted(reports.items()):
        for job in report.taken:
            said.setdefault(job, []).append(owner)
    for job, owners in sorted(said.items()):
        holder = jobs[job][1]
        wrongly_told = [owner for owner in owners if owner != holder]
        if not wrongly_told:
            continue
        if len(owners) > 1 and all(reports[owner].missed_updates == 0 for owner in owners):
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
    if any(report.none_while_pending for report in reports.values()):
        return (
            "a call returned None while jobs were still pending: None means that no job is"
            " pending at all. Losing one job to someone faster is no reason to stop: what is"
            " still there to take?"
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


_THREAD_LOCKS: Final = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
)


def _uses_a_thread_lock(candidate: Any) -> bool:
    """Whether the candidate reaches a threading lock: a global it names, a closure, a default."""
    code = getattr(candidate, "__code__", None)
    names = code.co_names if code is not None else ()
    scope = getattr(candidate, "__globals__", {})
    seen = [scope[name] for name in names if name in scope]
    seen += [cell.cell_contents for cell in getattr(candidate, "__closure__", None) or ()]
    seen += list(getattr(candidate, "__defaults__", None) or ())
    return any(isinstance(value, _THREAD_LOCKS) for value in seen)


LOCK_DOES_NOT_CROSS: Final = (
    "Your code holds a threading lock: it keeps out the other threads of one process, but the"
    f" {WORKERS} workers are processes, each with its own copy of the lock, so it keeps no"
    " other worker out. Only something all processes share can: the database itself."
)


def _race_problem(candidate: ClaimOne, folder: Path) -> str | None:
    outcome = run_race(candidate, folder, WORKERS, JOBS)
    if isinstance(outcome, str):
        return outcome
    return judge_race(*outcome)


def check_claim_one(candidate: ClaimOne) -> CheckResult:
    """One process, then a race of several processes: each job to exactly one caller."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        problem = _sequential(candidate, Path(folder))
        if problem is None:
            problem = _race_problem(candidate, Path(folder))
    if problem is not None:
        if _uses_a_thread_lock(candidate):
            problem = f"{LOCK_DOES_NOT_CROSS}\n{problem}"
        return CheckResult(False, problem)
    return CheckResult(
        True,
        f"{WORKERS} processes started together took {JOBS} jobs, each exactly once, with no"
        " error, every id returned was really taken by its caller, no call gave up while work"
        " was left, and alone it took the lowest pending id each time.",
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
    "What if someone else takes the job after you looked and before you write? Let the write"
    " itself decide whether the job is still pending, and answer from what the database says"
    " the write did, not from what you saw earlier."
)


RIVAL: Final = "erin"
CONTESTED_JOB: Final = 4
ALREADY_CAROLS: Final = 5  # taken by carol herself before the check: this call takes nothing


def _rival_takes(path: Path, job: int, took: list[bool]) -> Callable[[], None]:
    """Another writer that takes `job` if it can get the write lock at once (else: no harm);
    `took` gets True if it did."""

    def take() -> None:
        rival = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            cursor = rival.execute(
                "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'",
                (RIVAL, job),
            )
            took.append(cursor.rowcount == 1)
        except sqlite3.OperationalError:
            pass  # the candidate holds the write lock: nobody can come between, as it should be
        finally:
            rival.close()

    return take


def check_take_if_pending(candidate: TakeIfPending) -> CheckResult:
    """Pending: taken and True. Taken by someone else, or by the caller before: untouched and
    False. Missing: False.
    And a pending job that a rival takes right after the candidate looked: erin's, and False."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        path = Path(folder) / "jobs.sqlite3"
        make_jobs(path, ALREADY_CAROLS, taken={2: "earlier", ALREADY_CAROLS: "carol"})
        connection = open_checked(path)
        try:
            answers: dict[int, Any] = {}
            for job in (1, 2, ALREADY_CAROLS, 9):
                answers[job] = candidate(connection, job, "carol")
            took: list[bool] = []
            connection.interfere = _rival_takes(path, CONTESTED_JOB, took)
            try:
                answers[CONTESTED_JOB] = candidate(connection, CONTESTED_JOB, "carol")
            except sqlite3.OperationalError as error:
                if any(took) and "locked" in str(error):
                    return CheckResult(False, _stale_snapshot(error))
                raise
            contested = any(took)  # the rival took the job between a SELECT and what followed
        except Exception as error:
            return CheckResult(False, raised(error))
        finally:
            connection.close()
        jobs = read_jobs(path)
    problem = _judge_take(answers, jobs, contested)
    if problem is not None:
        return CheckResult(False, problem)
    return CheckResult(
        True,
        "the pending job was taken and you said so; the job someone else had was left alone"
        " and you said no; the job carol already held was a no; the missing job was a no; and"
        " the job another writer took just after you looked stayed theirs.",
    )


def _stale_snapshot(error: sqlite3.OperationalError) -> str:
    return (
        f"job {CONTESTED_JOB} was pending when you looked, but before your UPDATE another"
        f" writer ({RIVAL}) took it. Your transaction had already read, so SQLite refused your"
        f" write ({raised(error)}): what you read was stale (the snapshot of notebook 2). A"
        " plain BEGIN does not keep anyone from writing between your look and your write;"
        " a write that checks the job's status itself, as it writes, needs no look first."
    )


def _judge_take(
    answers: dict[int, Any], jobs: dict[int, tuple[str, str | None]], contested: bool
) -> str | None:
    if jobs[2] != ("taken", "earlier"):
        return (
            f"job 2 was already taken by 'earlier', and now the table says {jobs[2]}: you took"
            " someone else's job. Your UPDATE must not touch a job that is not pending."
        )
    if contested and jobs[CONTESTED_JOB] != ("taken", RIVAL):
        return (
            f"job {CONTESTED_JOB} was pending when you looked, but before your UPDATE another"
            f" writer ({RIVAL}) took it, and your UPDATE wrote over {RIVAL}'s claim: the table"
            f" now says {jobs[CONTESTED_JOB]}. What you read is already old when you write;"
            " only a condition inside the UPDATE is checked at the moment of writing."
        )
    numbers = {job: answer for job, answer in answers.items() if not isinstance(answer, bool)}
    if numbers and all(isinstance(answer, int) for answer in numbers.values()):
        job, answer = next(iter(sorted(numbers.items())))
        return (
            f"for job {job} you returned {answer!r}, an int (the cursor's rowcount?): rowcount"
            " is 1 when your UPDATE changed the row and 0 when it changed none, but"
            " take_if_pending must return a bool, True or False, not a number. Turn the"
            " rowcount into the answer to 'did this call take it?'"
        )
    if numbers:
        job, answer = next(iter(sorted(numbers.items())))
        return f"for job {job} you returned {answer!r}: answer True or False"
    if answers[2] is not False:
        return (
            "for job 2, taken by someone else, you answered True: the caller would now do work"
            " that is not theirs. Answer with what your UPDATE did, not with what you hoped."
        )
    if answers[9] is not False:
        return "for job 9, which does not exist, you answered True"
    if answers[ALREADY_CAROLS] is not False:
        return (
            f"for job {ALREADY_CAROLS}, which carol already held before this call, you answered"
            " True: this call took nothing, and a True would have carol start the job a second"
            " time. Who holds a job now does not say whether this call took it; what your"
            " UPDATE did does."
        )
    if jobs[ALREADY_CAROLS] != ("taken", "carol"):
        return (
            f"job {ALREADY_CAROLS} was carol's before the call, and now the table says"
            f" {jobs[ALREADY_CAROLS]}: a job that is not pending must be left as it is"
        )
    if jobs[1] == ("taken", "carol") and answers[1] is False:
        return (
            "job 1 was pending, and your UPDATE took it (the table says ('taken', 'carol')),"
            " yet you answered False: how does your code learn what its UPDATE changed? (With"
            " RETURNING, sqlite3 counts a row in rowcount only once you have fetched it.)"
        )
    if jobs[1] != ("taken", "carol") or answers[1] is not True:
        return (
            f"job 1 was pending: it should now be ('taken', 'carol') and your answer True; the"
            f" table says {jobs[1]} and you answered {answers[1]!r}"
        )
    expected = (RIVAL, False) if contested else ("carol", True)
    if jobs[CONTESTED_JOB] != ("taken", expected[0]) or answers[CONTESTED_JOB] is not expected[1]:
        return (
            f"job {CONTESTED_JOB}: the table says {jobs[CONTESTED_JOB]} and you answered"
            f" {answers[CONTESTED_JOB]!r}; "
            + (
                f"{RIVAL} took it after you looked, so the answer is False"
                if contested
                else "it was pending and nobody else wrote, so it should be carol's and True"
            )
        )
    if jobs[3] != ("pending", None):
        return "you changed job 3, which nobody asked for"
    return None
