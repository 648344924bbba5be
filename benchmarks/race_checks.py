"""The race exercises' checks: their bound, the wrong answers they catch, and one check's time.

Run it from the repository root:

    .venv/bin/python benchmarks/race_checks.py [--runs 5]

For each race exercise (take_if_pending, claim_one, fenced_effect, append_note)
it prints the bound of the schedule exploration and how many schedules the
reference solution's check played within it, how many of the catalogued wrong
answers (`wrong_claims.RACE_WRONG_ANSWERS`) the check caught with their
expected words, and the time of one `check()` of the solution (the median and
the slowest of `--runs`, exactly as a notebook cell runs it: a forked check
process; claim_one's includes its race of four OS processes). The baseline
measured in the same run is one `check()` of an exercise that explores nothing
(`lease_is_live`, a search of a small complete space), so a slow machine shows
up in both columns. Nothing here is a test: no time is asserted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from wrong_claims import RACE_WRONG_ANSWERS  # the catalogue of wrong answers is test data

from agent17.exercises import EXERCISES, check

HELD = re.compile(r"every one of (\d+) schedules held \(([^)]*)\)")


def seconds_of(name: str, candidate: Callable[..., Any], runs: int) -> list[float]:
    """The seconds of `runs` checks of `candidate`."""
    taken = []
    for _ in range(runs):
        started = time.monotonic()
        check(name, candidate)
        taken.append(time.monotonic() - started)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed checks per exercise")
    args = parser.parse_args()
    baseline = statistics.median(
        seconds_of("lease_is_live", EXERCISES["lease_is_live"].solution, args.runs)
    )
    print(f"baseline: one check of lease_is_live, median of {args.runs}: {baseline:.2f} s\n")
    header = (
        f"{'exercise':<16} {'schedules':>9} {'caught':>7} {'median s':>9} {'max s':>6}"
        f" {'x base':>7}"
    )
    print(header)
    print("-" * len(header))
    bounds = []
    for name, wrong in RACE_WRONG_ANSWERS.items():
        caught = 0
        for _, candidate, fragment in wrong:
            result = check(name, candidate)
            caught += not result.passed and fragment in result.feedback
        held = HELD.search(check(name, EXERCISES[name].solution).feedback)
        played, bound = (held.group(1), held.group(2)) if held else ("?", "?")
        bounds.append(f"{name}: {bound}")
        seconds = seconds_of(name, EXERCISES[name].solution, args.runs)
        median = statistics.median(seconds)
        print(
            f"{name:<16} {played:>9} {f'{caught}/{len(wrong)}':>7} {median:>9.2f}"
            f" {max(seconds):>6.2f} {median / baseline:>7.1f}"
        )
    print("\nbounds:")
    print("\n".join(f"  {line}" for line in bounds))


if __name__ == "__main__":
    main()
