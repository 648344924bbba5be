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
from importlib.resources import files
from pathlib import Path
from typing import Final

from agent17.claims import DirectTaskClaimService, ToolContext
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import ErrorCode, TaskError
from agent17.exercises._bounded import CheckResult
from agent17.exercises.team import PassCase, real_pass
from agent17.racelab.lab import run_json_race, run_sqlite_race
from agent17.store.board import TaskBoard
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
    renews = any("renew" in name or "heartbeat" in name for name in dir(TaskBoard))
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


# The questions are package data (quiz.txt beside this module): "## key notebook answer", the
# prompt, then each choice as "x) text" with "-> why". Lines wrap freely.
_QUESTIONS_TEXT: Final = (files("agent17.exercises") / "quiz.txt").read_text(encoding="utf-8")

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
        return None, "not answered yet"
    if len(letter) != 1 or letter not in question.letters:
        return None, f"{value!r} is not one of the letters"
    return letter, ""


_NOT_ANSWERED: Final = (
    "not answered yet: write one letter for each question into the dict (for example"
    f" '{_QUESTIONS[0].key}': 'a'), then run the check again."
)


def check_quiz(answers: Mapping[str, str]) -> CheckResult:
    """Mark `answers` ({question key: letter}); `passed` only if every answer is right.

    Until every question has a letter the feedback gives only the score, and which
    questions still need one. Then it has one line per question: right and why, or why
    the chosen answer is wrong. Unknown keys and values that are not a letter are
    feedback, never an exception.
    """
    if not isinstance(answers, Mapping):
        example = f"{{'{QUIZ.keys[0]}': 'b', ...}}"
        return CheckResult(False, f"pass a dict such as {example}, not {type(answers).__name__}")
    unknown = [key for key in answers if key not in QUIZ.keys]
    given = [value for key, value in answers.items() if key in QUIZ.keys]
    if not unknown and all(isinstance(value, str) and not value.strip() for value in given):
        return CheckResult(False, _NOT_ANSWERED)
    key = QUIZ._checked_key()
    marked: list[str] = []
    missing: list[str] = []
    right = 0
    for number, question in enumerate(QUIZ, start=1):
        letter, problem = _letter(answers.get(question.key, ""), question)
        correct, note = key[question.key]
        label = f"{number}. {question.key}:"
        if letter is None:
            missing.append(f"{label} {problem} (choose {', '.join(question.letters)})")
            continue
        right += letter == correct
        verdict = "right" if letter == correct else f"not {letter}"
        marked.append(f"{label} {verdict}. {question.choice(letter).why}{note}")
    lines = missing or marked  # which answers are wrong only once every one is given
    if unknown:
        shown = ", ".join(repr(name) for name in unknown)
        lines.append(f"There is no question {shown}; the keys are: {', '.join(QUIZ.keys)}.")
    passed = right == len(QUIZ) and not unknown
    if passed:
        head = f"all {len(QUIZ)} right."
    elif missing:
        head = (
            f"{right} of {len(QUIZ)} right so far. Answer every question to see which"
            f" answers are wrong; {len(missing)} still to answer:"
        )
    else:
        head = f"{right} of {len(QUIZ)} right."
    return CheckResult(passed, "\n".join([head, *lines]))


__all__ = ["QUIZ", "Choice", "Question", "Quiz", "check_quiz"]
