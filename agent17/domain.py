"""The chapter's vocabulary: tasks, claims, completions, events, refusals and input rules.

Plain frozen dataclasses: they cross threads and processes as values and can
never be half-updated. Pydantic lives only at the edges (tool input, wire).
This module imports nothing of agent17: every other module may import it.
"""

from __future__ import annotations

import math
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
    """One row of the event log: what happened to which task, when, and for whom.

    A `claimed` event also says until when that claim's lease ran.
    """

    sequence: int
    kind: EventKind
    task_id: str
    at_utc: datetime
    owner: str | None = None
    claim_token: str | None = None
    lease_expires_at_utc: datetime | None = None


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
    STORE_UNREADABLE = "store_unreadable"
    # A store the machine will not let us use: a PostgreSQL server that cannot be reached,
    # or whose connection was lost in the middle of an operation, or a SQLite state file on
    # a full, read-only or failing disk, or one this user may not open (the message says
    # whether anything changed and what to do).
    STORE_UNAVAILABLE = "store_unavailable"
    # A SQLite -wal beside a state file that was written for another file (the one a
    # restored backup replaced): replaying it would mix that file's pages into this one.
    FOREIGN_WAL = "foreign_wal"
    STORE_NOT_FOUND = "store_not_found"  # opened not to create: no board or mailbox there yet
    ALREADY_HELD = "already_held"  # a name or lock another live process holds


class Refusal(Exception):
    """A known, expected refusal with a stable string `code`: the base of every such error.

    Task, tool, mailbox, protocol and team errors all derive from it, so a tool
    boundary turns any of them into `{"error": {code, message}}` the same way,
    while anything that is not a Refusal is a bug and propagates.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code: str = str(code)
        self.message: str = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class TaskError(Refusal):
    """A refusal of the task store; `code` is one of ErrorCode."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(str(code), message)


class ToolCode(StrEnum):
    """Refusals of a tool call itself: its arguments, its name, the permission to run it."""

    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    PERMISSION_DENIED = "permission_denied"


class WorkspaceCode(StrEnum):
    """Refusals of the workspace tools: a path, a file, the shell."""

    INVALID_PATH = "invalid_path"
    PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
    PROTECTED_PATH = "protected_path"
    FILE_NOT_FOUND = "file_not_found"
    NOT_A_FILE = "not_a_file"
    FILE_UNREADABLE = "file_unreadable"
    FILE_UNWRITABLE = "file_unwritable"
    SHELL_TIMEOUT = "shell_timeout"
    SHELL_FAILED = "shell_failed"


class ToolError(Refusal):
    """A known refusal of a non-task tool (file, shell); `code` is stable."""

    def __init__(self, code: ToolCode | WorkspaceCode, message: str) -> None:
        super().__init__(code, message)


# -- input rules: the same for the stores, the mailbox and the tools -------------------------

MAX_NAME_LENGTH: Final = 200
MIN_LEASE_SECONDS: Final = 0.001
MAX_LEASE_SECONDS: Final = 365 * 24 * 3600.0

# C0 and C1 control characters, DEL included; NUL is one of them.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A lone surrogate cannot be encoded as UTF-8, so no database or HTTP body can carry it.
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


def preview(value: object, limit: int = 60) -> str:
    """A short repr of untrusted input for an error message (surrogates escaped, long cut)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for str()
        return f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_problem(value: object) -> str | None:
    """Why `value` is not a valid name (owner, identity, sender, recipient), or None if it is."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not 1 <= len(value) <= MAX_NAME_LENGTH:
        return f"must have 1 to {MAX_NAME_LENGTH} characters, not {len(value)}"
    if not value.strip():
        return "must have a character that is not a space"
    if _CONTROL.search(value):
        return "must not contain control characters (NUL, newline, tab, ...)"
    if _SURROGATE.search(value):
        return "must be valid Unicode (it contains a lone surrogate)"
    return None


def text_problem(value: object, *, required: bool = False) -> str | None:
    """Why `value` is not valid text (subject, description, body), or None if it is.

    Any Unicode string is text except one with a lone surrogate or a NUL. A
    lone surrogate has no UTF-8 encoding, so no database, file or HTTP body can
    carry it. NUL is a choice: SQLite would store it, but a PostgreSQL text
    value cannot hold it, and one rule for both stores means a board reads the
    same wherever it lives. `required`: it must have a character that is not a
    space (a subject, a message).
    """
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if _SURROGATE.search(value):
        return "must be valid Unicode (it contains a lone surrogate)"
    if "\x00" in value:
        return "must not contain NUL characters"
    if required and not value.strip():
        return "must have a character that is not a space"
    return None


def check_lease_seconds(value: object) -> float:
    """`value` as a lease length in seconds: a finite number from 0.001 to one year."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"lease_seconds must be a number, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float, such as 10**400
        seconds = math.inf
    if not math.isfinite(seconds) or not MIN_LEASE_SECONDS <= seconds <= MAX_LEASE_SECONDS:
        raise ValueError(
            f"lease_seconds must be a finite number from {MIN_LEASE_SECONDS} to"
            f" {MAX_LEASE_SECONDS:,.0f} (one year), not {preview(value)}"
        )
    return seconds


def utc_now() -> datetime:
    """The default clock: the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def require_utc(moment: datetime) -> datetime:
    """Return `moment` in UTC, refusing naive datetimes and non-datetimes (a clock bug)."""
    if not isinstance(moment, datetime):
        raise TypeError(f"clock returned {preview(moment)}, not an aware datetime")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"clock returned a naive datetime: {moment!r}")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # such as datetime.min at UTC+14: before the first UTC datetime
        raise ValueError(f"clock returned a time with no UTC datetime: {moment!r}") from None
