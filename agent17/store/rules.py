"""The task board's rules as plain functions of values, whatever engine holds its rows.

The input rules, the checks of a task's dependency edges, and the
reasons a claim or a completion is refused are the same for the SQLite and
the PostgreSQL store; they live here once, as plain functions of values.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from agent17.domain import (
    ErrorCode,
    EventKind,
    Task,
    TaskError,
    TaskStatus,
    is_canonical_uuid,
    name_problem,
    preview,
    text_problem,
)
from agent17.wire import utc_wire_time

_STATUSES = frozenset(status.value for status in TaskStatus)
_EVENT_KINDS = frozenset(kind.value for kind in EventKind)
MAX_SEQUENCE: Final = 2**63 - 1
"""The largest event sequence any store can hold (SQLite INTEGER, PostgreSQL bigint)."""


def invalid(message: str) -> TaskError:
    """An `invalid_task_input` refusal."""
    return TaskError(ErrorCode.INVALID_TASK_INPUT, message)


def corrupted(message: str) -> TaskError:
    """A `graph_corrupted` refusal: the stored graph breaks a rule the schema could not enforce."""
    return TaskError(ErrorCode.GRAPH_CORRUPTED, message)


def unreadable(message: str) -> TaskError:
    """A `store_unreadable` refusal: a stored row holds something no store would write."""
    return TaskError(ErrorCode.STORE_UNREADABLE, message)


def require_task_id(value: object, what: str = "task id") -> str:
    """`value` if it is a canonical UUID string, else invalid_task_input."""
    if not is_canonical_uuid(value):
        raise invalid(f"{what} must be a canonical UUID (lowercase, hyphenated): {preview(value)}")
    assert isinstance(value, str)
    return value


def require_owner(value: object) -> str:
    """`value` if it is a valid name, else invalid_task_input."""
    problem = name_problem(value)
    if problem is not None:
        raise invalid(f"owner {problem}: {preview(value)}")
    assert isinstance(value, str)
    return value


def require_text(value: object, what: str, *, required: bool = False) -> str:
    """`value` if it is valid text (a subject must have a non-space), else invalid_task_input."""
    problem = text_problem(value, required=required)
    if problem is not None:
        raise invalid(f"{what} {problem}")
    assert isinstance(value, str)
    return value


def require_dependencies(blocked_by: object) -> tuple[str, ...]:
    """`blocked_by` as a tuple of distinct canonical ids, of any length."""
    if isinstance(blocked_by, str | bytes) or not isinstance(blocked_by, Iterable):
        raise invalid("blocked_by must be a list of task ids")
    dependencies = tuple(require_task_id(dep, "a blocked_by id") for dep in blocked_by)
    if len(set(dependencies)) != len(dependencies):
        raise invalid("blocked_by names the same task twice")
    return dependencies


def require_draft(
    subject: object, description: object, blocked_by: object
) -> tuple[str, str, tuple[str, ...]]:
    """One task to create, checked: (subject, description, blocked_by)."""
    return (
        require_text(subject, "subject", required=True),
        require_text(description, "description"),
        require_dependencies(blocked_by),
    )


def require_drafts(drafts: object) -> list[tuple[str, str, tuple[str, ...]]]:
    """The drafts of `create_tasks`, each a (subject, description, blocked_by) triple, checked."""
    if isinstance(drafts, str | bytes | Mapping) or not isinstance(drafts, Iterable):
        raise invalid("create_tasks takes a list of (subject, description, blocked_by) drafts")
    checked = []
    for number, draft in enumerate(drafts):
        if isinstance(draft, str | bytes) or not isinstance(draft, Sequence) or len(draft) != 3:
            raise invalid(
                f"draft {number} must be a (subject, description, blocked_by) triple,"
                f" not {preview(draft)}"
            )
        checked.append(require_draft(*draft))
    return checked


def require_event_sequence(value: object) -> int:
    """`after_sequence` of `events()`: an int from 0 (the whole log) to MAX_SEQUENCE."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQUENCE:
        raise invalid(f"after_sequence must be an integer from 0 to 2**63 - 1: {preview(value)}")
    return value


def lease_end(now: datetime, lease: timedelta) -> datetime:
    """When a lease taken at `now` runs out; a clock reading too late for that is a clock bug."""
    try:
        return now + lease
    except OverflowError:
        raise ValueError(
            f"the clock reads {now.isoformat()}: a lease of {lease} from then would end"
            " after the last time a datetime can hold"
        ) from None


def dependencies_not_found(missing: Sequence[str]) -> TaskError:
    """`blocked_by` names tasks that do not exist (the first few are named)."""
    shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
    return TaskError(
        ErrorCode.DEPENDENCY_NOT_FOUND,
        f"blocked_by names {len(missing)} tasks that do not exist: {shown}"
        if len(missing) > 1
        else f"blocked_by names a task that does not exist: {shown}",
    )


def require_status(value: object, task_id: str) -> TaskStatus:
    """A stored status as TaskStatus; anything else means the row was not written by a store."""
    if isinstance(value, str) and value in _STATUSES:
        return TaskStatus(value)
    raise unreadable(f"task {task_id} has the unknown status {preview(value)}")


def require_event_kind(value: object, sequence: int) -> EventKind:
    """A stored event kind as EventKind; anything else was not written by a store."""
    if isinstance(value, str) and value in _EVENT_KINDS:
        return EventKind(value)
    raise unreadable(f"event {sequence} has the unknown kind {preview(value)}")


def not_claimable(task: Task) -> TaskError:
    """Why a task that is not pending cannot be claimed."""
    held = f" by {task.owner}" if task.owner else ""
    return TaskError(
        ErrorCode.TASK_NOT_CLAIMABLE, f"task {task.id} is {task.status.value}{held}, not pending"
    )


def blocked(task_id: str, unfinished: Sequence[str]) -> TaskError:
    """Why a pending task with unfinished dependencies cannot be claimed."""
    return TaskError(
        ErrorCode.TASK_BLOCKED,
        f"task {task_id} waits for unfinished tasks: {', '.join(unfinished)}",
    )


@dataclass(frozen=True, slots=True)
class IssuedClaim:
    """What the token history says about one token: its task, owner and lease end."""

    task_sequence: int
    owner: str
    lease_expires_at_utc: datetime


def completion_refusal(
    task_sequence: int,
    task_id: str,
    status: TaskStatus,
    current_owner: str | None,
    owner: str,
    issued: IssuedClaim | None,
    now: datetime,
) -> TaskError:
    """Why a completion was refused: the caller's own lease ran out, or it never held this one.

    `issued` is what the token history says about the token the caller gave.
    """
    if status is TaskStatus.COMPLETED:
        return TaskError(
            ErrorCode.CLAIM_MISMATCH, f"task {task_id} is already completed by {current_owner}"
        )
    ours = issued is not None and issued.task_sequence == task_sequence and issued.owner == owner
    if ours and issued is not None and issued.lease_expires_at_utc <= now:
        held = f"; it is now held by {current_owner}" if current_owner else ""
        return TaskError(
            ErrorCode.LEASE_EXPIRED,
            f"the lease on task {task_id} expired at"
            f" {utc_wire_time(issued.lease_expires_at_utc)}{held}",
        )
    return TaskError(
        ErrorCode.CLAIM_MISMATCH,
        f"task {task_id} is not in_progress for {owner} with that claim token",
    )


class Constraint(enum.Enum):
    """Which rule of the schema refused a write."""

    CLAIM_TOKEN_REUSED = "claim_token_reused"  # a claim token issued before
    TASK_ID_TAKEN = "task_id_taken"  # a task id that exists already
    UNMET_BELOW_ZERO = "unmet_below_zero"  # a dependent's unmet count would go negative
    OTHER = "other"  # any other: the rows were not written by a store


def refused_write(constraint: Constraint, detail: str) -> TaskError:
    """What a write that broke `constraint` is refused as (its transaction is rolled back)."""
    if constraint is Constraint.CLAIM_TOKEN_REUSED:
        return TaskError(
            ErrorCode.CLAIM_TOKEN_COLLISION,
            "the claim token was issued before (it is never offered again); the claim was"
            " rolled back",
        )
    if constraint is Constraint.TASK_ID_TAKEN:
        return TaskError(ErrorCode.INVALID_TASK_INPUT, "a task with that id already exists")
    if constraint is Constraint.UNMET_BELOW_ZERO:
        return TaskError(
            ErrorCode.GRAPH_CORRUPTED,
            "the completion would push a dependent's unmet count below zero",
        )
    # Every constraint the board can meet is named above; any other refusing one of its
    # own writes means rows no store wrote.
    return TaskError(
        ErrorCode.STORE_UNREADABLE, f"the board refused a write ({detail}); nothing was changed"
    )
