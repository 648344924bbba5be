"""Exercises on taking work atomically: the conditional update, and `claim_one` among racers.

The table is the smallest board there is:

    jobs(id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT)   -- status: pending | taken

Both checkers explore the race schedule by schedule (`schedules`, with the
jobs table's scenarios and rules in `_job_races`): two workers, every
interleaving of their statements with at most two preemptions, then seeded
schedules of three, on a real SQLite file with SQLite's real locking. The
first schedule that breaks the rule is shrunk and shown as a timeline. Each
checker also runs the candidate alone, where a mistake needs no race to show.
On CPython, `claim_one` is then raced by four OS processes started together
on one file (`race`): the lesson's race, with real processes.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Final

from agent17.browser import IN_BROWSER
from agent17.exercises._bounded import Checker, CheckResult, raised
from agent17.exercises._job_races import ClaimWorld, JobsScenario, TakeWorld, jobs_template
from agent17.exercises._jobs import ClaimOne, make_jobs, open_alone, read_jobs

# Notebook 04 shows the race's connection from here, the claim exercises' own module.
from agent17.exercises._jobs import SlowSelectConnection as SlowSelectConnection
from agent17.exercises.race import JOBS, WORKERS, race_problem
from agent17.exercises.schedules import Exploration, explore_race, listed, to_plain, verdict

WHO: Final = "the workers"

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
    "Play the starter in your head with two workers: where can the second one slip in"
    " between the first one's look and its take? You have met two ways of making a look and a"
    " take one step that nobody can come between. And when a job you wanted is gone, is"
    " there really nothing left to take?"
)


def _sequential(candidate: ClaimOne, folder: Path) -> str | None:
    path = folder / "alone.sqlite3"
    make_jobs(path, 6, taken={1: "earlier", 4: "earlier"})
    connection = open_alone(path)
    got: list[int | None] = []
    took_first = 0  # how many jobs the first call took for alice
    try:
        for _ in range(5):
            try:
                got.append(candidate(connection, "alice"))
            except Exception as error:
                return f"with one worker and no race, {raised(error)}"
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
    if got[0] is None and took_first == 1:
        return (
            "alone on a board where jobs 2, 3, 5 and 6 are pending, your first call took a job"
            " (the table says so) but returned None: how does your code learn what its UPDATE"
            " changed? (With RETURNING, sqlite3 counts a row in rowcount only once you have"
            " fetched it.)"
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


CLAIM_BOUND: Final = (
    "every schedule of alice and bob with at most 2 preemptions, on 1 job and on 2 jobs;"
    " then seeded schedules of alice, bob and carol on 3 jobs"
)


def explore_claim_one(candidate: ClaimOne, folder: Path) -> Exploration | str:
    """claim_one's race, schedule by schedule: each worker calls it until it returns None."""

    def scenario(workers: tuple[str, ...], jobs: int) -> JobsScenario:
        name = f"{listed(workers)}, {jobs} job{'' if jobs == 1 else 's'}"
        return JobsScenario(
            name, workers, jobs_template(folder, jobs), folder, candidate, ClaimWorld
        )

    pair, trio = ("alice", "bob"), ("alice", "bob", "carol")
    return explore_race(
        candidate,
        [scenario(pair, 1), scenario(pair, 2)],
        [scenario(trio, 3)],
        bound=CLAIM_BOUND,
        seed="claim_one",
        who=WHO,
    )


def run_claim_one(candidate: ClaimOne) -> dict[str, Any]:
    """Where the candidate runs: alone, then the schedules, then (CPython) processes.

    Plain data only: the first problem found alone, the exploration (`to_plain`), and
    the process race's problem (None: it held; no key: not run, as in the browser).
    """
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        alone = _sequential(candidate, Path(folder))
        if alone is not None:
            return {"alone": alone}
        exploration = explore_claim_one(candidate, Path(folder))
        data: dict[str, Any] = {"schedules": to_plain(exploration)}
        held = not isinstance(exploration, str) and exploration.broken is None
        if held and not IN_BROWSER:
            data["processes"] = race_problem(candidate, Path(folder))
    return data


def judge_claim_one(data: Any) -> CheckResult:
    """claim_one's verdict, from `run_claim_one`'s plain data alone."""
    if data.get("alone") is not None:
        return CheckResult(False, str(data["alone"]))
    if data.get("processes") is not None:
        return CheckResult(False, str(data["processes"]))
    processes = (
        f"; and {WORKERS} processes started together took {JOBS} jobs, each exactly once"
        if "processes" in data
        else ""
    )
    return verdict(
        data["schedules"],
        "each job went to exactly one caller, every id returned was really taken by its"
        " caller, no call gave up while work was left, and nothing raised; alone it took the"
        f" lowest pending id each time{processes}.",
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

ALREADY_CAROLS: Final = 5  # taken by carol herself before the check: this call takes nothing
ALONE_JOBS: Final = (1, 2, ALREADY_CAROLS, 9)  # pending, someone else's, carol's, missing
TAKE_BOUND: Final = (
    "every schedule with at most 2 preemptions of carol with erin taking job 1 the right way,"
    " and of carol and dave; then seeded schedules of carol, dave and frank; all on job 1"
)


def explore_take_if_pending(candidate: Any, folder: Path) -> Exploration | str:
    """take_if_pending's race on job 1: against a rival who takes it right, then among callers."""
    template = jobs_template(folder, 1)

    def scenario(name: str, workers: tuple[str, ...], rival: str | None = None) -> JobsScenario:
        return JobsScenario(name, workers, template, folder, candidate, TakeWorld, rival)

    return explore_race(
        candidate,
        [
            scenario("carol, with erin taking job 1", ("carol", "erin"), rival="erin"),
            scenario("carol and dave, both on job 1", ("carol", "dave")),
        ],
        [scenario("carol, dave and frank, all on job 1", ("carol", "dave", "frank"))],
        bound=TAKE_BOUND,
        seed="take_if_pending",
        who=WHO,
    )


def run_take_if_pending(candidate: Any) -> dict[str, Any]:
    """Where the candidate runs: the schedules on one job, then the calls alone.

    Alone it is called on every kind of job: pending (True, and taken), someone else's,
    already the caller's, missing (False, and untouched). Plain data only.
    """
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        exploration = explore_take_if_pending(candidate, Path(folder))
        data: dict[str, Any] = {"schedules": to_plain(exploration)}
        if isinstance(exploration, str) or exploration.broken is not None:
            return data
        path = Path(folder) / "alone.sqlite3"
        make_jobs(path, ALREADY_CAROLS, taken={2: "earlier", ALREADY_CAROLS: "carol"})
        connection = open_alone(path)
        try:
            answers = {job: candidate(connection, job, "carol") for job in ALONE_JOBS}
        except Exception as error:
            data["alone"] = f"alone, {raised(error)}"
        else:
            data["alone"] = _judge_take(answers, read_jobs(path))
        finally:
            connection.close()
    return data


def judge_take_if_pending(data: Any) -> CheckResult:
    """take_if_pending's verdict, from `run_take_if_pending`'s plain data alone."""
    if data.get("alone") is not None:
        return CheckResult(False, str(data["alone"]))
    return verdict(
        data["schedules"],
        "nobody's claim was written over, and each call said True exactly when it took the"
        " job. Alone, the pending job was taken and you said so; the job someone else had was"
        " left alone and you said no; the job carol already held was a no; the missing job"
        " was a no.",
    )


def _judge_take(answers: dict[int, Any], jobs: dict[int, tuple[str, str | None]]) -> str | None:
    if jobs[2] != ("taken", "earlier"):
        return (
            f"job 2 was already taken by 'earlier', and now the table says {jobs[2]}: you took"
            " someone else's job. Your UPDATE must not touch a job that is not pending."
        )
    odd = {job: answer for job, answer in answers.items() if not isinstance(answer, bool)}
    if odd:
        job, answer = next(iter(sorted(odd.items())))
        return f"alone, for job {job} you returned {answer!r}: answer True or False"
    if answers[2]:
        return (
            "for job 2, taken by someone else, you answered True: the caller would now do work"
            " that is not theirs. Answer with what your UPDATE did, not with what you hoped."
        )
    if answers[9]:
        return "for job 9, which does not exist, you answered True"
    if answers[ALREADY_CAROLS]:
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
    if jobs[1] != ("taken", "carol") or answers[1] is not True:
        return (
            f"job 1 was pending: it should now be ('taken', 'carol') and your answer True; the"
            f" table says {jobs[1]} and you answered {answers[1]!r}"
        )
    if jobs[3] != ("pending", None):
        return "you changed job 3, which nobody asked for"
    return None


CLAIM_ONE_CHECK: Final = Checker(run_claim_one, judge_claim_one)
TAKE_IF_PENDING_CHECK: Final = Checker(run_take_if_pending, judge_take_if_pending)
