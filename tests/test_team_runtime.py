"""The autonomous runtime: wiring order, workers, sleepers, idle timeout, and the team tools."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import new_store
from team_fixtures import Team, lead_context, request_id, team

from agent17 import TaskStatus, ToolContext, WorkStealingRuntime
from agent17.claims import WiringError
from agent17.team.mailbox import Mailbox
from agent17.team.plans import PlanStatus
from agent17.team.protocol import ShutdownResponse, TeamProtocol, TextMessage
from agent17.team.runtime import TeamError, TeammateRuntime, TeammateStateError
from agent17.team.sleepers import EventSleeper, ManualSleeper, ScriptedSleeper, SleepCall
from agent17.team.teammate import TickKind
from agent17.tools.team_tools import lead_team_tool_definitions, teammate_team_tool_definitions

WAIT = 10.0  # a safety net for a broken test, never the thing that orders events


# -- wiring order -----------------------------------------------------------------


class Parts:
    def __init__(self, workspace: Path) -> None:
        self.store = new_store(workspace)
        self.mailbox = Mailbox(workspace)
        self.protocol = TeamProtocol(self.mailbox)
        self.work_stealing = WorkStealingRuntime(store=self.store)
        self.runtime = TeammateRuntime(self.mailbox, sleeper=ScriptedSleeper())

    def protocol_step(self) -> None:
        self.runtime.configure_protocol(self.protocol)

    def work_stealing_step(self) -> None:
        self.runtime.configure_work_stealing(self.work_stealing)

    def factory_step(self) -> None:
        self.runtime.configure_agent_factory(lambda name: None)  # type: ignore[arg-type,return-value]

    def wire(self) -> None:
        self.protocol_step()
        self.work_stealing_step()
        self.factory_step()


@pytest.mark.parametrize(
    ("steps", "wrong", "message"),
    [
        ([], "work_stealing_step", "configure_protocol\\(\\) must come before"),
        (["protocol_step"], "protocol_step", "already configured"),
        (["protocol_step", "work_stealing_step"], "work_stealing_step", "already configured"),
        (["factory_step"], "factory_step", "already configured"),
        ([], "start", "needs configure_protocol\\(\\)"),
        (["protocol_step", "work_stealing_step"], "start", "needs configure_agent_factory"),
        (["protocol_step", "factory_step"], "start", "needs configure_work_stealing"),
        ([], "spawn", "needs configure_protocol"),
        (["wire", "start"], "start", "already started"),
        (["wire", "start"], "protocol_step", "before start"),
        (["wire", "start"], "work_stealing_step", "before start"),
        (["wire", "start"], "factory_step", "before start"),
    ],
)
def test_each_wrong_configuration_order_is_a_clear_error(
    tmp_path: Path, steps: list[str], wrong: str, message: str
) -> None:
    parts = Parts(tmp_path)
    actions: dict[str, Callable[[], object]] = {
        "protocol_step": parts.protocol_step,
        "work_stealing_step": parts.work_stealing_step,
        "factory_step": parts.factory_step,
        "wire": parts.wire,
        "start": parts.runtime.start,
        "spawn": lambda: parts.runtime.spawn("alice"),
    }
    try:
        for step in steps:
            actions[step]()
        with pytest.raises(TeammateStateError, match=message) as refused:
            actions[wrong]()
        assert isinstance(refused.value, WiringError)
    finally:
        parts.runtime.stop()


def test_the_protocol_must_use_the_runtimes_own_mailbox_and_lead(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    with pytest.raises(TeammateStateError, match="own mailbox"):
        parts.runtime.configure_protocol(TeamProtocol(Mailbox(tmp_path)))
    with pytest.raises(TeammateStateError, match="lead"):
        parts.runtime.configure_protocol(TeamProtocol(parts.mailbox, lead_name="boss"))
    parts.protocol_step()  # the right one is still accepted


def test_the_right_order_wires_the_very_same_objects(tmp_path: Path) -> None:
    parts = Parts(tmp_path)
    parts.wire()
    assert parts.runtime.protocol is parts.protocol
    assert parts.runtime.work_stealing is parts.work_stealing


# -- teammates and names -------------------------------------------------------------


def test_a_duplicate_teammate_name_is_refused(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        first = crew.spawn("alice")
        with pytest.raises(TeamError) as refused:
            crew.spawn("alice")
        assert refused.value.code == "teammate_exists"
        assert crew.runtime.teammate("alice") is first
        assert crew.runtime.names == ("alice",)


@pytest.mark.parametrize("name", ["lead", "Alice", "", "1bob", "a b", "x" * 33, "al/ice"])
def test_a_bad_teammate_name_is_refused(tmp_path: Path, name: str) -> None:
    with team(tmp_path) as crew:
        with pytest.raises(TeamError) as refused:
            crew.spawn(name)
        assert refused.value.code == "invalid_teammate_name"
        assert crew.runtime.names == ()


# -- idle timeout ---------------------------------------------------------------------


def test_idle_timeout_is_observable_and_nothing_is_faked(tmp_path: Path) -> None:
    sleeper = ScriptedSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        crew.spawn("alice")
        crew.runtime.start()

        assert crew.runtime.wait_for_idle_timeout("alice", timeout=WAIT)

        assert crew.runtime.idle_timeout_count("alice") == 1
        assert crew.runtime.active_workers() == ()
        assert sleeper.calls == [SleepCall(5.0, False)] * 12
        assert crew.mailbox.messages() == []  # no shutdown request, response or summary
        assert not crew.runtime.teammate("alice").closed
        assert [o.kind for o in crew.outcomes] == [TickKind.IDLE] * 13
        alive = [t.name for t in threading.enumerate() if t.name.startswith("agent17-teammate")]
        crew.runtime.stop()
        assert all(not t.is_alive() for t in threading.enumerate() if t.name in alive)


def test_a_message_to_a_timed_out_teammate_starts_a_fresh_worker(tmp_path: Path) -> None:
    sleeper = ScriptedSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        crew.spawn("alice")
        crew.runtime.start()
        assert crew.runtime.wait_for_idle_timeout("alice", timeout=WAIT)

        crew.protocol.send_text("alice", "one more thing", sender="lead")

        assert crew.runtime.wait_for_idle_timeout("alice", count=2, timeout=WAIT)
        (call,) = crew.agents["alice"].calls
        assert call.user_text == "Message from lead:\none more thing"
        reports = [d.message for d in crew.protocol.receive_all("lead")]
        assert reports == [TextMessage(content="alice read it")]
        assert crew.runtime.active_workers() == ()


def step_sleeper(sleeper: ManualSleeper, calls_so_far: int) -> int:
    """Let the blocked wait time out and wait until it has ended; return the new call count."""
    assert sleeper.wait_for_sleepers(1, timeout=WAIT)
    sleeper.time_out()
    assert sleeper.wait_for_calls(calls_so_far + 1, timeout=WAIT)
    return calls_so_far + 1


def test_a_lead_message_wakes_an_idle_teammate_early(tmp_path: Path) -> None:
    sleeper = ManualSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        crew.spawn("alice")
        crew.runtime.start()
        calls = step_sleeper(sleeper, 0)
        assert sleeper.wait_for_sleepers(1, timeout=WAIT)

        crew.protocol.send_text("alice", "status?", sender="lead")

        assert sleeper.wait_for_calls(calls + 1, timeout=WAIT)
        assert sleeper.calls == [SleepCall(5.0, False), SleepCall(5.0, True)]
        assert sleeper.wait_for_sleepers(1, timeout=WAIT)  # handled, asleep again
        assert [call.user_text for call in crew.agents["alice"].calls] == [
            "Message from lead:\nstatus?"
        ]
        assert crew.runtime.idle_timeout_count("alice") == 0


def test_an_early_wake_does_not_use_up_the_poll_budget(tmp_path: Path) -> None:
    sleeper = ManualSleeper()
    with team(tmp_path, sleeper=sleeper, max_idle_polls=4) as crew:
        crew.spawn("alice")
        crew.runtime.start()
        calls = 0
        for _ in range(3):
            calls = step_sleeper(sleeper, calls)
        assert sleeper.wait_for_sleepers(1, timeout=WAIT)
        crew.mailbox.wakeups.wake("alice")  # woken, but there is nothing to do
        assert sleeper.wait_for_calls(calls + 1, timeout=WAIT)
        calls += 1
        assert crew.runtime.idle_timeout_count("alice") == 0

        calls = step_sleeper(sleeper, calls)  # the 4th timed-out wait ends the budget

        assert crew.runtime.wait_for_idle_timeout("alice", timeout=WAIT)
        assert [call.woken for call in sleeper.calls] == [False, False, False, True, False]
        assert crew.runtime.active_workers() == ()


@pytest.mark.parametrize("verdict", ["pending", "rejected"])
def test_a_plan_blocked_teammate_sleeps_and_never_writes_to_the_board(
    tmp_path: Path, verdict: str
) -> None:
    sleeper = ScriptedSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        a = crew.store.create_task("A")
        alice = crew.spawn("alice")
        plan = crew.protocol.submit_plan("alice", "1. rewrite everything")
        if verdict == "rejected":
            crew.protocol.review_plan(plan.request_id, approve=False)
            alice.tick()  # the verdict is handled: the latest plan is now rejected
        latest = crew.protocol.latest_plan("alice")
        assert latest is not None and latest.status.value == verdict
        changes, events = crew.store.total_changes, crew.store.events()

        crew.runtime.start()
        assert crew.runtime.wait_for_idle_timeout("alice", timeout=WAIT)

        assert crew.store.total_changes == changes
        assert crew.store.events() == events
        assert crew.status(a.id) is TaskStatus.PENDING
        assert len(sleeper.calls) == 12
        assert {o.kind for o in crew.outcomes} == {TickKind.PLAN_BLOCKED}
        assert crew.agents["alice"].calls == []


def test_an_approved_plan_lets_the_woken_teammate_claim(tmp_path: Path) -> None:
    sleeper = ManualSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        a = crew.store.create_task("A")
        crew.spawn("alice")
        plan = crew.protocol.submit_plan("alice", "1. do A")
        crew.runtime.start()
        assert sleeper.wait_for_sleepers(1, timeout=WAIT)

        crew.protocol.review_plan(plan.request_id, approve=True)

        assert sleeper.wait_for_calls(1, timeout=WAIT)
        assert sleeper.wait_for_sleepers(1, timeout=WAIT)
        kinds = [o.kind for o in crew.outcomes]
        assert kinds[:4] == [
            TickKind.PLAN_BLOCKED,
            TickKind.PROTOCOL_HANDLED,
            TickKind.CLAIMED,
            TickKind.IDLE,
        ]
        assert crew.status(a.id) is TaskStatus.COMPLETED


# -- shutdown, stop, failures ------------------------------------------------------------


def test_a_shutdown_ends_the_worker_and_later_messages_do_not_revive_it(tmp_path: Path) -> None:
    sleeper = ManualSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        a = crew.store.create_task("A")
        crew.spawn("alice")
        request = crew.protocol.request_shutdown("alice")

        crew.runtime.start()
        assert crew.runtime.wait_for_workers(timeout=WAIT)
        crew.protocol.send_text("alice", "hello?", sender="lead")
        assert crew.runtime.active_workers() == ()

        assert [o.kind for o in crew.outcomes] == [TickKind.PROTOCOL_HANDLED]
        assert crew.runtime.teammate("alice").closed
        assert crew.status(a.id) is TaskStatus.PENDING
        assert [d.message for d in crew.protocol.receive_all("lead")] == [
            ShutdownResponse(request_id=request.request_id, approved=True)
        ]
        assert crew.runtime.idle_timeout_count("alice") == 0
        assert sleeper.calls == []


def test_a_message_to_a_closed_teammate_starts_no_worker(tmp_path: Path) -> None:
    with team(tmp_path, sleeper=ScriptedSleeper()) as crew:
        alice = crew.spawn("alice")
        crew.protocol.request_shutdown("alice")
        alice.tick()
        crew.runtime.start()
        crew.protocol.send_text("alice", "hello?", sender="lead")
        assert crew.runtime.active_workers() == ()
        assert crew.agents["alice"].calls == []


def test_stop_wakes_sleeping_workers_and_joins_them(tmp_path: Path) -> None:
    sleeper = ManualSleeper()
    with team(tmp_path, sleeper=sleeper) as crew:
        crew.spawn("alice")
        crew.spawn("bob")
        crew.runtime.start()
        assert sleeper.wait_for_sleepers(2, timeout=WAIT)
        assert crew.runtime.active_workers() == ("alice", "bob")

        crew.runtime.stop(timeout=WAIT)

        assert crew.runtime.active_workers() == ()
        assert sleeper.sleeping == 0
        with pytest.raises(TeammateStateError):
            crew.spawn("carol")


def test_the_event_sleeper_returns_early_when_woken() -> None:
    wake = threading.Event()
    wake.set()
    assert EventSleeper().wait(3600.0, wake) is True
    assert EventSleeper().wait(0.0, threading.Event()) is False


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_crashing_agent_ends_its_worker_and_the_failure_is_reported(tmp_path: Path) -> None:
    with team(tmp_path, sleeper=ScriptedSleeper()) as crew:
        crew.spawn("alice")
        crew.agents["alice"].fail_with = RuntimeError("model unreachable")
        crew.protocol.send_text("alice", "go", sender="lead")
        crew.runtime.start()
        assert crew.runtime.wait_for_workers(timeout=WAIT)
        failure = crew.runtime.failures()["alice"]
        assert isinstance(failure, RuntimeError) and str(failure) == "model unreachable"
        assert crew.mailbox.unacked_count("alice") == 1  # redelivered when it starts again


# -- the whole scenario, autonomously -----------------------------------------------------


def test_the_minimal_scenario_runs_to_quiet_with_a_and_b_on_different_teammates(
    tmp_path: Path,
) -> None:
    both_claimed = threading.Barrier(2)

    def hold_until_both_claimed(payload: dict[str, Any]) -> None:
        if payload["task"]["subject"] != "C":
            both_claimed.wait(timeout=WAIT)

    with team(tmp_path, sleeper=ScriptedSleeper(), before_complete=hold_until_both_claimed) as crew:
        a = crew.store.create_task("A")
        b = crew.store.create_task("B")
        c = crew.store.create_task("C", blocked_by=(a.id, b.id))
        crew.spawn("alice")
        crew.spawn("bob")
        crew.runtime.start()

        assert crew.runtime.run_until_quiet(timeout=WAIT)

        tasks = {task.subject: task for task in crew.store.list_tasks()}
        assert {task.status for task in tasks.values()} == {TaskStatus.COMPLETED}
        assert {tasks["A"].owner, tasks["B"].owner} == {"alice", "bob"}
        claims_of_c = [e for e in crew.store.events() if e.task_id == c.id and e.kind == "claimed"]
        assert len(claims_of_c) == 1
        reports = sorted(str(d.message) for d in crew.protocol.receive_all("lead"))
        assert len(reports) == 3


def test_run_until_quiet_reports_work_nobody_can_do(tmp_path: Path) -> None:
    with team(tmp_path, sleeper=ScriptedSleeper()) as crew:
        crew.store.create_task("A")
        crew.spawn("alice")
        crew.protocol.submit_plan("alice", "wait for me")
        crew.runtime.start()
        assert crew.runtime.wait_for_idle_timeout("alice", timeout=WAIT)
        assert crew.runtime.run_until_quiet(timeout=WAIT) is False


# -- the team tools ------------------------------------------------------------------------


def tools_of(crew: Team) -> dict[str, Any]:
    lead = {tool.name: tool for tool in lead_team_tool_definitions(crew.runtime)}
    mate = {tool.name: tool for tool in teammate_team_tool_definitions(crew.runtime)}
    return {"lead": lead, "teammate": mate}


def test_the_tool_surfaces_have_the_documented_names(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        tools = tools_of(crew)
        assert list(tools["lead"]) == [
            "spawn_teammate",
            "send_message",
            "request_shutdown",
            "review_plan",
        ]
        assert list(tools["teammate"]) == ["send_message", "submit_plan"]
        spawn_schema = tools["lead"]["spawn_teammate"].parameters_schema()
        assert spawn_schema["required"] == ["name"]
        send_schema = tools["lead"]["send_message"].parameters_schema()
        assert sorted(send_schema["required"]) == ["content", "to"]


def test_spawn_teammate_refuses_a_duplicate_with_a_stable_code(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        spawn = tools_of(crew)["lead"]["spawn_teammate"]
        assert spawn.run({"name": "alice"}, lead_context()) == {"teammate": {"name": "alice"}}
        duplicate = spawn.run({"name": "alice"}, lead_context())
        assert duplicate["error"]["code"] == "teammate_exists"
        assert spawn.run({"name": "Lead!"}, lead_context())["error"]["code"] == (
            "invalid_teammate_name"
        )
        assert spawn.run({}, lead_context())["error"]["code"] == "invalid_arguments"


def test_send_message_delivers_to_known_agents_only(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        crew.spawn("alice")
        send = tools_of(crew)["lead"]["send_message"]
        sent = send.run({"to": "alice", "content": "hi"}, lead_context())
        assert sent == {"sent": {"to": "alice", "sequence": 1}}
        unknown = send.run({"to": "mallory", "content": "hi"}, lead_context())
        assert unknown["error"]["code"] == "unknown_recipient"
        to_self = send.run({"to": "lead", "content": "hi"}, lead_context())
        assert to_self["error"]["code"] == "invalid_recipient"
        forged = send.run({"to": "alice", "content": "hi", "from": "bob"}, lead_context())
        assert forged["error"]["code"] == "invalid_arguments"
        assert len(crew.mailbox.messages()) == 1


def test_a_teammate_reports_to_the_lead_as_itself(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        crew.spawn("alice")
        send = tools_of(crew)["teammate"]["send_message"]
        assert "error" not in send.run({"to": "lead", "content": "done"}, ToolContext("alice"))
        (report,) = crew.mailbox.messages("lead")
        assert report.sender == "alice"


def test_submit_and_review_plan_tools_drive_the_gate(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        alice = crew.spawn("alice")
        submit = tools_of(crew)["teammate"]["submit_plan"]
        review = tools_of(crew)["lead"]["review_plan"]
        submitted = submit.run({"plan": "1. do A"}, ToolContext("alice"))
        assert submitted == {"plan": {"request_id": request_id(1), "status": "pending"}}
        assert not crew.protocol.plan_allows_effectful("alice")

        unknown = review.run({"request_id": request_id(9), "approve": True}, lead_context())
        assert unknown["error"]["code"] == "unknown_plan_request"
        not_bool = review.run({"request_id": request_id(1), "approve": "yes"}, lead_context())
        assert not_bool["error"]["code"] == "invalid_arguments"
        reviewed = review.run({"request_id": request_id(1), "approve": True}, lead_context())
        assert reviewed["plan_response"]["approved"] is True

        alice.tick()
        latest = crew.protocol.latest_plan("alice")
        assert latest is not None and latest.status is PlanStatus.APPROVED


def test_request_shutdown_tool_asks_only_live_teammates(tmp_path: Path) -> None:
    with team(tmp_path) as crew:
        alice = crew.spawn("alice")
        shutdown = tools_of(crew)["lead"]["request_shutdown"]
        unknown = shutdown.run({"name": "bob"}, lead_context())
        assert unknown["error"]["code"] == "unknown_teammate"
        asked = shutdown.run({"name": "alice"}, lead_context())
        assert asked == {"shutdown_request": {"to": "alice", "request_id": request_id(1)}}
        alice.tick()
        again = shutdown.run({"name": "alice"}, lead_context())
        assert again["error"]["code"] == "teammate_closed"
        to_closed = tools_of(crew)["lead"]["send_message"].run(
            {"to": "alice", "content": "hi"}, lead_context()
        )
        assert to_closed["error"]["code"] == "teammate_closed"
