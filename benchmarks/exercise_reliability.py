"""How reliably the `claim_one` checker catches the typical wrong answers, run after run.

Run it from the repository root:

    .venv/bin/python benchmarks/exercise_reliability.py [--runs 20]

Each wrong answer below is a first attempt a class really writes. Every one is
checked `--runs` times with `check("claim_one", ...)`, exactly as a notebook
cell does (a forked check process, four racing worker processes per run). The
table shows how often it was caught, how many different feedback texts the
runs gave (1: the student reads the same words every time, and nbval can
compare them) and the feedback's first line. Two right answers are checked
the same way: a checker that also fails good code would teach the wrong
lesson. Nothing here is a test: no time is asserted; the seconds per check are
printed so a slow machine shows up.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from claim_one_answers import (
    deferred_begin,
    ignores_the_rowcount,
    leaves_its_transaction_open,
    one_statement,
    select_then_update,
    takes_the_newest,
    two_transactions,
)

from agent17.exercises import EXERCISES, check

Candidate = Callable[[sqlite3.Connection, str], "int | None"]
WRONG: list[tuple[str, Candidate]] = [
    ("the starter (EXERCISES['claim_one'].starter)", EXERCISES["claim_one"].starter),
    ("select-then-update without a transaction", select_then_update),
    ("select-then-update in two transactions", two_transactions),
    ("ignoring the rowcount", ignores_the_rowcount),
    ("deferred BEGIN without handling busy", deferred_begin),
    ("taking the wrong job (highest id)", takes_the_newest),
    ("transaction left open", leaves_its_transaction_open),
]
RIGHT: list[tuple[str, Candidate]] = [
    ("the solution (BEGIN IMMEDIATE ... COMMIT)", EXERCISES["claim_one"].solution),
    ("one UPDATE ... RETURNING", one_statement),
]


def measure(candidate: Candidate, runs: int) -> tuple[int, set[str], list[float]]:
    """Runs that passed, the distinct feedback texts, and the seconds of each check."""
    passed, feedbacks, seconds = 0, set(), []
    for _ in range(runs):
        started = time.monotonic()
        result = check("claim_one", candidate)
        seconds.append(time.monotonic() - started)
        passed += result.passed
        feedbacks.add(result.feedback)
    return passed, feedbacks, seconds


def first_line(feedbacks: set[str], width: int = 110) -> str:
    """The first line of the (first) feedback, cut to `width` characters."""
    line = sorted(feedbacks)[0].splitlines()[0]
    return line if len(line) <= width else line[: width - 3] + "..."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="checks per candidate")
    args = parser.parse_args()
    print(f"claim_one checker, {args.runs} runs per candidate\n")
    header = (
        f"{'wrong answer':<46} {'caught':>7} {'texts':>5} {'s/check':>8}  feedback (first line)"
    )
    print(header)
    print("-" * len(header))
    for name, candidate in WRONG:
        passed, feedbacks, seconds = measure(candidate, args.runs)
        caught = f"{args.runs - passed}/{args.runs}"
        median = statistics.median(seconds)
        print(f"{name:<46} {caught:>7} {len(feedbacks):>5} {median:>8.2f}  {first_line(feedbacks)}")
    print()
    print(f"{'right answer':<46} {'passed':>7} {'texts':>5} {'s/check':>8}")
    for name, candidate in RIGHT:
        passed, feedbacks, seconds = measure(candidate, args.runs)
        median = statistics.median(seconds)
        print(f"{name:<46} {f'{passed}/{args.runs}':>7} {len(feedbacks):>5} {median:>8.2f}")


if __name__ == "__main__":
    main()
