"""claim_one and take_if_pending, schedule by schedule: the jobs table's scenarios and rules.

Each scenario is a few workers on one jobs file (copied fresh for every
schedule), each with its own scheduled connection. After every step the rules
read the table through a connection of their own and look at what the step's
worker did and what its call returned:

- claim_one: a job told to two workers, an id the table does not give its
  caller, a `None` while a job is pending, a raised error; at the end a job
  left pending or taken without its caller being told;
- take_if_pending: a job taken over someone else's claim, True from a call that
  did not take the job, False from one that did (or that left it pending), a
  raised error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.exercises._bounded import raised
from agent17.exercises._jobs import FIRST_WRITE, make_jobs
from agent17.exercises.schedules import (
    FileLocks,
    Problem,
    Run,
    ScheduledConnection,
    Worker,
    World,
    WriteLock,
    listed,
    open_scheduled,
    played,
)

Table = dict[int, tuple[str, str | None]]

CONTESTED: Final = 1  # take_if_pending's scenarios all want job 1
RIVAL_TAKES: Final = (
    "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'"
)
ROWCOUNT: Final = "Return an id only when the cursor's rowcount is 1."


def _busy(error: BaseException) -> bool:
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def _both(names: list[str]) -> str:
    """ "bob and alice were both" / "bob, alice and carol were all"."""
    return f"{listed(names)} were {'both' if len(names) == 2 else 'all'}"


@dataclass(frozen=True, slots=True)
class JobsScenario:
    """Workers on a jobs file: `name` in words, the file to copy, the rules to play it by."""

    name: str
    workers: tuple[str, ...]
    template: Path
    folder: Path
    candidate: Callable[..., Any]
    rules: Callable[[JobsScenario, Run], World]
    rival: str | None = None  # take_if_pending: a worker who takes the job the right way

    def world(self, run: Run) -> World:
        """A fresh world for one schedule."""
        return self.rules(self, run)


def jobs_template(folder: Path, pending: int) -> Path:
    """A jobs file with `pending` pending jobs, made once, copied for every schedule."""
    path = folder / f"template-{pending}.sqlite3"
    if not path.exists():
        make_jobs(path, pending)
    return path


class _JobsWorld(World):
    """One schedule's jobs file, the workers' connections, and a connection to judge with."""

    def __init__(self, scenario: JobsScenario, run: Run) -> None:
        self.scenario = scenario
        self.run = run
        self.path = scenario.folder / "schedule.sqlite3"
        for leftover in (self.path, *(Path(f"{self.path}{s}") for s in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
        shutil.copyfile(scenario.template, self.path)
        run.hide(f"{scenario.folder}{os.sep}")
        self.write_lock = WriteLock(self.path)
        self.reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.reader.execute("PRAGMA synchronous = OFF")
        self.connections: list[ScheduledConnection] = [
            open_scheduled(self.path, run, self.write_lock) for _ in scenario.workers
        ]
        self.locks = FileLocks(run)
        self._played = contextlib.ExitStack()
        self._played.enter_context(played(self.locks))
        self.answers: list[tuple[str, Any]] = []
        self._judged = 0
        self._errors_judged: set[str] = set()

    def table(self) -> Table:
        """Every job's (status, owner), read now."""
        rows = self.reader.execute("SELECT id, status, owner FROM jobs ORDER BY id").fetchall()
        return {job: (status, owner) for job, status, owner in rows}

    def finish(self, worker: Worker) -> None:
        """The worker's process ends: its connection closes, its file locks go."""
        self.connections[worker.index].close()
        self.locks.release_all(worker.name)

    def answered(self, worker: Worker, answer: Any) -> None:
        """A call of the running worker returned `answer`."""
        self.run.record("returns", "", repr(answer))
        self.answers.append((worker.name, answer))

    def new_answers(self) -> list[tuple[str, Any]]:
        """The answers not judged yet, oldest first."""
        fresh = self.answers[self._judged :]
        self._judged = len(self.answers)
        return fresh

    def new_error(self) -> tuple[str, Exception] | None:
        """A worker's raised error not judged yet."""
        for worker in self.run.workers:
            if worker.error is not None and worker.name not in self._errors_judged:
                self._errors_judged.add(worker.name)
                return worker.name, worker.error
        return None

    def close(self) -> None:
        """Close every connection and give flock and lockf back."""
        for connection in self.connections:
            connection.close()
        self.reader.close()
        self.write_lock.close()
        self._played.close()


class ClaimWorld(_JobsWorld):
    """claim_one: each worker calls it until it returns None (at most one call per job, +1)."""

    def __init__(self, scenario: JobsScenario, run: Run) -> None:
        super().__init__(scenario, run)
        self.jobs = len(self.table())
        self.told: dict[int, list[str]] = {}

    def script(self, worker: Worker) -> None:
        """Call claim_one until it returns None."""
        connection = self.connections[worker.index]
        try:
            for _ in range(self.jobs + 1):
                answer = self.scenario.candidate(connection, worker.name)
                self.answered(worker, answer)
                if answer is None:
                    break
        finally:
            self.finish(worker)

    def after_step(self) -> Problem | None:
        """A raised error, or an answer the table does not bear out."""
        self.locks.sweep()
        failed = self.new_error()
        if failed is not None:
            name, error = failed
            advice = FIRST_WRITE if _busy(error) else ""
            return Problem("raised", f"{name}'s call failed: {raised(error)}.{advice}")
        for name, answer in self.new_answers():
            problem = self._answer(name, answer)
            if problem is not None:
                return problem
        return None

    def _answer(self, name: str, answer: Any) -> Problem | None:
        table = self.table()
        if answer is None:
            pending = [job for job, (status, _) in table.items() if status == "pending"]
            if not pending:
                return None
            return Problem(
                "none-while-pending",
                f"{name}'s call returned None while jobs were still pending (job {pending[0]}"
                " was): None means that no job is pending at all. Losing one job to someone"
                " faster is no reason to stop: what is still there to take?",
            )
        if type(answer) is not int:
            return Problem(
                "not-an-id",
                f"{name}'s call returned {answer!r} ({type(answer).__name__}): return the"
                " job's id as an int (or None), not the row or the cursor",
            )
        told = self.told.setdefault(answer, [])
        told.append(name)
        if answer not in table:
            return Problem("no-such-job", f"{name} was told job {answer}, which is no job")
        status, owner = table[answer]
        if len(told) > 1:
            return Problem("told-twice", self._twice(answer, told, owner))
        if (status, owner) != ("taken", name):
            return Problem(
                "not-theirs",
                f"{name} was told it got job {answer}, but the table says {(status, owner)}:"
                f" its UPDATE changed no row (someone was first), yet your code returned the"
                f" id. {ROWCOUNT}",
            )
        return None

    def _twice(self, job: int, told: list[str], owner: str | None) -> str:
        missed = [
            name
            for name in told
            if self.connections[self.scenario.workers.index(name)].missed_updates
        ]
        if not missed:
            return (
                f"{_both(told)} told they got job {job}: your SELECT and UPDATE are two"
                " separate steps, so one worker looked while another had not written yet, and"
                " each wrote. Make them one transaction (BEGIN IMMEDIATE ... COMMIT) or one"
                " statement."
            )
        return (
            f"{_both(told)} told they got job {job}, but the table gives it to {owner}:"
            f" the UPDATE of {listed(missed)} changed no row (someone was first), yet"
            f" your code returned the id. {ROWCOUNT}"
        )

    def at_end(self) -> Problem | None:
        """No job left pending, and every taken job returned to the worker holding it."""
        table = self.table()
        pending = [job for job, (status, _) in table.items() if status == "pending"]
        if pending:
            return Problem(
                "lost",
                f"every worker stopped while job {pending[0]} was still pending: a job was lost"
                " (did a call return None while work was left, or take a job and not keep it?)",
            )
        for job, (_, owner) in table.items():
            if owner not in self.told.get(job, []):
                return Problem(
                    "untold",
                    f"job {job} is marked taken by {owner}, but no call of {owner}'s returned"
                    " it: one call takes one job, and says which",
                )
        return None


class TakeWorld(_JobsWorld):
    """take_if_pending: each worker calls it once on job 1; a rival takes it the right way."""

    def __init__(self, scenario: JobsScenario, run: Run) -> None:
        super().__init__(scenario, run)
        self.before = self.table()
        self.took: set[str] = set()

    def script(self, worker: Worker) -> None:
        """One call on the contested job (the rival: one conditional UPDATE)."""
        connection = self.connections[worker.index]
        try:
            if worker.name == self.scenario.rival:
                connection.execute(RIVAL_TAKES, (worker.name, CONTESTED))
            else:
                self.answered(worker, self.scenario.candidate(connection, CONTESTED, worker.name))
        finally:
            self.finish(worker)

    def after_step(self) -> Problem | None:
        """What the step did to the table, then what the calls answered."""
        self.locks.sweep()
        now = self.table()
        mover = self.run.last.name if self.run.last is not None else ""
        for job, was in self.before.items():
            if now[job] != was:
                problem = self._moved(mover, job, was, now[job])
                if problem is not None:
                    return problem
        self.before = now
        failed = self.new_error()
        if failed is not None:
            return Problem("raised", self._failed(*failed))
        for name, answer in self.new_answers():
            problem = self._answer(name, answer, now[CONTESTED])
            if problem is not None:
                return problem
        return None

    def _moved(
        self, mover: str, job: int, was: tuple[str, str | None], now: tuple[str, str | None]
    ) -> Problem | None:
        if was[0] == "pending" and now == ("taken", mover):
            self.took.add(mover)
            return None
        if was[0] == "taken" and now[1] != was[1]:
            return Problem(
                "overwrote",
                f"job {job} was already {was[1]}'s when {mover}'s UPDATE ran, and it wrote over"
                f" {was[1]}'s claim: {mover} took someone else's job (the table now says"
                f" {now}). What you read is already old when you write; only a condition inside"
                " the UPDATE is checked at the moment of writing.",
            )
        return Problem(
            "changed",
            f"{mover} changed job {job} from {was} to {now}: take a job as ('taken', owner),"
            " and only while it is pending",
        )

    def _failed(self, name: str, error: Exception) -> str:
        if not _busy(error):
            return f"{name}'s call failed: {raised(error)}"
        return (
            f"{name}'s transaction had already read job {CONTESTED} when it tried to write, and"
            f" another writer wrote in between, so SQLite refused the write at once"
            f" ({raised(error)}): what {name} read was stale (the snapshot of notebook 2). A"
            " plain BEGIN does not keep anyone from writing between your look and your write;"
            " a write that checks the job's status itself, as it writes, needs no look first."
        )

    def _answer(self, name: str, answer: Any, job: tuple[str, str | None]) -> Problem | None:
        if isinstance(answer, int) and not isinstance(answer, bool):
            return Problem(
                "not-a-bool",
                f"{name}'s call returned {answer!r}, an int (the cursor's rowcount?): rowcount is"
                " 1 when your UPDATE changed the row and 0 when it changed none, but"
                " take_if_pending must return a bool, True or False, not a number. Turn the"
                " rowcount into the answer to 'did this call take it?'",
            )
        if not isinstance(answer, bool):
            return Problem("not-a-bool", f"{name}'s call returned {answer!r}: answer True or False")
        if answer and name not in self.took:
            return Problem(
                "true-not-taken",
                f"{name}'s call answered True, but it did not take job {CONTESTED}: the table"
                f" says {job}. The caller would now do work that is not theirs. Answer with what"
                " your UPDATE did, not with what you hoped.",
            )
        if not answer and name in self.took:
            return Problem(
                "false-taken",
                f"job {CONTESTED} was pending, and in {name}'s call your UPDATE took it (the"
                f" table says {job}), yet you answered False: how does your code learn what its"
                " UPDATE changed? (With RETURNING, sqlite3 counts a row in rowcount only once"
                " you have fetched it.)",
            )
        if not answer and job[0] == "pending":
            return Problem(
                "false-pending",
                f"job {CONTESTED} was pending and nobody else took it, yet {name}'s call"
                " answered False and left it pending: a pending job is there to be taken",
            )
        return None
