"""The composition root: one store, each role's exact tool surface, gated side effects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent17.agent.models import (
    Call,
    CurrentTurn,
    Reply,
    ScriptedModel,
    minimal_scenario_lead_script,
    teammate_script,
)
from agent17.agent.permissions import ApprovalRequest, AuditTrail
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.team.runtime import TeammateStateError
from agent17.team.teammate import TickKind

LEAD_TOOLS = (
    "create_task",
    "get_task",
    "list_tasks",
    "claim_task",
    "complete_task",
    "spawn_teammate",
    "send_message",
    "request_shutdown",
    "review_plan",
)
SUBAGENT_TOOLS = ("create_task", "get_task", "list_tasks", "claim_task", "complete_task")
TEAMMATE_TOOLS = (
    "shell",
    "read_file",
    "write_file",
    "send_message",
    "submit_plan",
    "get_task",
    "list_tasks",
    "claim_task",
    "complete_task",
)


def _shell_then_complete() -> ScriptedModel:
    """A teammate that tries `shell` first, then completes whatever it was given."""

    def act(turn: CurrentTurn) -> Reply | None:
        if "<auto-claimed-task>" not in turn.user_text:
            return None
        payload = json.loads(
            turn.user_text.split("<auto-claimed-task>")[1].split("</auto-claimed-task>")[0]
        )
        if not turn.outcomes:
            return Reply(calls=(Call("shell", {"command": "echo touched > proof.txt"}),))
        if len(turn.outcomes) == 1:
            arguments = {"task_id": payload["task"]["id"], "claim_token": payload["claim_token"]}
            return Reply(calls=(Call("complete_task", arguments),))
        return Reply(text="done")

    return ScriptedModel([act], name="shell-teammate")


def _team(tmp_path: Path, teammate: ScriptedModel | None = None, **overrides: object) -> Team:
    settings = TeamSettings(
        workspace=tmp_path,
        lead_model=minimal_scenario_lead_script(),
        teammate_model=lambda name: teammate if teammate is not None else teammate_script(),
        clock=ManualClock(),
        new_task_id=uuid_sequence(17),
        new_claim_token=uuid_sequence(71),
        new_request_id=uuid_sequence(99),
        **overrides,  # type: ignore[arg-type]
    )
    return build_team(settings)


def test_each_role_gets_exactly_its_tool_surface(tmp_path: Path) -> None:
    team = _team(tmp_path)
    try:
        assert team.lead.tools.names == LEAD_TOOLS
        assert team.make_subagent(teammate_script()).tools.names == SUBAGENT_TOOLS
        team.teammates.spawn("alice")
        assert team.runners["alice"].tools.names == TEAMMATE_TOOLS
        complete = team.runners["alice"].tools.get("complete_task")
        assert complete is not None
        schema = complete.parameters_schema()
        assert sorted(schema["required"]) == ["claim_token", "task_id"]
        assert schema.get("additionalProperties") is False
    finally:
        team.close()


def test_every_role_shares_the_one_store(tmp_path: Path) -> None:
    team = _team(tmp_path)
    try:
        assert team.work_stealing.store is team.store
        assert team.work_stealing.claim_service.store is team.store
        assert team.teammates.work_stealing is team.work_stealing
        result = team.lead.run("build the board")
        assert result.stopped == "answered"
        alice = team.teammates.teammate("alice")
        assert alice.board is team.store
        outcome = alice.tick()
        assert outcome.kind is TickKind.CLAIMED
        assert team.store.get_task(outcome.claim.task.id).owner == "alice"  # type: ignore[union-attr]
    finally:
        team.close()


def test_the_wiring_order_cannot_be_repeated_after_the_composition_root(tmp_path: Path) -> None:
    team = _team(tmp_path)
    try:
        with pytest.raises(TeammateStateError):
            team.teammates.configure_work_stealing(team.work_stealing)
        with pytest.raises(TeammateStateError):
            team.teammates.configure_protocol(team.protocol)
    finally:
        team.close()


def test_a_teammate_shell_call_without_approval_is_denied_and_audited(tmp_path: Path) -> None:
    team = _team(tmp_path, _shell_then_complete())
    try:
        team.lead.run("build the board")
        outcome = team.teammates.teammate("alice").tick()
        assert outcome.kind is TickKind.CLAIMED
        assert not (tmp_path / "proof.txt").exists()
        records = AuditTrail.for_workspace(tmp_path).records()
        shell = [record for record in records if record["tool"] == "shell"]
        assert [(r["identity"], r["decision"], r["outcome"]) for r in shell] == [
            ("alice", "deny", "permission_denied")
        ]
    finally:
        team.close()


def test_an_approved_shell_call_runs_in_the_workspace(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    team = _team(tmp_path, _shell_then_complete(), approver=approve)
    try:
        team.lead.run("build the board")
        team.teammates.teammate("alice").tick()
        assert [(request.identity, request.tool) for request in asked] == [("alice", "shell")]
        assert (tmp_path / "proof.txt").read_text().strip() == "touched"
    finally:
        team.close()


def test_a_pending_plan_denies_effectful_tools_even_when_a_human_would_approve(
    tmp_path: Path,
) -> None:
    team = _team(tmp_path, _shell_then_complete(), approver=lambda request: True)
    try:
        team.lead.run("build the board")
        # alice holds a claim already, then submits a plan: her tools are gated too.
        alice = team.teammates.teammate("alice")
        claim = team.work_stealing.claim_service.claim_next("alice")
        assert claim is not None
        team.protocol.submit_plan("alice", "rewrite everything")
        runner = team.runners["alice"]
        result = runner.run(
            "<auto-claimed-task>"
            + json.dumps(
                {
                    "claim_token": claim.claim_token,
                    "lease_expires_at_utc": "x",
                    "task": {"id": claim.task.id},
                }
            )
            + "</auto-claimed-task>"
        )
        shell = [call for call in result.tool_calls if call.tool == "shell"]
        assert [call.outcome for call in shell] == ["permission_denied"]
        assert not (tmp_path / "proof.txt").exists()
        assert alice.tick().kind is TickKind.PLAN_BLOCKED
    finally:
        team.close()
