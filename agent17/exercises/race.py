"""Race a claim from several OS processes at once: claim_one's last check, and `race_claim_one`.

    from agent17.exercises import race_claim_one

    race_claim_one(claim_one)      # the table: each job, and how many workers were told they got it

The workers (bob, carol, dave, ...) are real processes started together (a
barrier) on one SQLite file, each with the checker's connection, and each
calls your `claim_one(connection, owner)` until it returns None. The result
shows, job by job, how many workers were told "you got it" and whether the
table's owner is one of them. Which worker took which job changes from run to
run, so the shown table names no worker; `by_worker()` tells, for the curious.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.exercises._jobs import FIRST_WRITE, WORKER_NAMES, ClaimOne, Report, run_race

MAX_JOBS: Final = 200
WORKERS: Final = 4  # claim_one's check: processes started together...
JOBS: Final = 24  # ...taking this many jobs until none is left


def judge_race(reports: dict[str, Report], jobs: dict[int, tuple[str, str | None]]) -> str | None:
    """What went wrong in a race, in words (None: each job went to exactly one caller)."""
    # Name only what the widened window makes the same on every run: the first job, and
    # who failed or was told what about it, never who happened to write last.
    failed = [owner for owner, report in sorted(reports.items()) if report.error is not None]
    if failed:
        error = str(reports[failed[0]].error)
        locked = "locked" in error or "busy" in error.lower()
        advice = FIRST_WRITE if locked else ""
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


def race_problem(candidate: ClaimOne, folder: Path) -> str | None:
    """What went wrong when WORKERS processes raced for JOBS jobs (None: nothing did)."""
    outcome = run_race(candidate, folder, WORKERS, JOBS)
    if isinstance(outcome, str):
        return outcome
    return judge_race(*outcome)


@dataclass(frozen=True, slots=True)
class ClaimRace:
    """What a race of one `claim_one` from several processes did.

    `told`: job id -> the workers whose call returned it; `table`: job id ->
    (status, owner) read from the file afterwards; `problems`: what went wrong,
    in words (empty when `ok`).
    """

    workers: tuple[str, ...]
    told: dict[int, tuple[str, ...]]
    table: dict[int, tuple[str, str | None]]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every job went to exactly one worker, the table agrees, nothing failed or was lost."""
        return not self.problems

    @property
    def double_taken(self) -> tuple[int, ...]:
        """The jobs that more than one worker was told it got."""
        return tuple(job for job, owners in sorted(self.told.items()) if len(owners) > 1)

    def by_worker(self) -> dict[str, list[int]]:
        """Each worker's jobs (this changes from run to run: the scheduler decides)."""
        jobs: dict[str, list[int]] = {name: [] for name in self.workers}
        for job, owners in sorted(self.told.items()):
            for owner in owners:
                jobs[owner].append(job)
        return jobs

    def __str__(self) -> str:
        lines = [
            f"{len(self.workers)} worker processes started together on one file,"
            f" {len(self.table)} job{'' if len(self.table) == 1 else 's'}:",
            "job  status   told 'you got it'  table's owner among them",
        ]
        for job, (status, owner) in sorted(self.table.items()):
            told = self.told.get(job, ())
            among = "yes" if owner is not None and owner in told else "no"
            lines.append(f"{job:>3}  {status:<7}  {len(told):>17}  {among}")
        if self.ok:
            lines.append(
                f"OK: each of the {len(self.table)} jobs went to exactly one of"
                f" {len(self.workers)} workers, and the table agrees."
            )
        else:
            if self.double_taken:
                shown = ", ".join(str(job) for job in self.double_taken)
                lines.append(f"DOUBLE TAKE: more than one worker was told it got job(s) {shown}.")
            else:  # a double take says it all; anything else is said in words
                lines += [f"FAILED: {problem}" for problem in self.problems]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def race_claim_one(claim_one: ClaimOne, workers: int = 4, jobs: int = 12) -> ClaimRace:
    """Race `claim_one` from `workers` processes (2 to 6) on a fresh file of `jobs` jobs.

    A wrong answer is a result that says what went wrong, never an exception;
    a `workers` or `jobs` out of range is a ValueError saying the range.
    """
    if not callable(claim_one):
        raise TypeError(f"race_claim_one needs your claim_one function, not {type(claim_one)}")
    if not 2 <= workers <= len(WORKER_NAMES):
        raise ValueError(f"workers must be 2 to {len(WORKER_NAMES)}, not {workers!r}")
    if not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be 1 to {MAX_JOBS}, not {jobs!r}")
    names = WORKER_NAMES[:workers]
    with tempfile.TemporaryDirectory(prefix="agent17-race-") as folder:
        outcome = run_race(claim_one, Path(folder), workers, jobs)
    if isinstance(outcome, str):
        return ClaimRace(names, {}, {}, (outcome,))
    reports, table = outcome
    told: dict[int, list[str]] = {}
    for owner, report in sorted(reports.items()):
        for job in report.taken:
            told.setdefault(job, []).append(owner)
    problem = judge_race(reports, table)
    return ClaimRace(
        names,
        {job: tuple(owners) for job, owners in sorted(told.items())},
        table,
        () if problem is None else (problem,),
    )
