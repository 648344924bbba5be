"""What the team stepper says, on plain values: no widget and no team."""

from __future__ import annotations

from datetime import UTC, datetime

from agent17.agent.permissions import ApprovalRequest
from agent17.domain import Task, TaskStatus
from agent17.team.plans import PlanStatus
from agent17.viz.stepper_text import (
    TeammateFacts,
    approval_text,
    log_html,
    states_html,
    status_text,
    teammate_state,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _task(subject: str, status: TaskStatus, owner: str | None = None) -> Task:
    return Task(f"id-{subject}", subject, "", status, owner, ())


def test_a_teammate_shut_down_is_closed_whatever_else_holds() -> None:
    facts = TeammateFacts("bob", closed=True, plan=PlanStatus.PENDING)
    assert teammate_state(facts, [], {}) == "closed (shut down)"


def test_a_parked_request_comes_before_the_tasks_held() -> None:
    request = ApprovalRequest("bob", "shell", {"command": "ls"})
    held = [_task("A", TaskStatus.IN_PROGRESS, "bob")]
    assert teammate_state(TeammateFacts("bob", request=request), held, {}).startswith(
        "awaiting approval: "
    )


def test_a_held_task_says_until_when_its_lease_runs() -> None:
    tasks = [
        _task("A", TaskStatus.IN_PROGRESS, "bob"),
        _task("B", TaskStatus.IN_PROGRESS, "bob"),
        _task("C", TaskStatus.IN_PROGRESS, "alice"),
    ]
    state = teammate_state(TeammateFacts("bob"), tasks, {"id-A": NOW})
    assert state == "holds A until 12:00:00Z, holds B"


def test_a_plan_not_approved_takes_no_task_and_otherwise_the_teammate_is_idle() -> None:
    rejected = TeammateFacts("bob", plan=PlanStatus.REJECTED)
    assert teammate_state(rejected, [], {}) == "plan rejected: takes no task"
    approved = TeammateFacts("bob", plan=PlanStatus.APPROVED)
    assert teammate_state(approved, [], {}) == "idle"


def test_the_status_line_counts_completed_tasks_and_names_who_waits() -> None:
    tasks = [_task("A", TaskStatus.COMPLETED), _task("B", TaskStatus.PENDING)]
    one = status_text(NOW, tasks, ["bob"], None)
    assert "1/2 completed · last step: none finished yet · bob waits for approval" in one
    two = status_text(NOW, tasks, ["alice", "bob"], "alice: idle")
    assert two.endswith("last step: alice: idle · alice and bob wait for approval")
    assert "approval" not in status_text(NOW, tasks, [], "x")


def test_the_approval_label_and_the_html_escape_what_they_show() -> None:
    assert approval_text(None, 0) == "nothing to approve"
    request = ApprovalRequest("bob", "write_file", {"path": "<x>", "content": ""})
    label = approval_text(request, 3)
    assert label.endswith("(2 more after it)") and "<x>" not in label
    assert states_html({"<b>": "idle"}) == "<b>&lt;b&gt;</b>: idle"
    assert "(no clicks yet)" in log_html([])
    assert "a &amp; b" in log_html(["a & b"])
