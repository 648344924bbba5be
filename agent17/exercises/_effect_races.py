"""append_note and fenced_effect, schedule by schedule: their scenarios and rules.

append_note: teammates each add notes to one real file through a `NotesFile`
whose `read`, `write` and `append` are points, and whose `lock()` (a flock on
a lock file beside it) is played by the scheduler. After every step the file
must hold only whole notes, none twice, and every note whose call returned.

fenced_effect: alice's call races the board: the clock moving past her lease,
bob taking the task over, her other attempt completing it, or her claiming it
again with a new token. Every call the candidate makes on the store is a point,
and so is the effect. The effect must not run once the claim has ended before
the candidate last asked the board (an end after that last look is the window
no fence closes: that is why effects are keyed by the claim token too); while
the claim holds for the whole call, the effect must run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import TaskClaim, TaskError
from agent17.exercises._bounded import raised
from agent17.exercises._notes import NotesFile
from agent17.exercises.schedules import FileLocks, Problem, Run, Worker, World, played
from agent17.store.sqlite import SqliteTaskStore

# -- append_note -------------------------------------------------------------------------


class ScheduledNotes(NotesFile):
    """A teammate's notes file in a schedule: `read`, `write` and `append` are points."""

    def __init__(self, path: Path, run: Run) -> None:
        super().__init__(path)
        self._run = run

    def read(self) -> str:
        """The whole file now (a point)."""
        text = self._run.attempt("read()", "", super().read)
        self._run.record("read()", "", repr(text))
        return text

    def write(self, text: str) -> None:
        """Replace the whole file with `text` (a point)."""
        self._run.attempt("write", repr(text), lambda: super(ScheduledNotes, self).write(text))
        self._run.record("write", repr(text), "")

    def append(self, text: str) -> None:
        """Add `text` at the end (a point)."""
        self._run.attempt("append", repr(text), lambda: super(ScheduledNotes, self).append(text))
        self._run.record("append", repr(text), "")


@dataclass(frozen=True, slots=True)
class NotesScenario:
    """Teammates adding `notes` notes each to one file."""

    name: str
    workers: tuple[str, ...]
    notes: int
    folder: Path
    candidate: Callable[[NotesFile, str], Any]

    def world(self, run: Run) -> World:
        """A fresh, empty notes file for one schedule."""
        return NotesWorld(self, run)


class NotesWorld(World):
    """One schedule's notes file: the rules read it from disk after every step."""

    def __init__(self, scenario: NotesScenario, run: Run) -> None:
        self.scenario = scenario
        self.run = run
        folder = scenario.folder / "notes"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        self.path = folder / "NOTES.md"
        self.path.write_text("", encoding="utf-8")
        run.hide(f"{folder}{os.sep}")
        self.locks = FileLocks(run)
        self._played = contextlib.ExitStack()
        self._played.enter_context(played(self.locks))
        self.expected = {
            f"{name} note {number}" for name in scenario.workers for number in range(scenario.notes)
        }
        self.added: list[tuple[str, str]] = []  # (teammate, note) of every call that returned

    def script(self, worker: Worker) -> None:
        """Add this teammate's notes, one call each."""
        notes = ScheduledNotes(self.path, self.run)
        try:
            for number in range(self.scenario.notes):
                line = f"{worker.name} note {number}"
                self.scenario.candidate(notes, line)
                self.run.record("returns", "", "None")
                self.added.append((worker.name, line))
        finally:
            self.locks.release_all(worker.name)

    def after_step(self) -> Problem | None:
        """Only whole notes, none twice, none lost; an error is a failure too."""
        self.locks.sweep()
        for worker in self.run.workers:
            if worker.error is not None:
                return Problem("raised", f"{worker.name}'s append failed: {raised(worker.error)}")
        text = self.path.read_text(encoding="utf-8")
        lines = text.splitlines()
        odd = [line for line in lines if line not in self.expected]
        if odd or (text and not text.endswith("\n")):
            shown = odd[0] if odd else lines[-1]
            return Problem(
                "run-together",
                f"the file holds {shown!r}{'' if odd else ' with no newline after it'}: notes run"
                " together when their newline is missing. Add exactly `line` plus one newline.",
            )
        doubled = [line for line in lines if lines.count(line) > 1]
        if doubled:
            return Problem(
                "doubled", f"{doubled[0]!r} is in the file twice: add each line once, not doubled"
            )
        for name, line in self.added:
            if line not in lines:
                return self._lost(name, line)
        return None

    def _lost(self, name: str, line: str) -> Problem:
        mover = self.run.last.name if self.run.last is not None else "someone"
        if mover == name:
            return Problem(
                "missing", f"{name}'s call returned, but its note {line!r} is not in the file"
            )
        return Problem(
            "lost",
            f"notes were lost: {name}'s note {line!r} was in the file after its call, and"
            f" {mover}'s write replaced the file with text read before it. Two teammates read"
            " the same old file and the second write replaced the first. Owning a task is not"
            " owning the file it touches.",
        )

    def close(self) -> None:
        """Give flock and os.close back."""
        self._played.close()


# -- fenced_effect -------------------------------------------------------------------------

LEASE_SECONDS: Final = 60


@dataclass(frozen=True, slots=True)
class FenceScenario:
    """alice's call on her claim on a task, while the board does `board` (each a point)."""

    name: str  # what ends her claim, in words: "alice's lease on B ran out"
    task: str  # the task's subject
    board: tuple[str, ...]  # the board's steps, from "advance", "bob", "complete", "again"
    folder: Path
    candidate: Callable[..., Any]

    @property
    def workers(self) -> tuple[str, ...]:
        """alice, and the board."""
        return ("alice", "board")

    def world(self, run: Run) -> World:
        """A fresh board where alice holds the task, for one schedule."""
        return FenceWorld(self, run)


class ScheduledStore:
    """The store alice's call gets: every public call on it is a point of the schedule."""

    def __init__(self, world: FenceWorld) -> None:
        self._world = world

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._world.store, name)
        if name.startswith("_") or not callable(value):
            return value
        world = self._world

        def call(*args: Any, **kwargs: Any) -> Any:
            shown = world.shown([*args, *kwargs.values()])
            try:
                result = world.run.attempt(f"store.{name}", shown, lambda: value(*args, **kwargs))
            except TaskError as error:
                world.asked(f"store.{name}", shown, f"refused: {error.code}")
                raise
            world.asked(f"store.{name}", shown, "ok")
            return result

        return call


def _board(folder: Path, clock: ManualClock, next_number: int) -> SqliteTaskStore:
    return SqliteTaskStore(
        folder, clock=clock, new_task_id=uuid_sequence(17, next_number),
        new_claim_token=uuid_sequence(71, next_number), lease_seconds=LEASE_SECONDS,
    )  # fmt: skip


class FenceWorld(World):
    """One schedule's board: alice holds the task; the rules know when her claim ended."""

    def __init__(self, scenario: FenceScenario, run: Run) -> None:
        self.scenario = scenario
        self.run = run
        folder = scenario.folder / "board"
        shutil.rmtree(folder, ignore_errors=True)
        template = scenario.folder / f"board-{scenario.task}"
        if not template.exists():  # made once, copied for every schedule
            made = _board(template, ManualClock(), 1)
            made.claim_task(made.create_task(scenario.task).id, "alice")
            made.close()
        shutil.copytree(template, folder)
        self.clock = ManualClock()
        self.store = _board(folder, self.clock, 2)
        (self.task,) = self.store.list_tasks()
        token = self.store.issued_claim_tokens()[0]
        self.claim: TaskClaim = self.store.verify_claim(self.task.id, "alice", token)
        self.names = {self.task.id: scenario.task, self.claim.claim_token: "alice's token"}
        for value, name in self.names.items():
            run.hide(value, name)
        self.ended: int | None = None  # the step in which the board ended alice's claim
        self.last_look: int | None = None  # the step of alice's last call on the store
        self.effects: list[int] = []  # the steps in which the effect ran
        self.answer: tuple[Any, int] | None = None  # what alice's call returned, and when

    def shown(self, values: list[Any]) -> str:
        """Arguments as the timeline shows them: the task's subject, "alice's token"."""
        return ", ".join(self.names.get(value, repr(value)) for value in values)

    def asked(self, action: str, shown: str, result: str) -> None:
        """alice's call asked the board something (and got `result`)."""
        self.last_look = self.run.step
        self.run.record(action, shown, result)

    def script(self, worker: Worker) -> None:
        """alice: one call of the candidate; the board: its steps, one point each."""
        if worker.name == "alice":
            answer = self.scenario.candidate(
                ScheduledStore(self), self.claim, "alice", self._effect
            )
            self.run.record("returns", "", repr(answer))
            self.answer = (answer, self.run.step)
            return
        for step in self.scenario.board:
            action, shown, do = self._board_step(step)
            self.run.attempt(action, shown, do)
            self.run.record(action, shown, "")
            if self.ended is None:
                self.ended = self.run.step

    def _board_step(self, step: str) -> tuple[str, str, Callable[[], object]]:
        task = self.task.id
        if step == "advance":
            return (
                "the clock moves",
                f"{LEASE_SECONDS} s",
                lambda: self.clock.advance(LEASE_SECONDS),
            )
        if step == "complete":
            token = self.claim.claim_token
            return "alice completes A", "", lambda: self.store.complete_task(task, "alice", token)
        owner = "bob" if step == "bob" else "alice"
        return f"{owner} claims A", "", lambda: self.store.claim_task(task, owner)

    def _effect(self) -> None:
        self.run.attempt("effect()", "", lambda: None)
        live = self.ended is None
        self.run.record("effect()", "", "ran, the claim live" if live else "ran, the claim over")
        self.effects.append(self.run.step)

    def after_step(self) -> Problem | None:
        """An effect after the claim ended before alice last looked; an answer that lies."""
        alice = self.run.workers[0]
        if alice.error is not None:
            return Problem("raised", self._failed(alice.error))
        for step in self.effects:
            if self.ended is not None and self.ended < step:
                looked = self.last_look is not None and self.last_look < step
                if not looked or self.ended < (self.last_look or 0):
                    return Problem("unfenced", self._unfenced(step))
        if self.answer is not None:
            return self._answered(*self.answer)
        return None

    def _failed(self, error: Exception) -> str:
        if isinstance(error, TaskError):
            return (
                f"{self.scenario.name}, and you let the store's {error.code} escape from your"
                " call: a refusal is an answer, so answer False instead (the effect must not"
                " run)."
            )
        return f"alice's call failed: {raised(error)}"

    def _unfenced(self, step: int) -> str:
        if self.last_look is None or self.last_look > step:
            asked = "and your call had not asked the board before the effect"
        else:
            asked = f"before your call last asked the board (step {self.last_look})"
        return (
            f"{self.scenario.name} (step {self.ended}) {asked}, and the effect ran anyway (step"
            f" {step}): a claim you were handed is no proof that it still holds. Ask the board"
            " right before the effect, about everything that makes this claim this claim."
        )

    def _answered(self, answer: Any, step: int) -> Problem | None:
        ran = len(self.effects)
        if not isinstance(answer, bool) or answer is not (ran > 0):
            return Problem("said", f"you returned {answer!r} but the effect ran {ran} times")
        if ran > 1:
            return Problem("twice", f"the effect ran {ran} times in one call: run it once")
        if not ran and (self.ended is None or self.ended > step):
            return Problem(
                "not-run",
                f"alice's claim on {self.scenario.task} held for the whole call, and the effect"
                " did not run: while the claim is live, the effect must run",
            )
        return None

    def close(self) -> None:
        """Close the board."""
        self.store.close()
