"""The team's typed protocol: shutdown and plan handshakes, a router, and the plan gate.

Every protocol message carries a request id, so a response answers exactly one
request; a response to an unknown or stale request changes nothing. The plan
gate (`plan_allows_effectful`) is data in the team's mailbox (a SQLite file or
the board's PostgreSQL database): the latest plan of each agent and whether the
Lead approved it. Automatic claims ask the gate
first, so a teammate whose latest plan is pending or rejected takes no task.
A stored plan row that breaks the plans' rules (written by hand) is refused
(`damaged_plan`) and keeps the gate closed: an unreadable verdict is no approval.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final, Literal, cast

from pydantic import ValidationError

from agent17.domain import (
    IdFactory,
    Refusal,
    is_canonical_uuid,
    text_problem,
)
from agent17.inputs import StrictInput, Text, Uuid, describe_validation_error
from agent17.team.mailbox import (
    DamagedMessage,
    Envelope,
    MailboxCode,
    MailboxError,
    MailboxTransaction,
    MessageState,
    SqlRunner,
    TeamMailbox,
    require_name,
)
from agent17.team.message_rows import DeadLetter
from agent17.team.plans import (
    PLAN_COLUMNS,
    PlanDecision,
    PlanRecord,
    PlanStatus,
    latest_plan,
    plan_by_request,
    plan_from_row,
)

DEFAULT_LEAD_NAME: Final = "lead"

RequestId = Uuid
"""A protocol request id: a canonical UUID string."""


class ProtocolCode(StrEnum):
    """The protocol's refusal codes: a message or a plan review it cannot take."""

    UNKNOWN_MESSAGE_KIND = "unknown_message_kind"
    MALFORMED_MESSAGE = "malformed_message"
    DAMAGED_MESSAGE = "damaged_message"
    EMPTY_MESSAGE = "empty_message"
    INVALID_MESSAGE = "invalid_message"
    EMPTY_PLAN = "empty_plan"
    INVALID_PLAN = "invalid_plan"
    REQUEST_ID_COLLISION = "request_id_collision"
    UNKNOWN_PLAN_REQUEST = "unknown_plan_request"
    STALE_PLAN_REQUEST = "stale_plan_request"
    PLAN_ALREADY_REVIEWED = "plan_already_reviewed"


class ProtocolError(Refusal):
    """A known refusal of the protocol (malformed message, unknown request); `code` is stable."""

    def __init__(self, code: ProtocolCode, message: str) -> None:
        super().__init__(code, message)


class MessageKind(StrEnum):
    """The `kind` column of a mailbox message."""

    TEXT = "text"
    SHUTDOWN_REQUEST = "shutdown_request"
    SHUTDOWN_RESPONSE = "shutdown_response"
    PLAN_SUBMISSION = "plan_submission"
    PLAN_RESPONSE = "plan_response"


class _Body(StrictInput):
    """Bodies come back from disk: validated as strictly as tool input."""


class TextMessage(_Body):
    """Free text between agents (a Lead instruction, a teammate's report)."""

    kind: ClassVar[MessageKind] = MessageKind.TEXT
    content: Text


class ShutdownRequest(_Body):
    """The Lead asks a teammate to stop; only this handshake ends a teammate."""

    kind: ClassVar[MessageKind] = MessageKind.SHUTDOWN_REQUEST
    request_id: RequestId


class ShutdownResponse(_Body):
    """A teammate's answer to one ShutdownRequest."""

    kind: ClassVar[MessageKind] = MessageKind.SHUTDOWN_RESPONSE
    request_id: RequestId
    approved: bool
    reason: Text = ""


class PlanSubmission(_Body):
    """A teammate's plan, sent to the Lead for review."""

    kind: ClassVar[MessageKind] = MessageKind.PLAN_SUBMISSION
    request_id: RequestId
    plan: Text


class PlanResponse(_Body):
    """The Lead's verdict on one PlanSubmission."""

    kind: ClassVar[MessageKind] = MessageKind.PLAN_RESPONSE
    request_id: RequestId
    approved: bool
    feedback: Text = ""


ProtocolMessage = TextMessage | ShutdownRequest | ShutdownResponse | PlanSubmission | PlanResponse
"""Any message the team exchanges."""

_MESSAGE_TYPES: Final[dict[str, type[_Body]]] = {
    message_type.kind.value: message_type
    for message_type in (
        TextMessage,
        ShutdownRequest,
        ShutdownResponse,
        PlanSubmission,
        PlanResponse,
    )
}


def encode_message(message: ProtocolMessage) -> tuple[str, str]:
    """A message as the mailbox stores it: (kind, JSON body)."""
    return message.kind.value, message.model_dump_json()


def decode_message(kind: str, body: str) -> ProtocolMessage:
    """A stored (kind, body) as a typed message; unknown or malformed is a ProtocolError."""
    message_type = _MESSAGE_TYPES.get(kind)
    if message_type is None:
        raise ProtocolError(ProtocolCode.UNKNOWN_MESSAGE_KIND, f"no message kind {kind!r}")
    try:
        return cast(ProtocolMessage, message_type.model_validate_json(body))
    except ValidationError as error:
        raise ProtocolError(
            ProtocolCode.MALFORMED_MESSAGE, f"{kind} body: {describe_validation_error(error)}"
        ) from None


class Route(StrEnum):
    """Which handler a teammate runs for a claimed message."""

    SHUTDOWN = "shutdown"
    PLAN_RESPONSE = "plan_response"
    TEXT = "text"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Routed:
    """The router's verdict: the route, the decoded message, and why it was rejected."""

    route: Route
    message: ProtocolMessage | None = None
    error_code: str = ""
    error_message: str = ""


def route_teammate_message(envelope: Envelope, *, lead_name: str) -> Routed:
    """Decide deterministically how a teammate handles one claimed envelope."""
    try:
        message = decode_message(envelope.kind, envelope.body)
    except ProtocolError as error:
        return Routed(Route.REJECT, None, error.code, error.message)
    if isinstance(message, TextMessage):
        return Routed(Route.TEXT, message)
    if isinstance(message, ShutdownRequest | PlanResponse):
        # Only the Lead may end a teammate or open its plan gate.
        if envelope.sender != lead_name:
            return Routed(
                Route.REJECT,
                message,
                "not_from_lead",
                f"{message.kind} from {envelope.sender!r}; only {lead_name!r} may send it",
            )
        route = Route.SHUTDOWN if isinstance(message, ShutdownRequest) else Route.PLAN_RESPONSE
        return Routed(route, message)
    return Routed(
        Route.REJECT,
        message,
        "misdirected_message",
        f"{message.kind} is addressed to the Lead, not to a teammate",
    )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message taken from an inbox: the envelope and its typed message or decoding error."""

    envelope: Envelope
    message: ProtocolMessage | None
    error: ProtocolError | None


def _random_request_id() -> str:
    return str(uuid.uuid4())


class TeamProtocol:
    """The typed handshakes of one team over one mailbox, and the plan gate they drive."""

    def __init__(
        self,
        mailbox: TeamMailbox,
        *,
        lead_name: str = DEFAULT_LEAD_NAME,
        new_request_id: IdFactory | None = None,
    ) -> None:
        self.mailbox = mailbox
        self.lead_name = lead_name
        self._new_request_id = new_request_id or _random_request_id

    def _request_id(self) -> str:
        value = self._new_request_id()
        if not is_canonical_uuid(value):
            raise ValueError(f"request id factory returned a non-canonical UUID: {value!r}")
        return value

    def _send(
        self, handle: MailboxTransaction, to: str, message: ProtocolMessage, *, sender: str
    ) -> Envelope:
        kind, body = encode_message(message)
        return handle.send(to, sender=sender, kind=kind, body=body)

    def send_text(
        self, to: str, content: str, *, sender: str, ack: Envelope | None = None
    ) -> Envelope:
        """Send free text from `sender` to `to`; `ack` the message it answers in the same step."""
        _require_content(content, "message")
        message = TextMessage(content=content)

        def send(handle: MailboxTransaction) -> Envelope:
            sent = self._send(handle, to, message, sender=sender)
            if ack is not None:
                handle.ack(ack)
            return sent

        return self.mailbox.transaction(send)

    def request_shutdown(self, name: str) -> ShutdownRequest:
        """Send a ShutdownRequest from the Lead to teammate `name`."""
        request = ShutdownRequest(request_id=self._request_id())
        self.mailbox.transaction(
            lambda handle: self._send(handle, name, request, sender=self.lead_name)
        )
        return request

    def accept_shutdown(
        self, name: str, envelope: Envelope, request: ShutdownRequest
    ) -> ShutdownResponse:
        """Answer a ShutdownRequest, mark `name` closed and ack it, in one transaction."""
        response = ShutdownResponse(request_id=request.request_id, approved=True)

        def accept(handle: MailboxTransaction) -> None:
            self._send(handle, self.lead_name, response, sender=name)
            # Closed for every process that reads the team, in the same commit as the answer.
            handle.connection.execute(
                "UPDATE teammates SET state = 'closed' WHERE name = ?", (name,)
            )
            handle.ack(envelope)

        self.mailbox.transaction(accept)
        return response

    def submit_plan(self, name: str, plan: str) -> PlanSubmission:
        """Record `plan` as `name`'s latest (pending) plan and send it to the Lead, atomically."""
        require_name(name, "sender")
        _require_content(plan, "plan")
        submission = PlanSubmission(request_id=self._request_id(), plan=plan)

        def submit(handle: MailboxTransaction) -> None:
            inserted = handle.connection.execute(
                "INSERT INTO plans (request_id, agent, plan) VALUES (?, ?, ?)"
                " ON CONFLICT (request_id) DO NOTHING RETURNING sequence",
                (submission.request_id, name, plan),
            ).fetchone()
            if inserted is None:
                raise ProtocolError(
                    ProtocolCode.REQUEST_ID_COLLISION,
                    f"request id {submission.request_id} was already used",
                )
            self._send(handle, self.lead_name, submission, sender=name)

        self.mailbox.transaction(submit)
        return submission

    def review_plan(self, request_id: str, *, approve: bool, feedback: str = "") -> PlanResponse:
        """Send the Lead's verdict on a pending plan to its author (the gate moves on receipt).

        One verdict per plan: a second review of the same plan is refused
        (`plan_already_reviewed`), even before the teammate has read the first.
        """
        try:
            response = PlanResponse(request_id=request_id, approved=approve, feedback=feedback)
        except ValidationError as error:
            raise ProtocolError(
                ProtocolCode.MALFORMED_MESSAGE, f"plan_response: {describe_validation_error(error)}"
            ) from None

        def review(handle: MailboxTransaction) -> None:
            plan = plan_by_request(handle.connection, request_id)
            if plan is None:
                raise ProtocolError(
                    ProtocolCode.UNKNOWN_PLAN_REQUEST, f"no plan with request id {request_id}"
                )
            latest = latest_plan(handle.connection, plan.agent)
            if latest is None or latest.request_id != request_id:
                raise ProtocolError(
                    ProtocolCode.STALE_PLAN_REQUEST,
                    f"{plan.agent} has submitted a newer plan since",
                )
            answered = handle.connection.execute(
                "UPDATE plans SET verdict = ? WHERE request_id = ? AND verdict IS NULL",
                ("approve" if approve else "reject", request_id),
            ).rowcount
            if answered != 1 or plan.status is not PlanStatus.PENDING:
                raise ProtocolError(
                    ProtocolCode.PLAN_ALREADY_REVIEWED,
                    f"plan {request_id} already has the Lead's verdict",
                )
            self._send(handle, plan.agent, response, sender=self.lead_name)

        self.mailbox.transaction(review)
        return response

    def awaiting_review(self) -> list[PlanRecord]:
        """Latest plans that are pending with no verdict yet, oldest first (the Lead's queue)."""
        rows = self.mailbox.snapshot(
            lambda connection: connection.execute(
                f"SELECT {PLAN_COLUMNS} FROM plans AS p WHERE verdict IS NULL"
                " AND status = 'pending' AND sequence ="
                " (SELECT max(sequence) FROM plans WHERE agent = p.agent) ORDER BY sequence"
            ).fetchall()
        )
        return [plan_from_row(row) for row in rows]

    def apply_plan_response(
        self, name: str, envelope: Envelope, response: PlanResponse
    ) -> PlanDecision:
        """Update `name`'s plan gate from a PlanResponse and ack it, in one transaction.

        A response for an unknown, foreign, superseded or already decided
        request is acked and ignored: the gate does not move.
        """

        def apply(handle: MailboxTransaction) -> PlanDecision:
            decision = self._decide(handle.connection, name, response)
            handle.ack(envelope)
            return decision

        return self.mailbox.transaction(apply)

    def _decide(self, connection: SqlRunner, name: str, response: PlanResponse) -> PlanDecision:
        plan = plan_by_request(connection, response.request_id)
        if plan is None:
            return PlanDecision(False, "unknown_request", None)
        if plan.agent != name:
            return PlanDecision(False, "not_your_plan", plan)
        latest = latest_plan(connection, name)
        if latest is None or latest.request_id != plan.request_id:
            return PlanDecision(False, "stale_request", plan)
        if plan.status is not PlanStatus.PENDING:
            return PlanDecision(False, "already_decided", plan)
        status = PlanStatus.APPROVED if response.approved else PlanStatus.REJECTED
        connection.execute(
            "UPDATE plans SET status = ?, feedback = ? WHERE request_id = ?",
            (status.value, response.feedback, plan.request_id),
        )
        updated = PlanRecord(plan.request_id, name, plan.plan, status, response.feedback)
        return PlanDecision(True, "applied", updated)

    def latest_plan(self, name: str) -> PlanRecord | None:
        """`name`'s most recent plan, or None if it never submitted one."""
        require_name(name, "sender")  # a plan's author is the sender of its submission
        return self.mailbox.snapshot(lambda connection: latest_plan(connection, name))

    def plans(self) -> list[PlanRecord]:
        """Every submitted plan, oldest first."""
        rows = self.mailbox.snapshot(
            lambda connection: connection.execute(
                f"SELECT {PLAN_COLUMNS} FROM plans ORDER BY sequence"
            ).fetchall()
        )
        return [plan_from_row(row) for row in rows]

    def plan_allows_effectful(self, name: str) -> bool:
        """True if `name` has no plan or its latest plan is approved; pending/rejected block.

        A damaged plan row blocks too: a verdict nobody can read approves nothing.
        """
        try:
            latest = self.latest_plan(name)
        except MailboxError as error:
            if error.code != MailboxCode.DAMAGED_PLAN:
                raise
            return False
        return latest is None or latest.status is PlanStatus.APPROVED

    def route(self, envelope: Envelope) -> Routed:
        """The deterministic route of a message claimed by a teammate."""
        return route_teammate_message(envelope, lead_name=self.lead_name)

    def receive_all(self, recipient: str) -> list[Delivery]:
        """Claim, decode and ack every queued message of `recipient` (the Lead's inbox).

        A damaged row is set aside as a teammate's is (its dead letter), and comes back
        as an unreadable delivery once, so the Lead hears of it and is not stopped by it.
        """
        deliveries: list[Delivery] = []
        while True:
            try:
                envelope = self.mailbox.claim(recipient)
            except DamagedMessage:
                deliveries += [
                    _dead_delivery(letter) for letter in self.mailbox.set_aside_damaged(recipient)
                ]
                continue
            if envelope is None:
                break
            try:
                delivery = Delivery(envelope, decode_message(envelope.kind, envelope.body), None)
            except ProtocolError as error:
                delivery = Delivery(envelope, None, error)
            self.mailbox.ack(envelope)
            deliveries.append(delivery)
        return deliveries


def _dead_delivery(letter: DeadLetter) -> Delivery:
    # What is known of a row that broke the rules; nothing of it is delivered as a message.
    envelope = Envelope(
        letter.sequence, letter.recipient, letter.sender or "?", "", "", MessageState.ACKED, 0
    )
    error = ProtocolError(
        ProtocolCode.DAMAGED_MESSAGE, f"message {letter.sequence} was set aside: {letter.reason}"
    )
    return Delivery(envelope, None, error)


_CONTENT_CODES: Final = {
    # what: (its code when blank, its code when not text)
    "message": (ProtocolCode.EMPTY_MESSAGE, ProtocolCode.INVALID_MESSAGE),
    "plan": (ProtocolCode.EMPTY_PLAN, ProtocolCode.INVALID_PLAN),
}


def _require_content(text: str, what: Literal["message", "plan"]) -> None:
    problem = text_problem(text, required=True)
    if problem is not None:
        empty, invalid = _CONTENT_CODES[what]
        blank = isinstance(text, str) and not text.strip()
        raise ProtocolError(empty if blank else invalid, f"a {what} {problem}")
