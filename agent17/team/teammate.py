"""One teammate and one pass of its idle loop: `tick()`.

The order of a pass is the chapter's rule:

1. closed? then nothing happens;
2. claim ONE mailbox message; a typed protocol message is routed and handled
   (shutdown, plan response) and that pass takes no task; a text message is
   given to the agent;
3. no message: ask the plan gate; a pending or rejected latest plan stops here,
   with zero writes to the task database;
4. allowed: `claim_next(name)`; a claim reaches the agent as one deterministic
   `<auto-claimed-task>` message whose claim token is the run's idempotency key;
5. nothing to claim: idle (the runtime decides how long to wait).

A message whose stored row is damaged (written by hand, past the mailbox's
rules) is never handled: the teammate moves the damaged rows of its queue to
the dead letters, tells the Lead of each in the same transaction, and reports
each in one pass of its own; the good messages behind them follow in order.
Starting does the same before it requeues unacked mail, so a damaged row can
neither crash a teammate nor hold up its queue, at any start.

`tick()` is synchronous and deterministic: notebooks call it from a button,
and the autonomous runtime calls exactly the same method from a worker thread.
The teammate never completes a task itself: only the agent's explicit
complete_task call does, otherwise the lease runs out.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from agent17.claims import WorkStealingRuntime
from agent17.domain import TaskClaim
from agent17.team.mailbox import DamagedMessage, Envelope, MailboxTransaction
from agent17.team.message_rows import DeadLetter
from agent17.team.protocol import (
    PlanResponse,
    ProtocolMessage,
    Route,
    ShutdownRequest,
    TeamProtocol,
    TextMessage,
    encode_message,
)
from agent17.team.registry import TeamRegistry
from agent17.wire import claim_payload, wire_clock


class AgentReply(Protocol):
    """What an agent run returns; only the final text matters here."""

    @property
    def final_text(self) -> str: ...


class TeammateAgent(Protocol):
    """Anything that runs one user turn: AgentRunner, or a fake in tests.

    For an auto-claimed task it gets the claim too: its token is the run's
    idempotency key, and effectful tools are fenced by it (refused once the
    claim is no longer live).
    """

    def run(
        self,
        user_text: str,
        *,
        idempotency_key: str | None = None,
        claim: TaskClaim | None = None,
    ) -> AgentReply: ...


def auto_claimed_task_message(claim: TaskClaim) -> str:
    """The one deterministic user message that hands an auto-claimed task to the agent."""
    payload = json.dumps(claim_payload(claim), sort_keys=True, separators=(",", ":"))
    return (
        "You claimed this task from the shared board. Do the work, then call complete_task"
        " with its task id and claim_token before the lease expires.\n"
        f"<auto-claimed-task>{payload}</auto-claimed-task>"
    )


def incoming_message_text(sender: str, content: str) -> str:
    """The user message an agent gets for a text message from `sender`."""
    return f"Message from {sender}:\n{content}"


def dead_letter_report(letter: DeadLetter) -> str:
    """What a teammate tells the Lead about a message of its own that it set aside unread."""
    sender = "" if letter.sender is None else f" from {letter.sender}"
    return (
        f"I set aside message {letter.sequence}{sender} without reading it: its stored row"
        f" is damaged ({letter.reason}). It is kept in dead_letters; nothing it asked for"
        " was done."
    )


class TickKind(StrEnum):
    """What one pass of the idle loop did."""

    CLOSED = "closed"
    PROTOCOL_HANDLED = "protocol_handled"
    MESSAGE_HANDLED = "message_handled"
    MESSAGE_REJECTED = "message_rejected"
    DEAD_LETTERED = "dead_lettered"
    PLAN_BLOCKED = "plan_blocked"
    CLAIMED = "claimed"
    IDLE = "idle"


EMPTY_TICKS = frozenset({TickKind.IDLE, TickKind.PLAN_BLOCKED})
"""Passes that found nothing to do: the runtime waits after them."""


@dataclass(frozen=True, slots=True)
class TickOutcome:
    """The result of one `tick()`: its kind, plus what was handled, claimed or said."""

    teammate: str
    kind: TickKind
    envelope: Envelope | None = None
    message: ProtocolMessage | None = None
    claim: TaskClaim | None = None
    final_text: str | None = None
    detail: str = ""
    dead_letter: DeadLetter | None = None

    def describe(self, *, named: bool = True) -> str:
        """One readable line for logs, timelines and notebooks (the only describer of a tick).

        `named=False` leaves out the leading "alice: " (for a timeline that prints it).
        """
        line = self._describe()
        return line if named else line.split(": ", 1)[1]

    def _describe(self) -> str:
        name, kind = self.teammate, self.kind
        sender = self.envelope.sender if self.envelope is not None else "?"
        if kind is TickKind.CLAIMED and self.claim is not None:
            lease = wire_clock(self.claim.lease_expires_at_utc)
            return (
                f"{name}: claimed {self.claim.task.subject} (lease until {lease})"
                f" -> {self.final_text!r}"
            )
        if kind is TickKind.PROTOCOL_HANDLED and self.message is not None:
            return (
                f"{name}: protocol_handled {self.message.kind.value} from {sender}"
                f" ({self.detail}); no task taken"
            )
        if kind is TickKind.MESSAGE_HANDLED:
            return f"{name}: message_handled from {sender} -> {self.final_text!r}; no task taken"
        if kind is TickKind.MESSAGE_REJECTED:
            return f"{name}: message_rejected from {sender} ({self.detail}); no task taken"
        if kind is TickKind.DEAD_LETTERED and self.dead_letter is not None:
            letter = self.dead_letter
            origin = "" if letter.sender is None else f" from {letter.sender}"
            return (
                f"{name}: dead_lettered message {letter.sequence}{origin} ({letter.reason});"
                " the Lead was told; no task taken"
            )
        if kind is TickKind.PLAN_BLOCKED:
            return f"{name}: plan_blocked ({self.detail}); no claim, no write"
        if kind is TickKind.IDLE:
            return f"{name}: idle (nothing ready to claim)"
        return f"{name}: closed (shut down; does nothing)"


class Teammate:
    """A named worker: its agent, the team protocol and the shared board; `tick()` drives it.

    One thread at a time drives a teammate (ticks are serialised by a lock).
    Creating a teammate joins the team under its name (refused, `teammate_running`,
    while another live worker has that name, in any process) and then redelivers
    any message that name claimed but never acked before a crash; `leave()`
    lets the name go.
    """

    def __init__(
        self,
        name: str,
        *,
        agent: TeammateAgent,
        protocol: TeamProtocol,
        work_stealing: WorkStealingRuntime,
    ) -> None:
        self.name = name
        self.agent = agent
        self.protocol = protocol
        self.board = work_stealing.store
        self._closed = False
        self._lock = threading.Lock()
        self._unreported: deque[DeadLetter] = deque()
        # Only the holder of the name may requeue its unacked mail: join first.
        self._membership = TeamRegistry(protocol.mailbox).join(name)
        try:
            self.recover_unacked()
        except BaseException:
            self._membership.leave()
            raise

    def leave(self) -> None:
        """Stop being this name's live worker (the team's row keeps its state)."""
        self._membership.leave()

    def ensure_membership(self) -> None:
        """Refuse to go on (TeamError `teammate_name_lost`) once the hold on the name is gone."""
        self._membership.ensure()

    @property
    def closed(self) -> bool:
        """True once the teammate approved a shutdown request; it never works again."""
        return self._closed

    @property
    def lead_name(self) -> str:
        """Who gets the teammate's reports and protocol answers."""
        return self.protocol.lead_name

    def recover_unacked(self) -> int:
        """Requeue messages claimed but never acked (a crash mid-handling); return how many.

        In the same transaction, and first, the damaged rows of the queue go to the
        dead letters (the next passes report them), so none of them stops the start.
        """
        with self._lock:

            def recover(handle: MailboxTransaction) -> tuple[list[DeadLetter], int]:
                return self._set_aside(handle), handle.requeue_unacked(self.name)

            letters, requeued = self.protocol.mailbox.transaction(recover)
            self._unreported.extend(letters)
            return requeued

    def _set_aside(self, handle: MailboxTransaction) -> list[DeadLetter]:
        # The Lead's reports commit with the move: each dead letter is told exactly once,
        # even if this process dies before it prints its line.
        letters = handle.set_aside_damaged(self.name)
        for letter in letters:
            kind, body = encode_message(TextMessage(content=dead_letter_report(letter)))
            handle.send(self.lead_name, sender=self.name, kind=kind, body=body)
        return letters

    def tick(self) -> TickOutcome:
        """Run exactly one pass of the idle loop, in the chapter's order, and say what it did."""
        with self._lock:
            if self._closed:
                return self._outcome(TickKind.CLOSED)
            mail = self._next_message()
            if isinstance(mail, DeadLetter):
                return self._outcome(TickKind.DEAD_LETTERED, letter=mail)
            if mail is not None:
                return self._handle(mail)
            # The gate comes before the board: a blocked teammate must not write to it at all.
            if not self.protocol.plan_allows_effectful(self.name):
                return self._outcome(
                    TickKind.PLAN_BLOCKED, detail="latest plan is pending or rejected"
                )
            claim = self.board.claim_next(self.name)
            if claim is None:
                return self._outcome(TickKind.IDLE)
            reply = self.agent.run(
                auto_claimed_task_message(claim), idempotency_key=claim.claim_token, claim=claim
            )
            self._report(reply.final_text)
            return self._outcome(TickKind.CLAIMED, claim=claim, final_text=reply.final_text)

    def _next_message(self) -> Envelope | DeadLetter | None:
        """The oldest message; a damaged one is set aside unread, and reported instead."""
        if self._unreported:
            return self._unreported.popleft()
        try:
            return self.protocol.mailbox.claim(self.name)
        except DamagedMessage:
            letters = self.protocol.mailbox.transaction(self._set_aside)
            if not letters:
                # Unreachable unless the row was repaired meanwhile: the sweep reads
                # every row a claim reads, by rules that refuse at least as much.
                raise
            self._unreported.extend(letters[1:])
            return letters[0]

    def _handle(self, envelope: Envelope) -> TickOutcome:
        routed = self.protocol.route(envelope)
        message = routed.message
        if routed.route is Route.SHUTDOWN and isinstance(message, ShutdownRequest):
            # The request never reaches the model: the runtime answers it and stops.
            self.protocol.accept_shutdown(self.name, envelope, message)
            self._closed = True
            return self._outcome(
                TickKind.PROTOCOL_HANDLED, envelope, message, detail="shutdown approved"
            )
        if routed.route is Route.PLAN_RESPONSE and isinstance(message, PlanResponse):
            decision = self.protocol.apply_plan_response(self.name, envelope, message)
            if decision.applied and decision.plan is not None:
                detail = f"plan {decision.plan.status.value}"
            else:
                detail = f"plan gate unchanged: {decision.reason}"
            return self._outcome(TickKind.PROTOCOL_HANDLED, envelope, message, detail=detail)
        if routed.route is Route.TEXT and isinstance(message, TextMessage):
            reply = self.agent.run(incoming_message_text(envelope.sender, message.content))
            self._report(reply.final_text, answering=envelope)
            return self._outcome(
                TickKind.MESSAGE_HANDLED, envelope, message, final_text=reply.final_text
            )
        # A message we cannot act on is acked, so it cannot block the mailbox forever.
        self.protocol.mailbox.ack(envelope)
        return self._outcome(
            TickKind.MESSAGE_REJECTED,
            envelope,
            message,
            detail=f"{routed.error_code}: {routed.error_message}",
        )

    def _report(self, final_text: str, *, answering: Envelope | None = None) -> None:
        # The agent's answer goes back to the Lead as a message, never as a task change.
        # Report and ack commit together, so a crash cannot send the same answer twice.
        if final_text.strip():
            self.protocol.send_text(self.lead_name, final_text, sender=self.name, ack=answering)
        elif answering is not None:
            self.protocol.mailbox.ack(answering)

    def _outcome(
        self,
        kind: TickKind,
        envelope: Envelope | None = None,
        message: ProtocolMessage | None = None,
        *,
        claim: TaskClaim | None = None,
        final_text: str | None = None,
        detail: str = "",
        letter: DeadLetter | None = None,
    ) -> TickOutcome:
        return TickOutcome(self.name, kind, envelope, message, claim, final_text, detail, letter)
