"""One teammate, stepped by hand: the order of an idle-loop pass and what each pass does."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import raises_code, task_id, token
from team_fixtures import FakeAgent, Team, auto_claimed_payload, post, request_id, team

from agent17 import TaskStatus
from agent17.deterministic import ManualClock
from agent17.team.mailbox import Mailbox, MessageState
from agent17.team.protocol import (
    PlanResponse,
    ShutdownRequest,
    ShutdownResponse,
    TeamProtocol,
    TextMessage,
)
from agent17.team.teammate import Teammate, TickKind, TickOutcome, auto_claimed_task_message


def lead_inbox(crew: Team) -> list[Any]:
    return [delivery.message for delivery in crew.protocol.receive_all("lead")]


def test_a_shutdown_waiting_before_a_ready_task_wins_and_the_model_is_never_called(
    tmp_path: Path,
) -> None:
    with team(tmp_path) as crew:
        a = crew.store.create_task("A")
        alice = crew.spawn("alice")
        request = crew.protocol.request_shutdown("alice")

        outcome = alice.tick()

        assert outcome.kind is TickKind.PROTOCOL_HANDLED
        assert outcome.message == request
        assert alice.closed
        assert crew.agents["alice"].calls == []
        assert crew.status(a.id) is TaskStatus.PENDING
        assert lead_inbox(crew) == [ShutdownResponse(request_id=request.request_id, approved=True)]
        # Closed is final: later passes touch neither the mailbox nor the board.
        crew.protocol.send_text("alice", "are you there?", sender="lead")
        assert alice.tick().kind is TickKind.CLOSED
        assert crew.status(a.id) is TaskStatus.PENDING
        assert crew.agents["alice"].calls == []


def test_protocol_messages_and_lead_messages_come_before_new_work(tmp_path: Path) -> None:
    with team(tmp_path, complete=False) as crew:
        a = crew.store.create_task("A")
        alice = crew.spawn("alice")
        stray = PlanResponse(request_id=request_id(99), approved=True)
        post(crew.mailbox, "alice", stray, sender="lead")
        crew.protocol.send_text("alice", "read the README first", sender="lead")

        kinds = [alice.tick().kind for _ in range(4)]

        assert kinds == [
            TickKind.PROTOCOL_HANDLED,
            TickKind.MESSAGE_HANDLED,
            TickKind.CLAIMED,
            TickKind.IDLE,
        ]
        first, second = crew.agents["alice"].calls
        assert first.user_text == "Message from lead:\nread the README first"
        assert auto_claimed_payload(second.user_text) is not None
        assert crew.store.get_task(a.id).owner == "alice"


def test_an_auto_claimed_task_reaches_the_agent_as_one_deterministic_message(
    tmp_path: Path,
) -> None:
    with team(tmp_path, complete=False) as crew:
        a = crew.store.create_task("A", "Write the intro.")
        alice = crew.spawn("alice")

        outcome = alice.tick()

        assert outcome.kind is TickKind.CLAIMED
        assert outcome.claim is not None and outcome.claim.claim_token == token(1)
        (call,) = crew.agents["alice"].calls
        expected = (
            '{"claim_token":"' + token(1) + '","lease_expires_at_utc":"2026-01-01T09:05:00Z",'
            '"task":{"blocked_by":[],"description":"Write the intro.","id":"' + a.id + '",'
            '"owner":"alice","status":"in_progress","subject":"A"}}'
        )
        assert f"<auto-claimed-task>{expected}</auto-claimed-task>" in call.user_text
        assert call.user_text == auto_claimed_task_message(outcome.claim)
        assert call.idempotency_key == token(1)


def test_the_agents_final_text_goes_back_to_the_lead_through_the_mailbox(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        crew.store.create_task("A")
        outcome = crew.spawn("alice").tick()
        assert outcome.final_text == "alice completed A"
        (report,) = crew.mailbox.messages("lead")
        assert (report.sender, report.kind) == ("alice", "text")
        assert json.loads(report.body) == {"content": "alice completed A"}


def test_a_lead_message_is_answered_to_the_lead_and_acked(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        alice = crew.spawn("alice")
        crew.protocol.send_text("alice", "how is it going?", sender="lead")
        outcome = alice.tick()
        assert (outcome.kind, outcome.final_text) == (TickKind.MESSAGE_HANDLED, "alice read it")
        assert [m.state for m in crew.mailbox.messages("alice")] == [MessageState.ACKED]
        assert lead_inbox(crew) == [TextMessage(content="alice read it")]


def test_an_empty_answer_sends_nothing_but_still_acks(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        alice = crew.spawn("alice")
        crew.agents["alice"].reply = "  "
        crew.protocol.send_text("alice", "fyi", sender="lead")
        assert alice.tick().kind is TickKind.MESSAGE_HANDLED
        assert [m.state for m in crew.mailbox.messages("alice")] == [MessageState.ACKED]
        assert crew.mailbox.messages("lead") == []


def test_the_teammate_never_completes_a_task_on_the_agents_behalf(tmp_path: Path) -> None:
    with team(tmp_path, complete=False) as crew:
        a = crew.store.create_task("A")
        outcome = crew.spawn("alice").tick()
        assert outcome.kind is TickKind.CLAIMED
        task = crew.store.get_task(a.id)
        assert (task.status, task.owner) == (TaskStatus.IN_PROGRESS, "alice")
        assert [event.kind.value for event in crew.store.events()] == ["created", "claimed"]


@pytest.mark.parametrize("verdict", ["pending", "rejected"])
def test_a_pending_or_rejected_latest_plan_claims_nothing_and_writes_nothing_to_the_board(
    tmp_path: Path, verdict: str
) -> None:
    clock = ManualClock()
    with team(tmp_path, clock=clock) as crew:
        a = crew.store.create_task("A")
        # A lease that has run out but nobody has noticed: any store transaction
        # (even a read) would release it, so it shows whether the pass touched the store.
        stale = crew.store.create_task("stale")
        crew.store.claim_task(stale.id, "bob")
        alice = crew.spawn("alice")
        plan = crew.protocol.submit_plan("alice", "1. rewrite everything")
        if verdict == "rejected":
            crew.protocol.review_plan(plan.request_id, approve=False, feedback="no")
            assert alice.tick().detail == "plan rejected"
        clock.advance(crew.store.lease.total_seconds())
        changes, events = crew.store.total_changes, crew.store.events()

        outcome = alice.tick()

        assert outcome.kind is TickKind.PLAN_BLOCKED
        assert crew.store.total_changes == changes
        assert crew.store.events() == events
        with sqlite3.connect(crew.store.path) as raw:
            rows = dict(raw.execute("SELECT id, status FROM tasks").fetchall())
        assert rows == {a.id: "pending", stale.id: "in_progress"}
        assert crew.agents["alice"].calls == []


def test_an_approved_plan_response_opens_the_gate_first_and_the_next_pass_claims(
    tmp_path: Path,
) -> None:
    with team(tmp_path) as crew:
        a = crew.store.create_task("A")
        alice = crew.spawn("alice")
        plan = crew.protocol.submit_plan("alice", "1. do A")
        assert alice.tick().kind is TickKind.PLAN_BLOCKED
        crew.protocol.review_plan(plan.request_id, approve=True)

        handled = alice.tick()
        assert (handled.kind, handled.detail) == (TickKind.PROTOCOL_HANDLED, "plan approved")
        assert crew.status(a.id) is TaskStatus.PENDING  # the response pass took no task
        assert crew.protocol.plan_allows_effectful("alice")

        claimed = alice.tick()
        assert claimed.kind is TickKind.CLAIMED
        assert crew.status(a.id) is TaskStatus.COMPLETED


def test_a_plan_response_for_a_stale_request_keeps_the_gate_closed_and_says_so(
    tmp_path: Path,
) -> None:
    with team(tmp_path) as crew:
        crew.store.create_task("A")
        alice = crew.spawn("alice")
        old = crew.protocol.submit_plan("alice", "plan one")
        crew.protocol.submit_plan("alice", "plan two")
        stale = PlanResponse(request_id=old.request_id, approved=True)
        post(crew.mailbox, "alice", stale, sender="lead")

        outcome = alice.tick()

        assert outcome.kind is TickKind.PROTOCOL_HANDLED
        assert outcome.detail == "plan gate unchanged: stale_request"
        assert alice.tick().kind is TickKind.PLAN_BLOCKED


def test_a_malformed_message_is_rejected_and_acked_and_work_goes_on(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        a = crew.store.create_task("A")
        alice = crew.spawn("alice")
        crew.mailbox.send("alice", sender="lead", kind="shutdown_request", body='{"id": 7}')

        rejected = alice.tick()

        assert rejected.kind is TickKind.MESSAGE_REJECTED
        assert rejected.detail.startswith("malformed_message:")
        assert not alice.closed
        assert [m.state for m in crew.mailbox.messages("alice")] == [MessageState.ACKED]
        assert crew.status(a.id) is TaskStatus.PENDING
        assert alice.tick().kind is TickKind.CLAIMED


def test_only_the_lead_can_shut_a_teammate_down(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        alice = crew.spawn("alice")
        forged = ShutdownRequest(request_id=request_id(42))
        post(crew.mailbox, "alice", forged, sender="bob")

        outcome = alice.tick()

        assert outcome.kind is TickKind.MESSAGE_REJECTED
        assert outcome.detail.startswith("not_from_lead:")
        assert not alice.closed
        assert crew.mailbox.messages("lead") == []


def test_a_message_claimed_before_a_crash_is_handled_when_the_teammate_starts_again(
    tmp_path: Path,
) -> None:
    with team(tmp_path) as crew:
        crashing = Teammate(
            "alice",
            agent=FakeAgent("alice", fail_with=RuntimeError("killed mid-run")),
            protocol=crew.protocol,
            work_stealing=crew.work_stealing,
        )
        crew.protocol.send_text("alice", "summarise the board", sender="lead")
        with pytest.raises(RuntimeError, match="killed mid-run"):
            crashing.tick()
        assert [m.state for m in crew.mailbox.messages("alice")] == [MessageState.CLAIMED]
        crashing.leave()  # the process is gone, and with it its hold on the name

    # A new process: new mailbox, protocol and teammate over the same files.
    with team(tmp_path) as restarted:
        alice = restarted.spawn("alice")
        outcome = alice.tick()
        assert outcome.kind is TickKind.MESSAGE_HANDLED
        assert outcome.message == TextMessage(content="summarise the board")
        assert outcome.envelope is not None and outcome.envelope.deliveries == 2
        assert [m.state for m in restarted.mailbox.messages("alice")] == [MessageState.ACKED]


def test_nothing_to_do_is_an_idle_pass(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        crew.store.create_task("A")
        crew.store.claim_next("someone-else")
        outcome = crew.spawn("alice").tick()
        assert outcome == TickOutcome("alice", TickKind.IDLE)
        assert outcome.describe() == "alice: idle (nothing ready to claim)"


def test_a_and_b_go_to_different_teammates_and_c_to_exactly_one_after_both_complete(
    tmp_path: Path,
) -> None:
    scan = threading.Barrier(2)
    both_claimed = threading.Barrier(2)
    completions = threading.Lock()
    completed: list[str] = []
    c_after_first_completion: list[str] = []
    c_id: list[str] = []

    def hold_until_both_claimed(payload: dict[str, Any]) -> None:
        # Neither completes before both hold a claim: A and B were claimed side by side.
        if payload["task"]["subject"] != "C":
            both_claimed.wait(timeout=10)
            completions.acquire()

    def probe_c_after_the_first_completion(payload: dict[str, Any]) -> None:
        if payload["task"]["subject"] == "C":
            return
        completed.append(payload["task"]["subject"])
        if len(completed) == 1:
            refused = raises_code("task_blocked", lambda: crew.store.claim_task(c_id[0], "probe"))
            c_after_first_completion.append(refused.code)
        completions.release()

    with team(
        tmp_path,
        before_complete=hold_until_both_claimed,
        after_complete=probe_c_after_the_first_completion,
    ) as crew:
        a = crew.store.create_task("A")
        b = crew.store.create_task("B")
        c = crew.store.create_task("C", blocked_by=(a.id, b.id))
        c_id.append(c.id)
        alice, bob = crew.spawn("alice"), crew.spawn("bob")
        outcomes: dict[str, TickOutcome] = {}

        def step(teammate: Teammate) -> None:
            scan.wait(timeout=10)  # both scan the board at the same moment
            outcomes[teammate.name] = teammate.tick()

        def both_step() -> None:
            threads = [threading.Thread(target=step, args=(t,)) for t in (alice, bob)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)

        both_step()
        claimed = {
            name: outcome.claim.task.subject
            for name, outcome in outcomes.items()
            if outcome.claim is not None
        }
        assert sorted(claimed.values()) == ["A", "B"]
        assert crew.store.get_task(a.id).owner == next(n for n, s in claimed.items() if s == "A")
        assert crew.store.get_task(b.id).owner == next(n for n, s in claimed.items() if s == "B")
        assert c_after_first_completion == ["task_blocked"]
        assert sorted(completed) == ["A", "B"]

        both_step()
        assert sorted(outcome.kind.value for outcome in outcomes.values()) == ["claimed", "idle"]
        winner = crew.store.get_task(c.id)
        assert winner.status is TaskStatus.COMPLETED
        assert winner.owner in ("alice", "bob")
        claims_of_c = [e for e in crew.store.events() if e.task_id == c.id and e.kind == "claimed"]
        assert len(claims_of_c) == 1


def test_two_teammates_over_separate_mailbox_instances_still_see_one_protocol(
    tmp_path: Path,
) -> None:
    with team(tmp_path) as crew:
        other = TeamProtocol(Mailbox(tmp_path), new_request_id=lambda: request_id(7))
        other.request_shutdown("alice")
        outcome = crew.spawn("alice").tick()
        assert outcome.kind is TickKind.PROTOCOL_HANDLED
        assert outcome.message == ShutdownRequest(request_id=request_id(7))
        other.mailbox.close()


def test_describe_names_the_teammate_the_task_and_what_came_back(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        a = crew.store.create_task("A")
        outcome = crew.spawn("alice").tick()
        assert (
            outcome.describe() == "alice: claimed A (lease until 09:05:00Z) -> 'alice completed A'"
        )
        assert a.id == task_id(1)
