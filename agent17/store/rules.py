"""The task board's rules as plain functions of values, whatever engine holds its rows.

The input rules, the checks of a task's dependency edges, and the
reasons a claim or a completion is refused are the same for the SQLite and
the PostgreSQL store; they live here once, as plain functions of values.
"""

from __future__ import annotations

import enum
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from agent17.domain import (
    ErrorCode,
    EventKind,
    IdFactory,
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


def random_uuid() -> str:
    """A fresh random id: the default task id and claim token of both stores."""
    return str(uuid.uuid4())


class ClaimTokens:
    """Where a store's claim tokens come from: its factory, each one checked.

    A token drawn for a claim that took nothing (claim_next found no task, the
    claim rolled back before it was issued) is given back and used by the next
    claim, so an empty poll uses up no token (a counting generator stays gapless).
    """

    def __init__(self, factory: IdFactory | None) -> None:
        self._factory: IdFactory = factory or random_uuid
        self._spare: str | None = None
        self._lock = threading.Lock()  # threads sharing one store never draw one token twice

    def draw(self) -> str:
        """The token for the claim about to be made."""
        with self._lock:
            token, self._spare = self._spare or self._factory(), None
        if not is_canonical_uuid(token):
            raise ValueError(f"new_claim_token returned a non-canonical UUID: {token!r}")
        return token

    def give_back(self, token: str) -> None:
        """`token` was never issued: the next claim takes it."""
        self._spare = token


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


def stored_task(
    task_id: object,
    subject: object,
    description: object,
    status: TaskStatus,
    owner: object,
    blocked_by: tuple[str, ...],
) -> Task:
    """A Task from stored values, refusing a value of a type no store writes.

    A column edited by hand can hold a number or a blob where text belongs;
    such a Task would only fail later, far from the file (in a tool's JSON, say).
    """
    if not isinstance(task_id, str):
        raise unreadable(f"a task row has the id {preview(task_id)}")
    return Task(
        task_id,
        _stored_text(subject, "subject", task_id),
        _stored_text(description, "description", task_id),
        status,
        None if owner is None else _stored_text(owner, "owner", task_id),
        blocked_by,
    )


def _stored_text(value: object, what: str, task_id: str) -> str:
    if not isinstance(value, str):
        raise unreadable(f"task {task_id} has a {what} that is not text: {preview(value)}")
    return value


@dataclass(frozen=True, slots=True)
class Edge:
    """One stored dependency edge of a task, with what the board says about its target."""

    dependency_sequence: int
    dependency_id: str | None  # None: the target row is missing
    dependency_status: str | None


def check_edges(
    task_sequence: int, task_id: str, unmet: int, edges: Sequence[Edge]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task's dependency ids and the unfinished ones, after checking every edge and the count.

    The schema makes these impossible; a file edited behind the store's back
    can still hold them, and a broken graph must never look like "blocked".
    """
    ids: list[str] = []
    unfinished: list[str] = []
    for edge in edges:
        if edge.dependency_id is None:
            raise corrupted(f"a dependency of task {task_id} points at a missing task")
        if edge.dependency_sequence == task_sequence:
            raise corrupted(f"task {task_id} depends on itself")
        if edge.dependency_sequence > task_sequence:
            raise corrupted(
                f"task {task_id} depends on the newer task {edge.dependency_id}:"
                " a dependency must be older, or cycles become possible"
            )
        ids.append(edge.dependency_id)
        if edge.dependency_status != TaskStatus.COMPLETED:
            unfinished.append(edge.dependency_id)
    # The count is what claim_next trusts; an inflated one would hide a ready task forever.
    if len(unfinished) != unmet:
        raise corrupted(
            f"task {task_id} records {unmet} unmet dependencies but its edges show"
            f" {len(unfinished)}"
        )
    return tuple(ids), tuple(unfinished)


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
        return TaskError(ErrorCode.CLAIM_TOKEN_COLLISION, "the claim token was issued before")
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
