"""The team layer: persistent mailbox, typed protocol and plan gate, teammates and their runtime."""

from agent17.team.mailbox import Envelope, Mailbox, MailboxError, MessageState, WakeRegistry
from agent17.team.protocol import (
    MessageKind,
    PlanDecision,
    PlanRecord,
    PlanResponse,
    PlanStatus,
    PlanSubmission,
    ProtocolError,
    ShutdownRequest,
    ShutdownResponse,
    TeamProtocol,
    TextMessage,
)
from agent17.team.runtime import TeamError, TeammateRuntime, TeammateStateError
from agent17.team.sleepers import EventSleeper, ManualSleeper, ScriptedSleeper, SleepCall, Sleeper
from agent17.team.teammate import Teammate, TickKind, TickOutcome, auto_claimed_task_message

__all__ = [
    "Envelope",
    "EventSleeper",
    "Mailbox",
    "MailboxError",
    "ManualSleeper",
    "MessageKind",
    "MessageState",
    "PlanDecision",
    "PlanRecord",
    "PlanResponse",
    "PlanStatus",
    "PlanSubmission",
    "ProtocolError",
    "ScriptedSleeper",
    "ShutdownRequest",
    "ShutdownResponse",
    "SleepCall",
    "Sleeper",
    "TeamError",
    "TeamProtocol",
    "Teammate",
    "TeammateRuntime",
    "TeammateStateError",
    "TextMessage",
    "TickKind",
    "TickOutcome",
    "WakeRegistry",
    "auto_claimed_task_message",
]
