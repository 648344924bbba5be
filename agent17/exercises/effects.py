"""Exercises on side effects: fence an effect by its claim, and the edit two teammates lose.

Owning a task is not owning the files it touches. The last exercise shows the
lost edit of two teammates writing one file, the problem the next chapter
solves with a git worktree per task.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import TaskClaim, TaskError
from agent17.exercises._bounded import FORK_AVAILABLE, CheckResult, raised
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


FENCE_HINT = (
    "Who can tell whether this claim still holds: you, your own clock, or the board? Ask the"
    " one that knows, right before the effect, about everything that makes this claim this"
    " claim. A refusal is an answer (the effect must not run), not a crash."
)


def check_fenced_effect(candidate: FencedEffect) -> CheckResult:
    """Live, expired, taken over, and already completed: the effect runs only while live."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        clock = ManualClock()
        store = SqliteTaskStore(
            folder, clock=clock, new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71), lease_seconds=60,
        )  # fmt: skip
        try:
            return _fence_cases(candidate, store, clock)
        finally:
            store.close()


Attempt = Callable[[str, TaskClaim, str], tuple[bool | None, str | None]]


def _same_owner_again(
    attempt: Attempt, store: SqliteTaskStore, clock: ManualClock, task_id: str
) -> str | None:
    """alice's lease on D runs out and she claims D again: only the new claim may act."""
    first = store.claim_task(task_id, "alice")
    clock.advance(60)
    second = store.claim_task(task_id, "alice")
    ran, problem = attempt("alice's first claim on D, after she claimed D again", first, "alice")
    if problem or ran:
        return problem or (
            "alice's lease on D ran out and she claimed D again, with a new token; her old"
            " claim's effect ran anyway. The owner and the status are the same for both claims:"
            " what tells an old attempt from the live one?"
        )
    ran, problem = attempt("alice's second claim on D, live", second, "alice")
    if problem or ran is not True:
        return problem or "alice's second claim on D is live: its effect must run"
    return None


def _fence_cases(
    candidate: FencedEffect, store: SqliteTaskStore, clock: ManualClock
) -> CheckResult:
    effects: list[str] = []

    def attempt(what: str, claim: TaskClaim, owner: str) -> tuple[bool | None, str | None]:
        before = len(effects)
        try:
            ran = candidate(store, claim, owner, lambda: effects.append(what))
        except TaskError as error:
            return None, f"{what}: you let the store's {error.code} escape; answer False instead"
        except Exception as error:
            return None, f"{what}: {raised(error)}"
        if ran is not (len(effects) > before):
            return (
                None,
                f"{what}: you returned {ran!r} but the effect ran {len(effects) - before} times",
            )
        return ran, None

    a, b, c, d = (store.create_task(subject) for subject in "ABCD")
    claim_a = store.claim_task(a.id, "alice")
    ran, problem = attempt("alice, her lease on A live", claim_a, "alice")
    if problem or ran is not True:
        return CheckResult(False, problem or "while alice's lease is live her effect must run")
    store.complete_task(a.id, "alice", claim_a.claim_token)
    ran, problem = attempt("alice, A already completed", claim_a, "alice")
    if problem or ran:
        return CheckResult(
            False,
            problem
            or "alice completed A, and then her effect ran again: a claim you were handed is"
            " no proof that it still holds. Ask the board right before the effect.",
        )
    problem = _same_owner_again(attempt, store, clock, d.id)
    if problem is not None:
        return CheckResult(False, problem)
    claim_b = store.claim_task(b.id, "alice")
    clock.advance(60)
    ran, problem = attempt("alice, her lease on B ran out", claim_b, "alice")
    if problem:
        return CheckResult(False, problem)
    if ran:
        return CheckResult(
            False,
            "alice's lease on B ran out on the board's clock, and her effect ran anyway: a"
            " worker that lost its task kept writing. Ask the store right before the effect.",
        )
    claim_c = store.claim_task(c.id, "alice")
    clock.advance(60)
    store.claim_next("bob")  # C's lease ran out: bob takes it
    ran, problem = attempt("alice, after bob took C over", claim_c, "alice")
    if problem or ran:
        return CheckResult(
            False,
            problem
            or "bob took C over after alice's lease ran out, and alice's effect ran anyway:"
            " two workers now act for one task. Ask the board right before the effect.",
        )
    return CheckResult(
        True,
        "the effect ran while the claim was live, and not after its lease ran out, not after a"
        " takeover, not after completion, not for an old claim of the same owner. (One window"
        " remains: an effect that starts a moment before the lease ends can finish after it."
        " That is why effects are keyed by the claim token too.)",
    )


# -- append_note: two teammates, one file -----------------------------------------------

PAUSE_IN_READ_SECONDS: Final = 0.003
WRITERS: Final = 4
NOTES_EACH: Final = 15


class NotesFile:
    """A shared notes file: `read()`, `write(text)` (replace all), `append(text)`, `lock()`.

    The checker's copy pauses a little in `read()`, as a slow disk or a busy
    machine would, so that a read-modify-write race shows every time.
    """

    def __init__(self, path: Path, *, pause: float = 0.0) -> None:
        self.path = path
        self.pause = pause

    def read(self) -> str:
        """The whole file now."""
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        time.sleep(self.pause)
        return text

    def write(self, text: str) -> None:
        """Replace the whole file with `text`, in one step.

        Written beside it and renamed over it, so that a teammate reading at the
        same moment sees the old file or the new one, never half of one: the only
        way left to lose a note is the lesson's, a read-modify-write race.
        """
        scratch = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, self.path)

    def append(self, text: str) -> None:
        """Add `text` at the end in one system call (O_APPEND: never mixed with another)."""
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, text.encode("utf-8"))
        finally:
            os.close(descriptor)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the file's lock (a lock file beside it) for the block, across processes."""
        descriptor = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)


AppendNote = Callable[[NotesFile, str], None]


def append_note_starter(notes: NotesFile, line: str) -> None:
    """Add `line` (and a newline) to the shared notes; no other teammate's line may be lost."""
    notes.write(notes.read() + line + "\n")


def append_note_solution(notes: NotesFile, line: str) -> None:
    """Add `line` (and a newline) to the shared notes; no other teammate's line may be lost."""
    # Read and write as one step for everyone else (notes.append(line + "\n") works too).
    with notes.lock():
        notes.write(notes.read() + line + "\n")


APPEND_HINT = (
    "Between your read and your write, what can another teammate do to the file, and what"
    " happens to their line when you write? Look at what NotesFile offers: one of its methods"
    " makes a pair of steps one, another never needs the read at all."
)


def _writer(candidate: AppendNote, path: str, name: str, start: Any) -> None:
    code = 0
    try:
        notes = NotesFile(Path(path), pause=PAUSE_IN_READ_SECONDS)
        start.wait(30)
        for number in range(NOTES_EACH):
            candidate(notes, f"{name} note {number}")
    except BaseException as error:
        Path(f"{path}.{name}.error").write_text(raised(error), encoding="utf-8")
        code = 1
    finally:
        os._exit(code)


def check_append_note(candidate: AppendNote) -> CheckResult:
    """Four teammate processes each add 15 notes to one file at the same time: all 60 arrive."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        path = Path(folder) / "NOTES.md"
        path.write_text("", encoding="utf-8")
        context: Any = multiprocessing.get_context("fork" if FORK_AVAILABLE else "spawn")
        start = context.Barrier(WRITERS)
        names = ("alice", "bob", "carol", "dave")[:WRITERS]
        writers = [
            context.Process(target=_writer, args=(candidate, str(path), name, start))
            for name in names
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(60)
            if writer.is_alive():
                writer.kill()
                return CheckResult(False, "a teammate's appends did not finish within 60 s")
        for name in names:
            error = Path(f"{path}.{name}.error")
            if error.exists():
                return CheckResult(False, f"{name}'s append failed: {error.read_text()}")
        lines = path.read_text(encoding="utf-8").splitlines()
    expected = {f"{name} note {n}" for name in names for n in range(NOTES_EACH)}
    arrived = set(lines) & expected
    if len(lines) != len(set(lines)) or set(lines) - expected:
        return CheckResult(
            False,
            f"the file has {len(lines)} lines, some doubled or run together: add exactly"
            " `line` plus one newline",
        )
    if arrived != expected:
        # How many go missing depends on the timing; that some do is the lesson.
        return CheckResult(
            False,
            f"some of the {len(expected)} notes were lost: two teammates read the same old"
            " file and the second write replaced the first. Owning a task is not owning the"
            " file it touches.",
        )
    return CheckResult(
        True,
        f"all {len(expected)} notes of {WRITERS} teammates arrived. A lock makes one file safe;"
        " teammates changing a whole source tree need to work apart (a git worktree per task,"
        " the next chapter).",
    )
