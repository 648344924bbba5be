"""The typed protocol: encoding, the deterministic router, request ids and the plan gate.

Everything stored (plans, verdicts, handshakes) is tested on both engines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from team_backends import BACKENDS, TeamPlace, make_place
from team_fixtures import request_id

from agent17.deterministic import uuid_sequence
from agent17.team.mailbox import Envelope, MailboxError, MessageState
from agent17.team.plans import PlanStatus
from agent17.team.protocol import (
    MessageKind,
    PlanResponse,
    PlanSubmission,
    ProtocolError,
    ProtocolMessage,
    Route,
    ShutdownRequest,
    ShutdownResponse,
    TeamProtocol,
    TextMessage,
    decode_message,
    encode_message,
)

ID = "00000000-0000-4000-8000-000000000001"
MISDIRECTED = "misdirected_message"


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    """The team's mailbox (and its plans) on each engine."""
    made = make_place(request.param, tmp_path)
    yield made
    made.close()


def new_protocol(place: TeamPlace) -> TeamProtocol:
    return TeamProtocol(place.mailbox(), new_request_id=uuid_sequence(5))


def deliver(protocol: TeamProtocol, to: str, message: ProtocolMessage, sender: str) -> Envelope:
    kind, body = encode_message(message)
    protocol.mailbox.send(to, sender=sender, kind=kind, body=body)
    envelope = protocol.mailbox.claim(to)
    assert envelope is not None
    return envelope


@pytest.mark.parametrize(
    "message",
    [
        TextMessage(content="hello"),
        ShutdownRequest(request_id=ID),
        ShutdownResponse(request_id=ID, approved=True, reason="done"),
        PlanSubmission(request_id=ID, plan="1. read 2. write"),
        PlanResponse(request_id=ID, approved=False, feedback="too broad"),
    ],
)
def test_every_message_type_survives_encoding_and_decoding(message: ProtocolMessage) -> None:
    kind, body = encode_message(message)
    assert kind == message.kind.value
    assert decode_message(kind, body) == message


@pytest.mark.parametrize(
    ("kind", "body", "code"),
    [
        ("shutdown_request", "{not json", "malformed_message"),
        ("shutdown_request", "{}", "malformed_message"),
        ("shutdown_request", '{"request_id": "not-a-uuid"}', "malformed_message"),
        ("plan_response", f'{{"request_id": "{ID}", "approved": "yes"}}', "malformed_message"),
        ("text", '{"content": "hi", "owner": "alice"}', "malformed_message"),
        ("telepathy", "{}", "unknown_message_kind"),
    ],
)
def test_a_malformed_message_is_an_error_with_a_code(kind: str, body: str, code: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        decode_message(kind, body)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("message", "sender", "route", "error_code"),
    [
        (ShutdownRequest(request_id=ID), "lead", Route.SHUTDOWN, ""),
        (PlanResponse(request_id=ID, approved=True), "lead", Route.PLAN_RESPONSE, ""),
        (TextMessage(content="hi"), "lead", Route.TEXT, ""),
        (TextMessage(content="hi"), "bob", Route.TEXT, ""),
        (ShutdownRequest(request_id=ID), "bob", Route.REJECT, "not_from_lead"),
        (PlanResponse(request_id=ID, approved=True), "bob", Route.REJECT, "not_from_lead"),
        (
            ShutdownResponse(request_id=ID, approved=True),
            "lead",
            Route.REJECT,
            "misdirected_message",
        ),
        (PlanSubmission(request_id=ID, plan="p"), "lead", Route.REJECT, MISDIRECTED),
    ],
)
def test_the_router_sends_each_message_to_exactly_one_handler(
    place: TeamPlace, message: ProtocolMessage, sender: str, route: Route, error_code: str
) -> None:
    protocol = new_protocol(place)
    envelope = deliver(protocol, "alice", message, sender)
    routed = protocol.route(envelope)
    assert (routed.route, routed.error_code) == (route, error_code)
    assert routed.message == message
    assert protocol.route(envelope) == routed  # deterministic


def test_the_router_rejects_a_malformed_body_instead_of_crashing(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    protocol.mailbox.send("alice", sender="lead", kind="plan_response", body='{"approved": 1}')
    envelope = protocol.mailbox.claim("alice")
    assert envelope is not None
    routed = protocol.route(envelope)
    assert (routed.route, routed.message, routed.error_code) == (
        Route.REJECT,
        None,
        "malformed_message",
    )


def test_request_ids_come_from_the_injected_factory(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    assert protocol.request_shutdown("alice").request_id == request_id(1)
    assert protocol.submit_plan("bob", "plan").request_id == request_id(2)


def test_a_factory_that_returns_a_non_canonical_id_is_a_wiring_bug(place: TeamPlace) -> None:
    protocol = TeamProtocol(place.mailbox(), new_request_id=lambda: "request-1")
    with pytest.raises(ValueError, match="non-canonical"):
        protocol.request_shutdown("alice")
    assert protocol.mailbox.messages() == []


def test_no_plan_allows_effectful_work(place: TeamPlace) -> None:
    assert new_protocol(place).plan_allows_effectful("alice") is True


def test_a_submitted_plan_is_pending_and_reaches_the_lead_in_one_step(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    submission = protocol.submit_plan("alice", "1. read the spec")
    latest = protocol.latest_plan("alice")
    assert latest is not None
    assert (latest.request_id, latest.status, latest.plan) == (
        submission.request_id,
        PlanStatus.PENDING,
        "1. read the spec",
    )
    assert protocol.plan_allows_effectful("alice") is False
    assert protocol.plan_allows_effectful("bob") is True
    (delivery,) = protocol.receive_all("lead")
    assert delivery.envelope.sender == "alice"
    assert delivery.message == submission


def test_an_empty_plan_is_refused(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    with pytest.raises(ProtocolError) as refused:
        protocol.submit_plan("alice", "  ")
    assert refused.value.code == "empty_plan"
    assert protocol.plans() == []


def respond(protocol: TeamProtocol, name: str, response: PlanResponse) -> tuple[bool, str]:
    envelope = deliver(protocol, name, response, "lead")
    decision = protocol.apply_plan_response(name, envelope, response)
    (stored,) = [m for m in protocol.mailbox.messages(name) if m.sequence == envelope.sequence]
    assert stored.state is MessageState.ACKED
    return decision.applied, decision.reason


@pytest.mark.parametrize(
    ("approved", "allowed", "status"),
    [(True, True, PlanStatus.APPROVED), (False, False, PlanStatus.REJECTED)],
)
def test_the_leads_verdict_moves_the_gate_when_the_teammate_handles_it(
    place: TeamPlace, approved: bool, allowed: bool, status: PlanStatus
) -> None:
    protocol = new_protocol(place)
    submission = protocol.submit_plan("alice", "plan")
    response = protocol.review_plan(submission.request_id, approve=approved, feedback="ok")
    assert protocol.plan_allows_effectful("alice") is False  # not handled yet
    envelope = protocol.mailbox.claim("alice")
    assert envelope is not None
    decision = protocol.apply_plan_response("alice", envelope, response)
    assert decision.applied
    assert decision.plan is not None and decision.plan.status is status
    assert protocol.plan_allows_effectful("alice") is allowed
    latest = protocol.latest_plan("alice")
    assert latest is not None and (latest.status, latest.feedback) == (status, "ok")


def test_a_response_to_an_unknown_request_leaves_the_gate_closed(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    protocol.submit_plan("alice", "plan")
    unknown = PlanResponse(request_id=ID, approved=True)
    assert respond(protocol, "alice", unknown) == (False, "unknown_request")
    assert protocol.plan_allows_effectful("alice") is False


def test_a_response_to_a_superseded_plan_leaves_the_gate_closed(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    old = protocol.submit_plan("alice", "first plan")
    protocol.submit_plan("alice", "second plan")
    stale = PlanResponse(request_id=old.request_id, approved=True)
    assert respond(protocol, "alice", stale) == (False, "stale_request")
    assert protocol.plan_allows_effectful("alice") is False


def test_a_response_to_someone_elses_plan_leaves_the_gate_closed(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    protocol.submit_plan("alice", "alice's plan")
    bobs = protocol.submit_plan("bob", "bob's plan")
    assert respond(protocol, "alice", PlanResponse(request_id=bobs.request_id, approved=True)) == (
        False,
        "not_your_plan",
    )
    assert protocol.plan_allows_effectful("alice") is False
    assert protocol.plan_allows_effectful("bob") is False


def test_a_second_verdict_on_a_decided_plan_changes_nothing(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    plan = protocol.submit_plan("alice", "plan")
    rejected = PlanResponse(request_id=plan.request_id, approved=False)
    approved = PlanResponse(request_id=plan.request_id, approved=True)
    assert respond(protocol, "alice", rejected) == (True, "applied")
    assert respond(protocol, "alice", approved) == (False, "already_decided")
    assert protocol.plan_allows_effectful("alice") is False


def test_a_new_plan_after_approval_closes_the_gate_again(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    first = protocol.submit_plan("alice", "plan one")
    respond(protocol, "alice", PlanResponse(request_id=first.request_id, approved=True))
    assert protocol.plan_allows_effectful("alice") is True
    protocol.submit_plan("alice", "plan two")
    assert protocol.plan_allows_effectful("alice") is False


@pytest.mark.parametrize("case", ["unknown", "stale", "reviewed"])
def test_the_lead_cannot_review_an_unknown_stale_or_decided_plan(
    place: TeamPlace, case: str
) -> None:
    protocol = new_protocol(place)
    first = protocol.submit_plan("alice", "plan one")
    target, code = {
        "unknown": (ID, "unknown_plan_request"),
        "stale": (first.request_id, "stale_plan_request"),
        "reviewed": (first.request_id, "plan_already_reviewed"),
    }[case]
    if case == "stale":
        protocol.submit_plan("alice", "plan two")
    if case == "reviewed":
        respond(protocol, "alice", PlanResponse(request_id=first.request_id, approved=True))
    before = protocol.mailbox.messages("alice")
    with pytest.raises(ProtocolError) as refused:
        protocol.review_plan(target, approve=True)
    assert refused.value.code == code
    assert protocol.mailbox.messages("alice") == before


def test_a_second_verdict_on_one_plan_is_refused_before_the_teammate_reads_the_first(
    place: TeamPlace,
) -> None:
    protocol = new_protocol(place)
    plan = protocol.submit_plan("alice", "plan one")
    protocol.review_plan(plan.request_id, approve=True)
    # alice has not read the approval yet: the plan is still pending, but answered.
    assert protocol.awaiting_review() == []
    with pytest.raises(ProtocolError) as twice:
        protocol.review_plan(plan.request_id, approve=False, feedback="changed my mind")
    assert twice.value.code == "plan_already_reviewed"
    verdicts = [m for m in protocol.mailbox.messages("alice") if m.kind == "plan_response"]
    assert len(verdicts) == 1


def test_the_leads_review_queue_holds_each_agents_latest_unanswered_plan(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    protocol.submit_plan("alice", "old plan")
    newer = protocol.submit_plan("alice", "new plan")
    bobs = protocol.submit_plan("bob", "bob's plan")
    assert [p.request_id for p in protocol.awaiting_review()] == [
        newer.request_id,
        bobs.request_id,
    ]


@pytest.mark.parametrize("name", ["", "\x00alice", "al\nice", "\ud800", "x" * 201], ids=repr)
def test_a_bad_agent_name_is_a_coded_refusal_and_stores_nothing(
    place: TeamPlace, name: str
) -> None:
    protocol = new_protocol(place)
    for action in (
        lambda: protocol.submit_plan(name, "a plan"),
        lambda: protocol.request_shutdown(name),
        lambda: protocol.send_text(name, "hello", sender="lead"),
        lambda: protocol.send_text("lead", "hello", sender=name),
    ):
        with pytest.raises(MailboxError) as refused:
            action()
        assert refused.value.code.startswith("invalid_")
    assert protocol.plans() == [] and protocol.mailbox.messages() == []


def test_plans_and_their_verdicts_survive_reopening(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    plan = protocol.submit_plan("alice", "plan")
    respond(protocol, "alice", PlanResponse(request_id=plan.request_id, approved=False))
    protocol.mailbox.close()
    reopened = TeamProtocol(place.mailbox())
    assert reopened.plan_allows_effectful("alice") is False
    latest = reopened.latest_plan("alice")
    assert latest is not None and latest.status is PlanStatus.REJECTED


def test_accepting_a_shutdown_answers_the_lead_and_acks_in_one_step(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    request = protocol.request_shutdown("alice")
    envelope = protocol.mailbox.claim("alice")
    assert envelope is not None
    response = protocol.accept_shutdown("alice", envelope, request)
    assert response == ShutdownResponse(request_id=request.request_id, approved=True)
    assert [m.state for m in protocol.mailbox.messages("alice")] == [MessageState.ACKED]
    (delivery,) = protocol.receive_all("lead")
    assert (delivery.envelope.sender, delivery.message) == ("alice", response)


def test_the_leads_inbox_reports_a_malformed_message_instead_of_crashing(place: TeamPlace) -> None:
    protocol = new_protocol(place)
    protocol.mailbox.send("lead", sender="alice", kind=MessageKind.TEXT.value, body='{"x": 1}')
    protocol.send_text("lead", "hello", sender="bob")
    broken, fine = protocol.receive_all("lead")
    assert broken.message is None and broken.error is not None
    assert broken.error.code == "malformed_message"
    assert fine.message == TextMessage(content="hello") and fine.error is None
    assert protocol.receive_all("lead") == []


@pytest.mark.parametrize("name", ["", "\x00alice", "\ud800", 5, None, ["alice"]], ids=repr)
def test_reading_the_plan_gate_of_a_bad_name_is_invalid_sender(place: TeamPlace, name: str) -> None:
    protocol = new_protocol(place)
    for action in (
        lambda: protocol.latest_plan(name),
        lambda: protocol.plan_allows_effectful(name),
    ):
        with pytest.raises(MailboxError) as refused:
            action()
        assert refused.value.code == "invalid_sender"


@pytest.mark.parametrize(
    ("request_id_", "approve", "feedback"),
    [("not-a-uuid", True, ""), (ID, "yes", ""), (ID, True, "half \ud800"), (ID, True, 7)],
    ids=repr,
)
def test_a_review_with_bad_arguments_is_a_malformed_message_and_sends_nothing(
    place: TeamPlace, request_id_: object, approve: object, feedback: object
) -> None:
    protocol = new_protocol(place)
    submitted = protocol.submit_plan("alice", "1. read")
    rid = submitted.request_id if request_id_ == ID else request_id_
    before = protocol.mailbox.messages()
    with pytest.raises(ProtocolError) as refused:
        protocol.review_plan(rid, approve=approve, feedback=feedback)  # type: ignore[arg-type]
    assert refused.value.code == "malformed_message"
    assert protocol.mailbox.messages() == before
    assert protocol.awaiting_review() == [protocol.latest_plan("alice")]
