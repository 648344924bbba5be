"""What the team stepper says, as pure functions of what it read: no widget, no team.

Each teammate's state in words, the status line under the buttons, the
approval label and the log as HTML. The stepper gathers the facts from the
team (board, registry, plans, approvals) and shows what these return; tests
call them on plain values.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from agent17.agent.permissions import ApprovalRequest
from agent17.domain import Task, TaskStatus
from agent17.team.plans import PlanStatus
from agent17.viz.approvals import describe_request
from agent17.wire import wire_clock


@dataclass(frozen=True, slots=True)
class TeammateFacts:
    """What decides one teammate's state: shut down, parked on a request, its latest plan."""

    name: str
    closed: bool = False
    request: ApprovalRequest | None = None
    plan: PlanStatus | None = None


def teammate_state(
    facts: TeammateFacts, tasks: Iterable[Task], leases: Mapping[str, datetime]
) -> str:
    """A teammate's state in words: closed, awaiting approval, holds X until T, plan..., idle."""
    if facts.closed:
        return "closed (shut down)"
    if facts.request is not None:
        return f"awaiting approval: {describe_request(facts.request, width=40)}"
    held = [t for t in tasks if t.status is TaskStatus.IN_PROGRESS and t.owner == facts.name]
    if held:
        return ", ".join(
            f"holds {t.subject} until {wire_clock(leases[t.id])}"
            if t.id in leases
            else f"holds {t.subject}"
            for t in held
        )
    if facts.plan is not None and facts.plan is not PlanStatus.APPROVED:
        return f"plan {facts.plan.value}: takes no task"
    return "idle"


def states_html(states: Mapping[str, str]) -> str:
    """Every teammate's state on one line, names in bold."""
    return " &nbsp;·&nbsp; ".join(
        f"<b>{html.escape(name)}</b>: {html.escape(state)}" for name, state in states.items()
    )


def approval_text(request: ApprovalRequest | None, queued: int) -> str:
    """The approval label: the request the buttons answer, and how many wait behind it."""
    if request is None:
        return "nothing to approve"
    more = f" ({queued - 1} more after it)" if queued > 1 else ""
    return html.escape(describe_request(request, width=48) + more)


def status_text(
    now: datetime, tasks: Sequence[Task], parked: Sequence[str], last: str | None
) -> str:
    """The status line: the time, tasks completed, the last step, who waits for approval."""
    done = sum(task.status is TaskStatus.COMPLETED for task in tasks)
    # A pass stopped half way has not finished, but the class should see that it waits.
    waiting = " and ".join(parked)
    verb = "wait" if len(parked) > 1 else "waits"
    waits = f" · {waiting} {verb} for approval" if parked else ""
    return html.escape(
        f"{wire_clock(now)} · {done}/{len(tasks)} completed"
        f" · last step: {last or 'none finished yet'}{waits}"
    )


def log_html(lines: Sequence[str]) -> str:
    """The log's last lines as a block that wraps between words."""
    return (
        # Long lines wrap between words (JupyterLab's own pre style breaks anywhere).
        "<pre style='margin:0; font-size:12px; white-space:pre-wrap;"
        " word-break:normal; overflow-wrap:break-word'>"
        + html.escape("\n".join(lines) or "(no clicks yet)")
        + "</pre>"
    )
