"""The wire format: the only two places where a Task or TaskClaim becomes snake_case JSON.

What these functions return is exactly what a model reads in a tool result and
in the `<auto-claimed-task>` message, and what `agent17 board --format json` prints.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent17.domain import Task, TaskClaim


def utc_wire_time(moment: datetime) -> str:
    """An aware datetime as ISO 8601 in UTC with a trailing Z (2026-01-01T00:05:00Z)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def wire_clock(moment: datetime) -> str:
    """A time of day in UTC as HH:MM:SSZ, for one-line stories (the date rarely matters)."""
    return moment.astimezone(UTC).strftime("%H:%M:%SZ")


def task_payload(task: Task) -> dict[str, Any]:
    """A task as the model and the CLI see it."""
    return {
        "id": task.id,
        "subject": task.subject,
        "description": task.description,
        "status": task.status.value,
        "owner": task.owner,
        "blocked_by": list(task.blocked_by),
    }


def claim_payload(claim: TaskClaim) -> dict[str, Any]:
    """A claim as the model sees it: the task, its claim_token and lease_expires_at_utc."""
    return {
        "task": task_payload(claim.task),
        "claim_token": claim.claim_token,
        "lease_expires_at_utc": utc_wire_time(claim.lease_expires_at_utc),
    }
