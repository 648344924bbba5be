"""The chapter's vocabulary: tasks, claims, completions, events and task errors.

Plain frozen dataclasses: they cross threads and processes as values and can
never be half-updated. Pydantic lives only at the edges (tool input, wire).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

Clock = Callable[[], datetime]
"""A zero-argument callable returning an aware UTC datetime."""

IdFactory = Callable[[], str]
"""A zero-argument callable returning a canonical UUID string."""

CANONICAL_UUID: Final = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


def is_canonical_uuid(value: object) -> bool:
    """True for a lowercase, hyphenated UUID string such as str(uuid.uuid4())."""
    return isinstance(value, str) and CANONICAL_UUID.fullmatch(value) is not None


class TaskStatus(StrEnum):
    """Where a task is in its life: pending -> in_progress -> completed."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class Task:
    """One node of the task graph, as the business sees it (no lease details)."""

    id: str
    subject: str
    description: str
    status: TaskStatus
    owner: str | None
    blocked_by: tuple[str, ...]


def completed_ids(tasks: Iterable[Task]) -> frozenset[str]:
    """The ids of the completed tasks in a snapshot of the board."""
    return frozenset(task.id for task in tasks if task.status is TaskStatus.COMPLETED)


def waiting_for(task: Task, completed: frozenset[str]) -> tuple[str, ...]:
    """The dependencies of `task` that are not completed yet, in the order given."""
    return tuple(dependency for dependency in task.blocked_by if dependency not in completed)


def is_ready(task: Task, completed: frozenset[str]) -> bool:
    """Pending with every dependency completed: what claim_next may hand out."""
    return task.status is TaskStatus.PENDING and not waiting_for(task, completed)


@dataclass(frozen=True, slots=True)
class TaskClaim:
    """Proof of a claim: the task, the token that may complete it, and when it lapses."""

    task: Task
    claim_token: str
    lease_expires_at_utc: datetime


@dataclass(frozen=True, slots=True)
class TaskCompletion:
    """A completed task and the ids of the tasks this completion made claimable."""

    task: Task
    unblocked: tuple[str, ...]


class EventKind(StrEnum):
    """The transitions the store records in its append-only event log."""

    CREATED = "created"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    LEASE_EXPIRED = "lease_expired"


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One row of the event log: what happened to which task, when, and for whom."""

    sequence: int
    kind: EventKind
    task_id: str
    at_utc: datetime
    owner: str | None = None
    claim_token: str | None = None


class ErrorCode(StrEnum):
    """Stable error codes: tools, tests and notebooks match on these strings."""

    TASK_NOT_FOUND = "task_not_found"
    INVALID_TASK_INPUT = "invalid_task_input"
    DEPENDENCY_NOT_FOUND = "dependency_not_found"
    TASK_NOT_CLAIMABLE = "task_not_claimable"
    TASK_BLOCKED = "task_blocked"
    CLAIM_MISMATCH = "claim_mismatch"
    LEASE_EXPIRED = "lease_expired"
    GRAPH_CORRUPTED = "graph_corrupted"
    CLAIM_TOKEN_COLLISION = "claim_token_collision"
    SCHEMA_VERSION_MISMATCH = "schema_version_mismatch"
    UNSAFE_STORE_PATH = "unsafe_store_path"


class TaskError(Exception):
    """A known, expected refusal of the task store; `code` is one of ErrorCode."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code: str = str(code)
        self.message: str = message

    def __repr__(self) -> str:
        return f"TaskError(code={self.code!r}, message={self.message!r})"


def utc_now() -> datetime:
    """The default clock: the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def require_utc(moment: datetime) -> datetime:
    """Return `moment` in UTC, refusing naive datetimes (a clock bug, not user input)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"clock returned a naive datetime: {moment!r}")
    return moment.astimezone(UTC)
