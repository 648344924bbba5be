"""The plans of the plan gate as the mailbox stores them: their states and how a row is read.

A plan is written by the protocol (`TeamProtocol.submit_plan`, `apply_plan_response`)
in the team's mailbox database; a row that breaks the rules of a stored plan was
written by hand and is refused (`damaged_plan`), and a gate that cannot read the
latest plan stays closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from agent17.domain import is_canonical_uuid, name_problem, preview, text_problem
from agent17.inputs import Text
from agent17.team.mailbox import MailboxCode, MailboxError, SqlRunner


class PlanStatus(StrEnum):
    """Where a submitted plan stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """One submitted plan and the Lead's verdict so far."""

    request_id: str
    agent: str
    plan: Text
    status: PlanStatus
    feedback: str


@dataclass(frozen=True, slots=True)
class PlanDecision:
    """What a PlanResponse did: `applied`, or why the gate was left unchanged."""

    applied: bool
    reason: str
    plan: PlanRecord | None


PLAN_COLUMNS: Final = "request_id, agent, plan, status, feedback"


def _plan_problem(row: Any) -> str | None:
    request_id, agent, plan, status, feedback = row
    if not is_canonical_uuid(request_id):
        return f"its request id is {preview(request_id)}"
    for what, problem in (
        ("agent", name_problem(agent)),
        ("plan", text_problem(plan, required=True)),
        ("feedback", text_problem(feedback)),
    ):
        if problem is not None:
            return f"its {what} {problem}"
    if not isinstance(status, str) or status not in {known.value for known in PlanStatus}:
        return f"its status is {preview(status)}"
    return None


def plan_from_row(row: Any) -> PlanRecord:
    """A plan from its stored row (PLAN_COLUMNS), or `damaged_plan`."""
    problem = _plan_problem(row)
    if problem is not None:
        raise MailboxError(
            MailboxCode.DAMAGED_PLAN,
            f"a stored plan is damaged: {problem}. No mailbox writes such a row (it was"
            " written by hand); the plan gate stays closed",
        )
    request_id, agent, plan, status, feedback = row
    return PlanRecord(request_id, agent, plan, PlanStatus(status), feedback)


def latest_plan(connection: SqlRunner, agent: str) -> PlanRecord | None:
    """`agent`'s most recent plan in this transaction, or None."""
    row = connection.execute(
        f"SELECT {PLAN_COLUMNS} FROM plans WHERE agent = ? ORDER BY sequence DESC LIMIT 1",
        (agent,),
    ).fetchone()
    return None if row is None else plan_from_row(row)


def plan_by_request(connection: SqlRunner, request_id: str) -> PlanRecord | None:
    """The plan submitted with `request_id`, or None."""
    row = connection.execute(
        f"SELECT {PLAN_COLUMNS} FROM plans WHERE request_id = ?", (request_id,)
    ).fetchone()
    return None if row is None else plan_from_row(row)
