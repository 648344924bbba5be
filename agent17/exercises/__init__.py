"""Exercises for the class: write the piece, and a checker runs it the way the store is tested.

    from agent17.exercises import EXERCISES, check

    def lease_is_live(now, claimed_at, lease_expires_at):
        ...                                   # your turn
    check("lease_is_live", lease_is_live)     # PASSED, or what went wrong, in words

Each exercise has a `starter` (what a first attempt looks like: it fails),
a `hint` (a nudge, not the answer) and the notebook it belongs to; its
reference solution is for after your own: `show_solution(name)` prints it once
`check(name, ...)` has passed in this kernel. `race_claim_one(claim_one)` races
your own claim from several OS processes on one file and shows the table.
`check(name, candidate)` never raises: a wrong answer, an exception or an endless
loop is a failed check with the reason.

An exercise whose answer is a function of its arguments is compared with the
reference on every input of a small complete space, and a failure shows the
smallest input where they differ (`search`); a race exercise is played schedule
by schedule (`schedules`), and a failure shows the schedule that broke the rule.
Every check runs its candidate in a sandbox (`_bounded`): a child process with a
deadline, in a scratch folder, whose processes all end with the check; the
verdict is reached outside it, from plain values. So a candidate defined in a
notebook cell works, no candidate can hang the notebook, and none can reach the
verdict.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from agent17.exercises import board, claims, effects, lease, task_graph, team, workspace
from agent17.exercises._bounded import Checker, CheckResult, run_check
from agent17.exercises.race import ClaimRace, race_claim_one

CHECK_TIMEOUT_SECONDS: Final = 60.0


@dataclass(frozen=True, slots=True)
class Exercise:
    """One exercise: what to write, where it belongs, a first attempt, the answer, a hint."""

    name: str
    title: str
    notebook: str
    starter: Callable[..., Any]
    solution: Callable[..., Any]
    hint: str
    checker: Checker


def _exercise(module: ModuleType, name: str, title: str, notebook: str) -> Exercise:
    # Every exercise module names its parts alike: name_starter, name_solution, NAME_HINT,
    # NAME_CHECK (a part left out fails at import, not in class).
    return Exercise(
        name,
        title,
        notebook,
        getattr(module, f"{name}_starter"),
        getattr(module, f"{name}_solution"),
        getattr(module, f"{name.upper()}_HINT"),
        getattr(module, f"{name.upper()}_CHECK"),
    )


_ALL: Final = (
    _exercise(
        board,
        "ready_in_order",
        "Which tasks could claim_next take, and in which order?",
        "02_the_sqlite_board",
    ),
    _exercise(
        board,
        "claim_query",
        "Write the claim's SELECT so that it is one index seek",
        "02_the_sqlite_board",
    ),
    _exercise(
        lease,
        "lease_is_live",
        "Is the lease still live? The half-open interval",
        "03_claims_and_leases",
    ),
    _exercise(
        claims, "take_if_pending", "The conditional UPDATE and its rowcount", "03_claims_and_leases"
    ),
    _exercise(
        claims,
        "claim_one",
        "Take one job atomically, with four processes racing",
        "04_many_processes",
    ),
    _exercise(
        workspace,
        "inside_workspace",
        "Does a path stay inside the workspace? Links, hard links and `..`",
        "05_tools_and_identity",
    ),
    _exercise(
        effects, "fenced_effect", "Fence a side effect by its claim", "05_tools_and_identity"
    ),
    _exercise(team, "next_pass", "Predict what one pass of the idle loop does", "06_the_idle_loop"),
    _exercise(
        team,
        "wait_or_wake",
        "A wait that a message cuts short, without burning CPU",
        "06_the_idle_loop",
    ),
    _exercise(
        task_graph,
        "task_graph",
        "The Lead's part: a described job as a task graph on the board",
        "07_the_whole_team",
    ),
    _exercise(
        effects, "append_note", "Two teammates, one file: the lost edit", "07_the_whole_team"
    ),
)

EXERCISES: Final[Mapping[str, Exercise]] = {exercise.name: exercise for exercise in _ALL}
"""Every exercise by name, in course order."""


def check(name: str, candidate: Any) -> CheckResult:
    """Run exercise `name`'s checker on `candidate`; a failed check says why, it never raises."""
    exercise = EXERCISES.get(name)
    if exercise is None:
        known = ", ".join(EXERCISES)
        return CheckResult(False, f"there is no exercise {name!r}; the exercises are: {known}")
    if not callable(candidate):
        return CheckResult(False, f"pass your function itself (not {type(candidate).__name__})")
    result = run_check(exercise.checker, candidate, CHECK_TIMEOUT_SECONDS)
    if result.passed:
        _PASSED.add(name)
    return result


# The exercises whose check passed in this process (this kernel): only theirs are shown.
_PASSED: Final[set[str]] = set()


def show_solution(name: str) -> None:
    """Print exercise `name`'s reference solution, once `check(name, ...)` passed here.

    Before that it prints how to get there instead: a solution is for comparing
    with your own answer, not for replacing it.
    """
    exercise = EXERCISES.get(name)
    if exercise is None:
        print(f"There is no exercise {name!r}; the exercises are: {', '.join(EXERCISES)}")
    elif name not in _PASSED:
        print(
            f"Not yet: show_solution({name!r}) shows one answer once check({name!r},"
            " your_function) has passed in this kernel."
        )
    else:
        source = textwrap.dedent(inspect.getsource(exercise.solution))
        print(f"One answer to {name!r} (yours passed too; compare them):\n\n{source}", end="")


__all__ = [
    "EXERCISES",
    "CheckResult",
    "ClaimRace",
    "Exercise",
    "check",
    "race_claim_one",
    "show_solution",
]
