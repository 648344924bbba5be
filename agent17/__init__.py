"""agent17: work stealing and autonomy on a leased task board.

The names of the public contract (CONTRACT.md), plus the few the notebooks use.
"""

from typing import TYPE_CHECKING, Any

from agent17.armour.own_secrets import hide_own_environment, started_as_the_agent17_command

# Before anything slow: the `agent17` command's keys and passwords are in its
# /proc/<pid>/environ, which the user's other processes may read until this runs.
if started_as_the_agent17_command():
    hide_own_environment()

# Then: in the browser edition this completes the kernel's empty fcntl module.
import agent17.browser  # noqa: F401
from agent17.armour.whole_import import import_whole
from agent17.claims import DirectTaskClaimService, ToolContext, WorkStealingRuntime
from agent17.domain import (
    ErrorCode,
    EventKind,
    Refusal,
    Task,
    TaskClaim,
    TaskCompletion,
    TaskError,
    TaskEvent,
    TaskStatus,
)
from agent17.store.sqlite import SqliteTaskStore
from agent17.team.mailbox import Envelope, Mailbox, MailboxError
from agent17.tools.base import ToolDefinition, ToolRegistry
from agent17.tools.task_tools import (
    leased_task_tool_definitions,
    register_leased_task_tools,
    register_teammate_leased_task_tools,
)
from agent17.wire import claim_payload, task_payload

if TYPE_CHECKING:
    from agent17.store.postgres import PostgresTaskStore
    from agent17.team.pg_mailbox import PostgresMailbox


def __getattr__(name: str) -> Any:
    # The PostgreSQL classes are imported on first use, so `import agent17` never loads
    # them (their driver is only imported when one is constructed), and whole: a Ctrl-C
    # during that first import must not leave their modules half made.
    if name == "PostgresTaskStore":
        return import_whole("agent17.store.postgres").PostgresTaskStore
    if name == "PostgresMailbox":
        return import_whole("agent17.team.pg_mailbox").PostgresMailbox
    raise AttributeError(f"module 'agent17' has no attribute {name!r}")


__all__ = [
    "DirectTaskClaimService",
    "Envelope",
    "ErrorCode",
    "EventKind",
    "Mailbox",
    "MailboxError",
    "PostgresMailbox",
    "PostgresTaskStore",
    "Refusal",
    "SqliteTaskStore",
    "Task",
    "TaskClaim",
    "TaskCompletion",
    "TaskError",
    "TaskEvent",
    "TaskStatus",
    "ToolContext",
    "ToolDefinition",
    "ToolRegistry",
    "WorkStealingRuntime",
    "claim_payload",
    "leased_task_tool_definitions",
    "register_leased_task_tools",
    "register_teammate_leased_task_tools",
    "task_payload",
]
