"""THE NAIVE JSON BOARD: KEPT ONLY TO DEMONSTRATE THE RACE. DO NOT USE IT FOR WORK.

!!! Nothing in this chapter's code uses this board. It exists so that the race
!!! lab (agent17.racelab, notebook 01) can show what goes wrong without a
!!! transaction. Use SqliteTaskStore for anything real.

This is the shape of the earlier lesson's board: one JSON file per task in a
folder, and claiming in two separate steps:

1. `scan_unclaimed()` reads every file and returns the tasks that look
   claimable (pending, no owner, every dependency completed);
2. `claim(task_id, owner)` writes the owner into that task's file.

Between step 1 and step 2 another worker can scan the same files and see the
same task as free. Both then write, the second write silently replaces the
first, and both workers go on to do the task (time of check to time of use).
`claim` trusts the scan on purpose. The earlier lesson re-checked inside its
claim under a `threading.Lock`, but a lock object orders the threads of one
process only: two processes each hold their own lock, so for them the re-check
and the write are as far apart as the scan and the write are here. Leaving the
re-check out keeps the race at two steps per worker instead of three. Only a
transaction over the whole board makes scan, check and write one indivisible
step (SQLite's BEGIN IMMEDIATE).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent17.domain import IdFactory


@dataclass(frozen=True, slots=True)
class JsonTask:
    """A task as one JSON file holds it."""

    id: str
    sequence: int
    subject: str
    status: str
    owner: str | None
    blocked_by: tuple[str, ...]


def _task_from_json(data: dict[str, Any]) -> JsonTask:
    return JsonTask(
        id=str(data["id"]),
        sequence=int(data["sequence"]),
        subject=str(data["subject"]),
        status=str(data["status"]),
        owner=None if data["owner"] is None else str(data["owner"]),
        blocked_by=tuple(str(dep) for dep in data["blocked_by"]),
    )


class NaiveJsonTaskBoard:
    """One JSON file per task, scan then claim in two steps. Race demonstration ONLY."""

    def __init__(self, folder: str | os.PathLike[str], *, new_task_id: IdFactory) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._new_task_id = new_task_id

    def _file(self, task_id: str) -> Path:
        return self.folder / f"{task_id}.json"

    def _write(self, task: JsonTask) -> None:
        data = {
            "id": task.id,
            "sequence": task.sequence,
            "subject": task.subject,
            "status": task.status,
            "owner": task.owner,
            "blocked_by": list(task.blocked_by),
        }
        self._file(task.id).write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")

    def read(self, task_id: str) -> JsonTask:
        """One task, read from its file now."""
        return _task_from_json(json.loads(self._file(task_id).read_text(encoding="utf-8")))

    def raw(self, task_id: str) -> str:
        """The exact text of a task's file, for showing what is on disk."""
        return self._file(task_id).read_text(encoding="utf-8").strip()

    def list_tasks(self) -> list[JsonTask]:
        """Every task, in creation order."""
        tasks = [self.read(path.stem) for path in self.folder.glob("*.json")]
        return sorted(tasks, key=lambda task: task.sequence)

    def create_task(self, subject: str, blocked_by: tuple[str, ...] = ()) -> JsonTask:
        """Write a new pending task file."""
        task = JsonTask(
            id=self._new_task_id(),
            sequence=len(self.list_tasks()) + 1,
            subject=subject,
            status="pending",
            owner=None,
            blocked_by=tuple(blocked_by),
        )
        self._write(task)
        return task

    def scan_unclaimed(self) -> list[JsonTask]:
        """Step 1 of a naive claim: tasks that look free now (pending, no owner, deps done)."""
        tasks = self.list_tasks()
        done = {task.id for task in tasks if task.status == "completed"}
        return [
            task
            for task in tasks
            if task.status == "pending"
            and task.owner is None
            and all(dep in done for dep in task.blocked_by)
        ]

    def claim(self, task_id: str, owner: str) -> JsonTask:
        """Step 2 of a naive claim: write `owner` into the file the scan chose. No transaction."""
        task = self.read(task_id)
        claimed = JsonTask(
            task.id, task.sequence, task.subject, "in_progress", owner, task.blocked_by
        )
        self._write(claimed)
        return claimed

    def complete(self, task_id: str, owner: str) -> JsonTask:
        """Mark a task completed by `owner` (no owner check either: this board is naive)."""
        task = self.read(task_id)
        done = JsonTask(task.id, task.sequence, task.subject, "completed", owner, task.blocked_by)
        self._write(done)
        return done
