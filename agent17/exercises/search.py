"""Compare a candidate with the reference on every input of a small complete space.

A `Search` lists its space smallest input first (fewest tasks, then fewest dependencies,
...), so the first input where the candidate and the reference disagree is the smallest
counterexample: no shrinking step is needed. Its checker's `run` half calls the candidate on
each input in the sandbox and sends back each answer as plain data (a list of str exactly, a
bool exactly: a look-alike object is an answer of the wrong kind, never compared); its
`judge` half, in the caller's process, compares them with the reference's answers and draws
the smallest input where they differ, with what was expected and what the candidate said.
The feedback never shows the reference's code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from agent17.exercises._bounded import Checker, CheckResult, Plain, raised

Input = TypeVar("Input")

Answer = dict[str, Plain]
"""One answer as it crosses: {"value": v}, {"raised": text} or {"wrong_kind": why, "shown": s}."""

_SCALARS: Final = (bool, int, float, str)


def shown(value: object) -> str:
    """A candidate's object as feedback shows it: builtins by repr, anything else by its type.

    The candidate's own `__repr__` is never called, and no memory address is shown, so the
    same answer reads the same on every run.
    """
    if value is None or type(value) in _SCALARS:
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    if type(value) in (list, tuple):
        items: Sequence[object] = value  # type: ignore[assignment]
        inner = ", ".join(shown(item) for item in items[:8]) + (", ..." if len(items) > 8 else "")
        return f"[{inner}]" if type(value) is list else f"({inner})"
    return f"a {type(value).__name__}"


def value(plain: Plain) -> Answer:
    """An answer of the right kind, as plain data."""
    return {"value": plain}


def wrong_kind(why: str, said: str) -> Answer:
    """An answer that is not of the kind asked for: why, and how it is shown."""
    return {"wrong_kind": why, "shown": said}


def same(a: Plain, b: Plain) -> bool:
    """Equal as plain values, type included (True is not 1, 1 is not 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@dataclass(frozen=True, slots=True)
class Search(Generic[Input]):
    """An exercise checked on a complete space: the space, how to ask and read the candidate,
    the reference, and the words of its feedback."""

    space: Callable[[], Sequence[Input]]
    """Every input, smallest first (cached by the exercise: built once, in each process)."""
    ask: Callable[[Any, Input], object]
    """The candidate's call on one input (in the sandbox)."""
    read: Callable[[object, Input], Answer]
    """The candidate's result as plain data, or why it is not an answer (in the sandbox)."""
    reference: Callable[[Input], Plain]
    """The right answer to one input, as plain data (in the caller's process)."""
    draw: Callable[[Input], str]
    """One input, drawn for a student (a board as a table, the arguments as a list)."""
    explain: Callable[[Input, Plain, Plain], str]
    """Words for a wrong answer of the right kind: the input, what was said, what was right."""
    space_text: str
    """The space in words, after "all 1,570": "boards of up to four tasks ..." ."""
    noun: str
    """What one input is called: "board", "situation", "lease"."""

    def checker(self) -> Checker:
        """The two halves: the candidate's answers in the sandbox, the verdict outside it."""
        return Checker(self.answers, self.judge)

    def answers(self, candidate: Any) -> Plain:
        """The candidate's answer to each input in order; the first error or answer of the
        wrong kind ends the list (everything after it is larger)."""
        found: list[Plain] = []
        for item in self.space():
            try:
                answer = self.read(self.ask(candidate, item), item)
            except Exception as error:
                answer = {"raised": raised(error)}
            found.append(answer)
            if "value" not in answer:
                break
        return found

    def judge(self, data: Plain) -> CheckResult:
        """The verdict: passed if every answer is the reference's, else the smallest input
        where they differ, drawn, with what was said and what was right."""
        space = self.space()
        if not isinstance(data, list) or len(data) > len(space):
            raise ValueError("not one answer per input")
        for item, answer in zip(space, data, strict=False):
            if not isinstance(answer, dict):
                raise ValueError("an answer that is not a dict")
            expected = self.reference(item)
            if "value" in answer and same(answer["value"], expected):
                continue
            return CheckResult(False, self._differs(item, answer, expected))
        if len(data) < len(space):
            raise ValueError("fewer answers than inputs, and none of them wrong")
        return CheckResult(True, f"right on all {len(space):,} {self.space_text}.")

    def _differs(self, item: Input, answer: Answer, expected: Plain) -> str:
        heading = (
            f"the smallest {self.noun} where your answer is not right, of all"
            f" {len(self.space()):,} {self.space_text}:"
        )
        if "raised" in answer:
            words = str(answer["raised"])
        elif "wrong_kind" in answer:
            words = f"you said {answer.get('shown')}: {answer['wrong_kind']}"
        elif "value" in answer:
            words = self.explain(item, answer["value"], expected)
        else:
            raise ValueError("an answer of no known kind")
        return f"{heading}\n\n{self.draw(item)}\n\n{words}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Rows drawn as a small text table, each column as wide as its widest cell."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return "\n".join(
        (
            indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in [header, *rows]
    )


def listing(pairs: Sequence[tuple[str, str]], indent: str = "  ") -> str:
    """Named values as a short aligned list: `name:  value` per line."""
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{indent}{name.ljust(width)}  {said}" for name, said in pairs)
