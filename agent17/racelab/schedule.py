"""A race's schedule and what a race reports: shared by the JSON and the SQLite race.

A schedule fixes who moves when (by default: alice scans, bob scans, alice
claims, bob claims); each worker scans once and then claims once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agent17.domain import Task

Action = Literal["scan", "claim"]
Step = tuple[str, Action]

DEFAULT_SCHEDULE: Final[tuple[Step, ...]] = (
    ("alice", "scan"),
    ("bob", "scan"),
    ("alice", "claim"),
    ("bob", "claim"),
)
"""The interleaving of the chapter: both scan before either writes."""

GATE_TIMEOUT_SECONDS: Final = 30.0
"""A safety net only: no step waits on time to be ordered, but nothing may hang forever."""


@dataclass(frozen=True, slots=True)
class RaceStep:
    """One line of a race: who did what (number 0 marks a consequence, not a scheduled step)."""

    number: int
    worker: str
    action: str
    outcome: str

    def __str__(self) -> str:
        number = f"{self.number}." if self.number else "  ->"
        return f"{number:<4} {self.worker:<6} {self.action:<6} {self.outcome}"


@dataclass(frozen=True, slots=True)
class RaceResult:
    """What a race did: its steps, who believes they own the contested task, who the board says."""

    board: str
    contested: str
    steps: tuple[RaceStep, ...]
    believers: tuple[str, ...]
    recorded_owner: str | None
    claims_committed: int
    notes: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = ()

    @property
    def double_claim(self) -> bool:
        """True when more than one worker believes it owns the contested task."""
        return len(self.believers) > 1

    def __str__(self) -> str:
        lines = [f"race on the {self.board}", *(str(step) for step in self.steps)]
        believers = ", ".join(self.believers) or "nobody"
        lines += [
            f"the board says {self.contested} is owned by: {self.recorded_owner or 'nobody'}",
            f"workers who believe they own {self.contested}: {believers}",
            f"claims of {self.contested} that committed: {self.claims_committed}",
            f"double claim: {'YES' if self.double_claim else 'no'}",
            *self.notes,
        ]
        return "\n".join(lines)


def check_schedule(schedule: Sequence[Step]) -> list[str]:
    """The workers of `schedule` in order of first move; ValueError for a schedule no race has."""
    workers: list[str] = []
    seen: dict[str, list[str]] = {}
    for worker, action in schedule:
        if action not in ("scan", "claim"):
            raise ValueError(f"unknown action {action!r}: use 'scan' or 'claim'")
        if worker not in workers:
            workers.append(worker)
        seen.setdefault(worker, []).append(action)
    for worker, actions in seen.items():
        if actions != ["scan", "claim"]:
            raise ValueError(f"{worker} must scan once and then claim once, got {actions}")
    return workers


@contextmanager
def race_workspace(workspace: str | Path | None) -> Iterator[Path]:
    """`workspace`, or a temporary folder removed after the race."""
    if workspace is not None:
        yield Path(workspace)
        return
    with tempfile.TemporaryDirectory(prefix="agent17-race-") as folder:
        yield Path(folder)
