"""Exercises on side effects: fence an effect by its claim, and the edit two teammates lose.

Owning a task is not owning the files it touches. The last exercise shows the
lost edit of two teammates writing one file, the problem the next chapter
solves with a git worktree per task. Both are checked schedule by schedule
(`_effect_races`): the board's moves or the other teammates' file steps come
between the candidate's own, in every order up to the bound.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from agent17.domain import TaskClaim, TaskError
from agent17.exercises._bounded import Checker, CheckResult
from agent17.exercises._effect_races import FenceScenario, NotesScenario
from agent17.exercises._notes import NotesFile as NotesFile  # what append_note is handed
from agent17.exercises.schedules import Exploration, explore_race, listed, to_plain, verdict
from agent17.store.sqlite import SqliteTaskStore

# -- fenced_effect ------------------------------------------------------------------------

FencedEffect = Callable[[SqliteTaskStore, TaskClaim, str, Callable[[], None]], bool]


def fenced_effect_starter(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Callable[[], None]
) -> bool:
    """Run `effect()` only if `owner` still holds `claim` on the board; True if it ran."""
    effect()
    return True


def fenced_effect_solution(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Callable[[], None]
) -> bool:
    """Run `effect()` only if `owner` still holds `claim` on the board; True if it ran."""
    try:
        # The board's clock decides, right before the effect: owner, token and lease.
        store.verify_claim(claim.task.id, owner, claim.claim_token)
    except TaskError:
        return False
    effect()
    return True


FENCED_EFFECT_HINT = (
    "Who can tell whether this claim still holds: you, your own clock, or the board? Ask the"
    " one that knows, right before the effect, about everything that makes this claim this"
    " claim. A refusal is an answer (the effect must not run), not a crash."
)

FENCE_BOUND: Final = (
    "every schedule with at most 2 preemptions of alice's call against each way her claim"
    " ends: completed, its lease run out, taken over by bob, claimed again by alice"
)


def explore_fenced_effect(candidate: Any, folder: Path) -> Exploration | str:
    """alice's call against each way her claim can end while it runs (one task for each)."""

    def scenario(name: str, task: str, *board: str) -> FenceScenario:
        return FenceScenario(name, task, board, folder, candidate)

    return explore_race(
        candidate,
        [
            scenario("alice completed A", "A", "complete"),
            scenario("alice's lease on B ran out", "B", "advance"),
            scenario("bob took C over after alice's lease ran out", "C", "advance", "bob"),
            scenario("alice's lease on D ran out and she claimed D again", "D", "advance", "again"),
        ],
        [],
        bound=FENCE_BOUND,
        seed="fenced_effect",
        who="teammates",
    )


def _race_check(explore: Callable[[Any, Path], Exploration | str], held: str) -> Checker:
    """A check that is its race alone: the schedules in the sandbox, the verdict from them."""

    def run(candidate: Any) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
            return {"schedules": to_plain(explore(candidate, Path(folder)))}

    def judge(data: Any) -> CheckResult:
        return verdict(data["schedules"], held)

    return Checker(run, judge)


FENCED_EFFECT_CHECK: Final = _race_check(
    explore_fenced_effect,
    "the effect ran while the claim was live, and never once the claim had ended before"
    " your call asked the board. (One window remains: a claim can end between your last"
    " look and the effect. That is why effects are keyed by the claim token too.)",
)


# -- append_note: two teammates, one file -----------------------------------------------

AppendNote = Callable[[NotesFile, str], None]


def append_note_starter(notes: NotesFile, line: str) -> None:
    """Add `line` (and a newline) to the shared notes; no other teammate's line may be lost."""
    notes.write(notes.read() + line + "\n")


def append_note_solution(notes: NotesFile, line: str) -> None:
    """Add `line` (and a newline) to the shared notes; no other teammate's line may be lost."""
    # Read and write as one step for everyone else (notes.append(line + "\n") works too).
    with notes.lock():
        notes.write(notes.read() + line + "\n")


APPEND_NOTE_HINT = (
    "Between your read and your write, what can another teammate do to the file, and what"
    " happens to their line when you write? Look at what NotesFile offers: one of its methods"
    " makes a pair of steps one, another never needs the read at all."
)

APPEND_BOUND: Final = (
    "every schedule of alice and bob with at most 2 preemptions, with one note each and with"
    " two; then seeded schedules of alice, bob and carol with two notes each"
)


def explore_append_note(candidate: AppendNote, folder: Path) -> Exploration | str:
    """Teammates adding notes to one file, every read, write, append and lock a point."""

    def scenario(workers: tuple[str, ...], notes: int) -> NotesScenario:
        name = f"{listed(workers)}, {notes} note{'' if notes == 1 else 's'} each"
        return NotesScenario(name, workers, notes, folder, candidate)

    pair, trio = ("alice", "bob"), ("alice", "bob", "carol")
    return explore_race(
        candidate,
        [scenario(pair, 1), scenario(pair, 2)],
        [scenario(trio, 2)],
        bound=APPEND_BOUND,
        seed="append_note",
        who="teammates",
    )


APPEND_NOTE_CHECK: Final = _race_check(
    explore_append_note,
    "every note arrived, whole and once. A lock makes one file safe; teammates changing a"
    " whole source tree need to work apart (a git worktree per task, the next chapter).",
)
