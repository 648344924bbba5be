"""Race your own claim: `race_claim_one(claim_one)` runs it from several OS processes at once.

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

from agent17.exercises._jobs import WORKER_NAMES, ClaimOne, run_race
from agent17.exercises.claims import judge_race

MAX_JOBS: Final = 200


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
            f" {len(self.table)} jobs:",
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
