"""What a message is and what the mailbox refuses: its codes, its envelope, its input rules.

Both engines' mailboxes, the protocol and the teammates share these; the
mailbox itself (team/mailbox.py) adds the transactions that move a message
queued -> claimed -> acked.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from agent17.domain import ErrorCode, Refusal, name_problem, preview


class MailboxCode(StrEnum):
    """The mailbox's own refusal codes (a state file's refusals are the board's ErrorCode)."""

    INVALID_RECIPIENT = "invalid_recipient"
    INVALID_SENDER = "invalid_sender"
    INVALID_KIND = "invalid_kind"
    INVALID_MESSAGE_BODY = "invalid_message_body"
    INVALID_ENVELOPE = "invalid_envelope"
    MESSAGE_NOT_CLAIMED = "message_not_claimed"
    DAMAGED_MESSAGE = "damaged_message"
    DAMAGED_PLAN = "damaged_plan"


class MailboxError(Refusal):
    """A known refusal of the mailbox; `code` is stable (tools report it as-is)."""

    def __init__(self, code: MailboxCode | ErrorCode, message: str) -> None:
        super().__init__(code, message)


class DamagedMessage(MailboxError):
    """A stored row that no mailbox writes (code `damaged_message`); nothing was changed.

    `sequence` is the row's, so its recipient's teammate can set it aside.
    """

    def __init__(self, sequence: object, problem: str) -> None:
        super().__init__(
            MailboxCode.DAMAGED_MESSAGE,
            f"stored message {preview(sequence)} is damaged: {problem}. No mailbox writes such"
            " a row (it was written by hand); its recipient's teammate sets it aside in"
            " dead_letters",
        )
        self.sequence = sequence


class MessageState(StrEnum):
    """Where a message is in its delivery: queued -> claimed -> acked."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    ACKED = "acked"


@dataclass(frozen=True, slots=True)
class Envelope:
    """One stored message: who to, who from, its kind and JSON body, and its delivery state."""

    sequence: int
    recipient: str
    sender: str
    kind: str
    body: str
    state: MessageState
    deliveries: int


NameRole = Literal["recipient", "sender", "kind"]

_INVALID_NAME: Final[dict[str, MailboxCode]] = {
    "recipient": MailboxCode.INVALID_RECIPIENT,
    "sender": MailboxCode.INVALID_SENDER,
    "kind": MailboxCode.INVALID_KIND,
}


def require_name(value: object, what: NameRole) -> str:
    """`value` if it is a valid name (see `name_problem`), else MailboxError `invalid_<what>`."""
    problem = name_problem(value)
    if problem is not None:
        raise MailboxError(_INVALID_NAME[what], f"{what} {problem}: {preview(value)}")
    assert isinstance(value, str)
    return value


def require_envelope(value: object) -> Envelope:
    """`value` if it can name a stored message, else MailboxError `invalid_envelope`."""
    if not isinstance(value, Envelope):
        raise MailboxError(MailboxCode.INVALID_ENVELOPE, f"not an Envelope: {preview(value)}")
    sequence = value.sequence
    if isinstance(sequence, bool) or not isinstance(sequence, int) or not 1 <= sequence < 2**63:
        raise MailboxError(
            MailboxCode.INVALID_ENVELOPE, f"no message has the sequence {preview(sequence)}"
        )
    require_name(value.recipient, "recipient")
    return value
