"""Explore the schedules of a scenario, stop at the first that breaks a rule, and shrink it.

Stateless: every schedule is played from a fresh world (a fresh file), so a
schedule is nothing but its list of decisions. Two kinds of exploration:

- *bounded*: every schedule with at most `preemptions` preemptions (a switch
  away from a worker that could have gone on), fewest preemptions first
  (iterative context bounding); after the decisions a schedule forces, each
  worker goes on until it finishes or waits;
- *sampled*: schedules drawn from a fixed seed (a random switch now and then),
  for scenarios with more workers than the bounded search can afford.

The first schedule that breaks a rule is shrunk: single decisions are changed
while the same rule still breaks and the timeline gets shorter (then fewer
preemptions). Everything is deterministic: the same candidate gets the same
schedules, the same count and the same shrunk timeline on every run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, Protocol

from agent17.exercises.schedules.baton import Baton
from agent17.exercises.schedules.run import Chooser, Decision, Problem, Row, Run, World

MAX_SCHEDULES: Final = 3000  # per scenario: a safety net far above what the exercises need
SHRINK_ATTEMPTS: Final = 150
SWITCH_CHANCE: Final = 0.35  # in a sampled schedule, how often a step goes to a random worker


class Scenario(Protocol):
    """Who races, and on what: `world(run)` makes a fresh one for each schedule."""

    @property
    def name(self) -> str:
        """In words, for the feedback: "2 workers, 2 jobs"."""

    @property
    def workers(self) -> tuple[str, ...]:
        """The workers' names, one lane each."""

    def world(self, run: Run) -> World:
        """A fresh world for one schedule."""


@dataclass(frozen=True, slots=True)
class Played:
    """A schedule as played: its decisions, its timeline, and the rule it broke (if any)."""

    decisions: tuple[Decision, ...]
    rows: tuple[Row, ...]
    problem: Problem | None

    @property
    def choices(self) -> tuple[int, ...]:
        """The schedule itself: the lane chosen at each decision."""
        return tuple(decision.chosen for decision in self.decisions)

    @property
    def preemptions(self) -> int:
        """How many times it switched away from a worker that could have gone on."""
        return _preemptions(self.decisions, len(self.decisions))


@dataclass(frozen=True, slots=True)
class Broken:
    """The shrunk schedule that broke a rule: plain data, the same on every run."""

    scenario: str
    workers: tuple[str, ...]
    choices: tuple[int, ...]
    preemptions: int
    rows: tuple[Row, ...]
    kind: str
    words: str


@dataclass(frozen=True, slots=True)
class Exploration:
    """How many schedules were played, within which bound, and the broken one (None: all held)."""

    explored: int
    bound: str
    broken: Broken | None


def _preemptions(decisions: Sequence[Decision], upto: int) -> int:
    return sum(decision.preempts for decision in decisions[:upto])


def _follow(prefix: Sequence[int]) -> Chooser:
    """Choose as `prefix` says while it lasts (when it can), then the default."""

    def choose(decisions: Sequence[Decision], runnable: tuple[int, ...], default: int) -> int:
        index = len(decisions)
        return prefix[index] if index < len(prefix) else default

    return choose


def _sampler(rng: random.Random) -> Chooser:
    def choose(decisions: Sequence[Decision], runnable: tuple[int, ...], default: int) -> int:
        return rng.choice(runnable) if rng.random() < SWITCH_CHANCE else default

    return choose


Player = Callable[[Scenario, Chooser], Played]


def player(new_baton: Callable[[], Baton]) -> Player:
    """Play one schedule of a scenario from a fresh world, with a fresh baton."""

    def play(scenario: Scenario, choose: Chooser) -> Played:
        run = Run(scenario.workers, new_baton())
        world = scenario.world(run)
        try:
            run.play(world, choose)
        finally:
            world.close()
        return Played(tuple(run.decisions), run.rows(), run.problem)

    return play


def bounded(scenario: Scenario, play: Player, preemptions: int) -> tuple[int, Played | None]:
    """Every schedule with at most `preemptions` preemptions, fewest first; stop at a broken one.

    The answer: how many were played, and the first broken one (None: none broke).
    """
    queue: list[tuple[int, tuple[int, ...]]] = [(0, ())]
    played = 0
    while queue and played < MAX_SCHEDULES:
        _, prefix = heapq.heappop(queue)
        outcome = play(scenario, _follow(prefix))
        played += 1
        if outcome.problem is not None:
            return played, outcome
        decisions = outcome.decisions
        # Each schedule is reached once: alternatives only where this one followed the default.
        for index in range(len(prefix), len(decisions)):
            decision = decisions[index]
            before = _preemptions(decisions, index)
            for other in decision.runnable:
                if other == decision.chosen:
                    continue
                cost = before + replace(decision, chosen=other).preempts
                if cost <= preemptions:
                    heapq.heappush(queue, (cost, (*outcome.choices[:index], other)))
    return played, None


def sampled(scenario: Scenario, play: Player, count: int, seed: str) -> tuple[int, Played | None]:
    """`count` draws from `seed` (each from its own seeded generator); how many schedules
    they played (the same one drawn twice counts once), and the first broken one."""
    played: set[tuple[int, ...]] = set()
    for number in range(count):
        outcome = play(scenario, _sampler(random.Random(f"{seed}/{scenario.name}/{number}")))
        played.add(outcome.choices)
        if outcome.problem is not None:
            return len(played), outcome
    return len(played), None


def _size(outcome: Played) -> tuple[int, int, tuple[int, ...]]:
    return len(outcome.rows), outcome.preemptions, outcome.choices


# A worker the scheduler gave up on may still run; an endless schedule is long to replay.
UNSHRUNK: Final = frozenset({"stuck", "endless"})


def shrink(scenario: Scenario, play: Player, broken: Played, preemptions: int) -> Played:
    """A shorter schedule (then one with fewer preemptions) that breaks the same rule."""
    assert broken.problem is not None
    kind = broken.problem.kind
    if kind in UNSHRUNK:
        return broken
    best = broken
    attempts = 0
    improved = True
    while improved and attempts < SHRINK_ATTEMPTS:
        improved = False
        choices = best.choices
        for index in range(len(choices)):
            for other in (*best.decisions[index].runnable, None):
                if other == choices[index]:
                    continue
                # None: from here on the default (drops every later forced switch).
                prefix = choices[:index] if other is None else (*choices[:index], other)
                outcome = play(scenario, _follow(prefix))
                attempts += 1
                if (
                    outcome.problem is not None
                    and outcome.problem.kind == kind
                    and outcome.preemptions <= max(preemptions, best.preemptions)
                    and _size(outcome) < _size(best)
                ):
                    best, improved = outcome, True
                    break
                if attempts >= SHRINK_ATTEMPTS:
                    return best
            if improved:
                break
    return best


def broken_of(scenario: Scenario, outcome: Played) -> Broken:
    """The plain record of a broken schedule."""
    assert outcome.problem is not None
    return Broken(
        scenario.name,
        scenario.workers,
        outcome.choices,
        outcome.preemptions,
        outcome.rows,
        outcome.problem.kind,
        outcome.problem.words,
    )


def explore(
    exhaustive: Sequence[Scenario],
    drawn: Sequence[Scenario],
    *,
    bound: str,
    preemptions: int,
    samples: int,
    seed: str,
    new_baton: Callable[[], Baton],
) -> Exploration:
    """Every bounded schedule of each `exhaustive` scenario, then `samples` of each `drawn` one.

    Stops at the first broken schedule and shrinks it. `bound` says the bound in words.
    """
    play = player(new_baton)
    explored = 0
    for scenario in exhaustive:
        count, outcome = bounded(scenario, play, preemptions)
        explored += count
        if outcome is not None:
            shrunk = shrink(scenario, play, outcome, preemptions)
            return Exploration(explored, bound, broken_of(scenario, shrunk))
    for scenario in drawn:
        count, outcome = sampled(scenario, play, samples, seed)
        explored += count
        if outcome is not None:
            shrunk = shrink(scenario, play, outcome, outcome.preemptions)
            return Exploration(explored, bound, broken_of(scenario, shrunk))
    return Exploration(explored, bound, None)
