"""The race on the naive JSON board: each worker a generator paused between its steps.

The schedule is followed exactly. Both scans see C free, both claims write,
and both workers believe they own C.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path

from agent17.deterministic import uuid_sequence
from agent17.racelab.json_board import NaiveJsonTaskBoard
from agent17.racelab.schedule import (
    DEFAULT_SCHEDULE,
    RaceResult,
    RaceStep,
    Step,
    check_schedule,
    race_workspace,
)


def run_json_race(
    schedule: Sequence[Step] = DEFAULT_SCHEDULE, *, workspace: str | Path | None = None
) -> RaceResult:
    """Run the schedule on the naive JSON board (one file per task, scan then claim)."""
    workers = check_schedule(schedule)
    with race_workspace(workspace) as folder:
        board = NaiveJsonTaskBoard(folder / "json-board", new_task_id=uuid_sequence(17))
        a = board.create_task("A")
        b = board.create_task("B")
        board.complete(a.id, workers[0])
        board.complete(b.id, workers[-1])
        c = board.create_task("C", blocked_by=(a.id, b.id))
        beliefs: dict[str, str] = {}

        def worker(name: str) -> Generator[str, None, None]:
            ready = board.scan_unclaimed()
            if not ready:
                yield "sees nothing ready"
                return
            target = ready[0]
            yield f"sees {', '.join(task.subject for task in ready)} ready; picks {target.subject}"
            board.claim(target.id, name)
            beliefs[name] = target.subject
            now_says = _file_says(board, target.id)
            yield f"writes owner={name}; {target.subject}'s file now says {now_says}"

        running = {name: worker(name) for name in workers}
        steps = []
        for number, (name, action) in enumerate(schedule, start=1):
            outcome = next(running[name], "(nothing left to do)")
            steps.append(RaceStep(number, name, action, outcome))
        final = board.read(c.id)
        believers = tuple(name for name in workers if beliefs.get(name) == c.subject)
        writes = sum(1 for step in steps if step.action == "claim" and "writes" in step.outcome)
        return RaceResult(
            board="naive JSON board",
            contested=c.subject,
            steps=tuple(steps),
            believers=believers,
            recorded_owner=final.owner,
            claims_committed=writes,
            notes=(
                f"{c.subject}'s file on disk says {_file_says(board, c.id)}",
                *(
                    ["the last write won silently; every believer will now do the work"]
                    if len(believers) > 1
                    else []
                ),
            ),
        )


def _file_says(board: NaiveJsonTaskBoard, task_id: str) -> str:
    task = board.read(task_id)
    return f"status={task.status} owner={task.owner}"
