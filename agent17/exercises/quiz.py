"""The closing quiz: ten questions over the whole chapter, the answers checked by code.

`QUIZ` shows the questions with lettered choices; `check_quiz({"lease_instant": "c", ...})`
marks the answers. Where the package can answer a question itself, `check_quiz` asks it: it
builds the situation (a board on a manual clock, a teammate with a shutdown request in its
mailbox, two connections after SQLite's write lock) and marks right the choice that says what
really happened. The tests check the written key (`Question.answer`) against those runs.
"""

from __future__ import annotations

import html
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent17.claims import DirectTaskClaimService, ToolContext
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import ErrorCode, TaskError
from agent17.exercises._bounded import CheckResult
from agent17.exercises.team import PassCase, real_pass
from agent17.racelab.lab import run_json_race, run_sqlite_race
from agent17.store.contract import TaskStore
from agent17.store.sqlite import SqliteTaskStore
from agent17.team.teammate import TickKind

LEASE_SECONDS: Final = 300.0  # the store's default lease


@dataclass(frozen=True, slots=True)
class Choice:
    """One lettered answer and what it teaches: why it is right, or why it is wrong."""

    text: str
    why: str


@dataclass(frozen=True, slots=True)
class Question:
    """A question, its choices (a, b, ...), the written key, and `observe(folder)`: the letter
    the package's own behaviour picks, found by running it in an empty folder."""

    key: str
    notebook: str
    prompt: str
    choices: tuple[Choice, ...]
    answer: str
    observe: Callable[[Path], str]

    @property
    def letters(self) -> str:
        """The letters of this question's choices."""
        return "abcd"[: len(self.choices)]

    def choice(self, letter: str) -> Choice:
        """The choice with that letter."""
        return self.choices[self.letters.index(letter)]


# -- the package answers: one run per question ------------------------------------------


def _board(folder: Path, clock: ManualClock) -> SqliteTaskStore:
    return SqliteTaskStore(
        folder, clock=clock, new_task_id=uuid_sequence(17), new_claim_token=uuid_sequence(71)
    )


def _refusal(attempt: Callable[[], object]) -> str | None:  # the refusal code, or None
    try:
        attempt()
    except TaskError as error:
        return error.code
    return None


def _observe_busy_handler(folder: Path) -> str:
    path = folder / "board.sqlite3"
    alice = sqlite3.connect(path, isolation_level=None)
    bob = sqlite3.connect(path, isolation_level=None, timeout=0.2)
    try:
        alice.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        try:
            bob.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # "database is locked"
            # A lower bound only: a loaded machine makes the wait longer, never shorter.
            return "b" if time.monotonic() - started >= 0.1 else "c"
        return "a"
    finally:
        alice.close()
        bob.close()


_HOLD_AND_DIE: Final = (
    "import fcntl, os, signal, sys\n"
    "descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
    "fcntl.flock(descriptor, fcntl.LOCK_EX)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)


def _observe_flock(folder: Path) -> str:
    import fcntl  # POSIX only: the quiz on Windows keeps the written key for this question

    path = folder / "board.lock"
    subprocess.run([sys.executable, "-c", _HOLD_AND_DIE, str(path)], check=False, timeout=60)
    with open(path, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "b"  # the killed holder's lock outlived it
    return "a"


def _observe_ready(folder: Path) -> str:
    with _board(folder, ManualClock()) as store:
        a, b = store.create_task("A"), store.create_task("B")
        c = store.create_task("C", blocked_by=(a.id, b.id))
        claim_a = store.claim_task(a.id, "alice")
        store.complete_task(a.id, "alice", claim_a.claim_token)
        store.claim_task(b.id, "bob")
        carol = store.claim_next("carol")
        if carol is None:
            return "c"
        return "a" if carol.task.id == c.id else "b"


def _observe_one_statement(folder: Path) -> str:
    # The same interleaving (both scan, then both claim) on scan-then-claim and on the store.
    naive = run_json_race(workspace=folder / "json")
    store = run_sqlite_race(workspace=folder / "sqlite")
    return "c" if naive.double_claim and store.claims_committed == 1 else "a"


def _observe_lease_instant(folder: Path) -> str:
    clock = ManualClock()
    with _board(folder, clock) as store:
        a = store.create_task("A")
        alice = store.claim_task(a.id, "alice")
        clock.advance(LEASE_SECONDS)  # exactly the lease end
        bob = store.claim_next("bob")
        refused = _refusal(lambda: store.complete_task(a.id, "alice", alice.claim_token))
    if bob is None:
        return "a"
    return "c" if refused is not None else "b"


def _observe_claim_token(folder: Path) -> str:
    clock = ManualClock()
    with _board(folder, clock) as store:
        a = store.create_task("A")
        first = store.claim_task(a.id, "alice")
        clock.advance(LEASE_SECONDS)
        second = store.claim_task(a.id, "alice")  # the same owner takes the same task again
        old = _refusal(lambda: store.complete_task(a.id, "alice", first.claim_token))
    same_task_and_owner = (first.task.id, first.task.owner) == (second.task.id, second.task.owner)
    if same_task_and_owner and first.claim_token != second.claim_token and old is not None:
        return "b"
    return "a"


def _observe_heartbeat(folder: Path) -> str:
    clock = ManualClock()
    with _board(folder, clock) as store:
        a = store.create_task("A")
        claim = store.claim_task(a.id, "alice")
        clock.advance(LEASE_SECONDS / 2)
        # What the fence of every effectful tool asks: does the question move the lease?
        seen = store.verify_claim(a.id, "alice", claim.claim_token)
        moved = seen.lease_expires_at_utc != claim.lease_expires_at_utc
    renews = any("renew" in name or "heartbeat" in name for name in dir(TaskStore))
    return "a" if moved else ("b" if renews else "d")


def _observe_fencing(folder: Path) -> str:
    clock = ManualClock()
    with _board(folder, clock) as store:
        a = store.create_task("A")
        alice = store.claim_task(a.id, "alice")
        clock.advance(LEASE_SECONDS)
        store.claim_next("bob")
        service = DirectTaskClaimService(store)
        refused = _refusal(lambda: service.verify_claim(alice, ToolContext(identity="alice")))
    return "b" if refused == ErrorCode.LEASE_EXPIRED else "a"


def _observe_shutdown(folder: Path) -> str:
    outcome = real_pass(PassCase(("shutdown_request",), None, ("A",)), folder)
    return {TickKind.PROTOCOL_HANDLED: "a", TickKind.CLAIMED: "b"}.get(outcome.kind, "c")


def _observe_plan_gate(folder: Path) -> str:
    outcome = real_pass(PassCase((), "pending", ("A",)), folder)
    return {TickKind.PLAN_BLOCKED: "b", TickKind.CLAIMED: "a"}.get(outcome.kind, "d")


# -- the questions, in course order: "## key notebook answer", the prompt, then each choice as
# "x) text" with "-> why" (why it is right, or why it is wrong). Lines wrap freely.
_QUESTIONS_TEXT: Final = """
## busy_handler 01_the_race b
alice's claim holds SQLite's write lock (BEGIN IMMEDIATE); bob's BEGIN IMMEDIATE comes a moment
later. What does SQLite do with bob?
a) It queues him and serves him next, in the order the writers asked.
   -> SQLite keeps no queue: each waiter sleeps and retries on its own, and whoever retries
   first after the commit gets in. Asking first is no promise of going first.
b) His busy handler sleeps and retries until the lock is free, or gives up with 'database is
   locked' when his busy timeout runs out.
   -> A waiter sleeps and retries up to its busy timeout (the store sets 30 s); it is not a fair
   queue, so a later writer can win the retry.
c) He fails at once with 'database is locked'.
   -> Only with a busy timeout of 0; with a timeout his connection waits and retries first.

## flock 02_the_sqlite_board a
Why does the chapter use SQLite instead of an fcntl.flock lock file around the JSON board?
a) One lock file around the whole board would work on one POSIX machine; SQLite adds one
   transaction that chooses and takes the task and rolls back after a crash, readers that never
   wait for the writer, and the same behaviour on Windows, which has no fcntl.
   -> A board-wide lock is a fair design on one machine; the chapter wants the transaction, the
   index and one behaviour everywhere.
b) A flock is never released when its process crashes, so one kill -9 blocks the team forever.
   -> The kernel drops a flock when its process dies, even by kill -9: the package relies on it
   for 'one live worker per name'.
c) A flock on each task's own JSON file is enough to stop two owners of C.
   -> Both teammates scan before either locks, so both still pick C: choosing the first ready
   task across many files needs one lock over all of them.

## ready_or_pending 02_the_sqlite_board c
A is completed, bob holds B (lease live), and C is pending, blocked by A and B. carol calls
claim_next. What does she get?
a) C: it is pending.
   -> Pending is not ready: ready means pending with every dependency completed, and B is only
   in progress.
b) B, taken over from bob.
   -> bob's lease is live: nobody takes B until it ends or he completes it.
c) Nothing (None): C is pending but not ready until B is completed.
   -> claim_next takes the first ready task in creation order, and there is none.
d) A task_blocked error.
   -> Finding nothing ready is normal: claim_next returns None. task_blocked is what claim_task
   says when you name C yourself.

## one_statement 02_the_sqlite_board c
The claim is one UPDATE ... WHERE sequence = (SELECT ... LIMIT 1) RETURNING ..., inside BEGIN
IMMEDIATE. What is that for?
a) A SELECT followed by an UPDATE can never be made safe.
   -> Inside one BEGIN IMMEDIATE they would be safe too (the lock is held before the SELECT);
   one statement is the shortest way to say it, and one index seek.
b) RETURNING is what writes the 'claimed' event to the log.
   -> The schema's trigger writes the event; RETURNING hands the claimed row back, so no second
   read is needed.
c) Finding a ready task and taking it are one step: no writer can come between the look and
   the write (no time-of-check-to-time-of-use gap).
   -> Scan then claim as two steps lets both teammates see C free and both write themselves in
   as its owner.

## lease_instant 03_claims_and_leases c
alice claimed A at 09:00:00 with a 300-second lease. At exactly 09:05:00 bob calls claim_next.
What happens?
a) Nothing: alice's lease still covers 09:05:00, so bob gets None.
   -> The lease is half-open, [claimed_at, lease_expires_at): its end instant is outside it.
b) bob gets A, and alice can still complete it with her token.
   -> One owner and one live token at a time: alice's token belongs to a claim that is over.
c) bob gets A with a new claim token; alice's complete_task is refused.
   -> At its end instant the lease is over: A goes back to pending and bob claims it.

## claim_token 03_claims_and_leases b
alice's lease on A ran out and she claimed A again. What tells her first claim from her second,
and so keys a side effect such as 'send the invoice for this attempt'?
a) The task id.
   -> Every claim of A has the same task id (bob's too): it cannot tell an old attempt from the
   live one.
b) The claim token: each claim gets a new one that is never issued again.
   -> The board remembers every token it issued; the token is the run's idempotency key, and
   the first claim's token is refused from now on.
c) The owner name.
   -> Both claims are alice's, so the name is the same; her old token is refused all the same.

## heartbeat 03_claims_and_leases d
alice is still working on A when her lease runs out. Why does the chapter give her no heartbeat
(no way to renew a lease)?
a) She has one: every tool call she makes pushes her lease further.
   -> Asking the board about a claim does not move it: a lease ends where the claim put it.
b) The Lead renews the leases of teammates it sees working.
   -> Nothing in the team renews a lease: the store has no call for it.
c) A heartbeat cannot be written on SQLite.
   -> It would be one more UPDATE: leaving it out is the chapter's choice, not SQLite's limit.
d) Leases are fixed on purpose: a task that outlives its lease may be done again by someone
   else, so effects are fenced and keyed by the claim token, and nothing claims exactly-once.
   -> A renewal would hide the real problem (work may run twice) instead of solving it; make
   the lease longer than the work.

## fencing 05_tools_and_identity b
alice's lease on A ran out while she was still working, and bob has claimed A. Now her
write_file call for A runs. What happens?
a) The file is written: the board is only asked at complete_task.
   -> Every effectful tool asks the board first (verify_claim): a worker that lost its task
   must stop writing, not only stop completing.
b) The write is refused (lease_expired) before it happens: the claim fences the effect.
   -> The fence asks the board about owner, token and lease, on the board's clock, right before
   the effect.
c) Her lease is extended because she is still working.
   -> There is no heartbeat: a lease ends where the claim put it.

## shutdown 06_the_idle_loop a
alice's mailbox holds a shutdown request and task A is ready. What does her next tick() do?
a) She handles the shutdown (approves it and closes) and takes no task; A stays pending for a
   teammate still working.
   -> The mailbox comes before the board, one message per pass, and a closed teammate never
   claims again.
b) She claims A first: ready work comes before mail.
   -> Mail comes first, so a stream of ready tasks can never starve a shutdown or a plan
   response.
c) Her model is asked whether to stop.
   -> A shutdown request never reaches the model: the runtime answers it.

## plan_gate 06_the_idle_loop b
alice submitted a plan that the Lead has not reviewed yet, and task A is ready. What does her
next tick() do?
a) She claims A: a plan only gates writing files.
   -> A claim writes the board, so it is an effect too: a pending or rejected latest plan stops
   the pass before claim_next.
b) plan_blocked: no claim, and no write to the board at all, until the plan is approved.
   -> The gate comes before the board, and a blocked pass writes nothing.
c) She claims A and keeps it until her plan is approved.
   -> She would hold a lease on work she may not do yet; the gate is asked before any claim.
d) She goes idle and her plan is withdrawn.
   -> Her plan stays pending until the Lead answers; the pass is plan_blocked, not idle.
"""

_OBSERVERS: Final[Mapping[str, Callable[[Path], str]]] = {
    "busy_handler": _observe_busy_handler,
    "flock": _observe_flock,
    "ready_or_pending": _observe_ready,
    "one_statement": _observe_one_statement,
    "lease_instant": _observe_lease_instant,
    "claim_token": _observe_claim_token,
    "heartbeat": _observe_heartbeat,
    "fencing": _observe_fencing,
    "shutdown": _observe_shutdown,
    "plan_gate": _observe_plan_gate,
}

_CHOICE: Final = re.compile(r"^([a-z])\) (.*)$")


def _parse(text: str) -> tuple[Question, ...]:
    """The questions written in `text`, in order (see the format above)."""
    questions: list[Question] = []
    for block in text.split("\n## ")[1:]:
        head, *body = block.strip().split("\n")
        key, notebook, answer = head.split()
        prompt: list[str] = []
        choices: list[tuple[list[str], list[str]]] = []
        for line in (line.strip() for line in body):
            match = _CHOICE.match(line)
            if match:
                choices.append(([match[2]], []))
            elif line.startswith("-> "):
                choices[-1][1].append(line[3:])
            elif choices:
                (choices[-1][1] or choices[-1][0]).append(line)
            else:
                prompt.append(line)
        parsed = tuple(Choice(" ".join(said), " ".join(why)) for said, why in choices)
        questions.append(Question(key, notebook, " ".join(prompt), parsed, answer, _OBSERVERS[key]))
    return tuple(questions)


_QUESTIONS: Final = _parse(_QUESTIONS_TEXT)


class Quiz:
    """The questions in course order; shown in a notebook as a numbered list with choices."""

    def __init__(self, questions: tuple[Question, ...]) -> None:
        self.questions = questions
        self._by_key = {question.key: question for question in questions}

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __len__(self) -> int:
        return len(self.questions)

    def __getitem__(self, key: str) -> Question:
        return self._by_key[key]

    @property
    def keys(self) -> tuple[str, ...]:
        """The question keys, in course order: the keys of the answers to `check_quiz`."""
        return tuple(self._by_key)

    def blank(self) -> dict[str, str]:
        """An answer sheet to fill in: every key with an empty answer."""
        return {key: "" for key in self._by_key}

    def answer_key(self) -> dict[str, str]:
        """The right letters, each found by running the package (in a temporary folder)."""
        return {key: letter for key, (letter, _) in self._checked_key().items()}

    def _checked_key(self) -> dict[str, tuple[str, str]]:
        key: dict[str, tuple[str, str]] = {}
        with tempfile.TemporaryDirectory(prefix="agent17-quiz-") as folder:
            for number, question in enumerate(self.questions, start=1):
                workspace = Path(folder) / f"q{number}"
                workspace.mkdir()
                try:
                    key[question.key] = (question.observe(workspace), "")
                except Exception as error:  # the written key still grades; say it was not re-run
                    note = f" (the package could not re-check this one: {error})"
                    key[question.key] = (question.answer, note)
        return key

    def __str__(self) -> str:
        lines = [f"Closing quiz, {len(self)} questions: answer with check_quiz({{key: letter}})."]
        for number, question in enumerate(self.questions, start=1):
            lines += ["", f"{number}. [{question.key}] {question.prompt}"]
            lines += [
                f"   {letter}) {choice.text}"
                for letter, choice in zip(question.letters, question.choices, strict=True)
            ]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        items = []
        for question in self.questions:
            choices = "".join(
                f"<li><b>{letter})</b> {html.escape(choice.text)}</li>"
                for letter, choice in zip(question.letters, question.choices, strict=True)
            )
            items.append(
                f'<li style="margin-bottom: 0.5em"><code>{question.key}</code>'
                f" {html.escape(question.prompt)}"
                f'<ul style="list-style: none; padding-left: 1em">{choices}</ul></li>'
            )
        return (
            f"<div><p><b>Closing quiz</b>: {len(self)} questions. Answer with"
            " <code>check_quiz({key: letter, ...})</code>.</p>"
            f"<ol>{''.join(items)}</ol></div>"
        )


QUIZ: Final = Quiz(_QUESTIONS)
"""The chapter's closing quiz."""


def _letter(value: object, question: Question) -> tuple[str | None, str]:
    """The letter a student meant, or None and why the value is not an answer."""
    if not isinstance(value, str):
        return None, f"answer with a letter as a string, not {type(value).__name__}"
    letter = value.strip().lower().rstrip(")").strip()
    if letter == "":
        return None, "no answer yet"
    if len(letter) != 1 or letter not in question.letters:
        return None, f"{value!r} is not one of the letters"
    return letter, ""


def check_quiz(answers: Mapping[str, str]) -> CheckResult:
    """Mark `answers` ({question key: letter}); `passed` only if every answer is right.

    The feedback has one line per question: right and why, or why the chosen
    answer is wrong. Unknown keys and values that are not a letter are
    feedback, never an exception.
    """
    if not isinstance(answers, Mapping):
        example = f"{{'{QUIZ.keys[0]}': 'b', ...}}"
        return CheckResult(False, f"pass a dict such as {example}, not {type(answers).__name__}")
    unknown = [key for key in answers if key not in QUIZ.keys]
    key = QUIZ._checked_key()
    lines: list[str] = []
    right = 0
    for number, question in enumerate(QUIZ, start=1):
        letter, problem = _letter(answers.get(question.key, ""), question)
        correct, note = key[question.key]
        label = f"{number}. {question.key}:"
        if letter is None:
            lines.append(f"{label} {problem} (choose {', '.join(question.letters)})")
            continue
        right += letter == correct
        verdict = "right" if letter == correct else f"not {letter}"
        lines.append(f"{label} {verdict}. {question.choice(letter).why}{note}")
    if unknown:
        shown = ", ".join(repr(name) for name in unknown)
        lines.append(f"There is no question {shown}; the keys are: {', '.join(QUIZ.keys)}.")
    passed = right == len(QUIZ) and not unknown
    head = f"all {len(QUIZ)} right." if passed else f"{right} of {len(QUIZ)} right."
    return CheckResult(passed, "\n".join([head, *lines]))


__all__ = ["QUIZ", "Choice", "Question", "Quiz", "check_quiz"]
