"""Who claims: the caller's identity as the owner, and the board a team's members share.

An `owner` field in tool input is never trusted (the input models forbid it):
the tools map the caller's `ToolContext.identity` to the owner in one place,
`DirectTaskClaimService`, so a model can only claim and complete as itself.
A teammate's automatic claim is its own: `tick()` calls the board's
`claim_next` with the teammate's name.

`WorkStealingRuntime` is built once in the composition root and handed to the
Lead, the one-shot subagent and every teammate, so that all of them read and
write one board. The task tools are built from it (`tools/task_tools.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent17.domain import TaskClaim, TaskCompletion
from agent17.store.board import TaskBoard

DEFAULT_POLL_INTERVAL_SECONDS = 5.0
DEFAULT_MAX_IDLE_POLLS = 12


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The caller of a tool: `identity` is the agent's name and becomes the owner.

    `idempotency_key` is set while an agent run works on an auto-claimed task
    (it is that claim's token), so side-effecting tools can recognise a retry.
    """

    identity: str
    idempotency_key: str | None = None


class DirectTaskClaimService:
    """The tools' claims: the caller's identity is the owner, and nothing else is done."""

    def __init__(self, store: TaskBoard) -> None:
        self.store = store

    def claim_task(self, task_id: str, context: ToolContext) -> TaskClaim:
        """Claim one named task for the caller."""
        return self.store.claim_task(task_id, context.identity)

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task (by creation order) for `owner`, or None (the board's)."""
        return self.store.claim_next(owner)

    def complete_task(self, task_id: str, claim_token: str, context: ToolContext) -> TaskCompletion:
        """Complete a task the caller holds, proving it with the claim token."""
        return self.store.complete_task(task_id, context.identity, claim_token)

    def verify_claim(self, claim: TaskClaim, context: ToolContext) -> TaskClaim:
        """The claim again if the caller still holds it (owner, token, lease); else a TaskError."""
        return self.store.verify_claim(claim.task.id, context.identity, claim.claim_token)


class WiringError(ValueError):
    """The parts were put together wrongly (two stores, wrong order, twice configured)."""


@dataclass(frozen=True, slots=True, init=False)
class WorkStealingRuntime:
    """The shared board of a team: store, claim service and poll settings."""

    store: TaskBoard
    claim_service: DirectTaskClaimService
    poll_interval_seconds: float
    max_idle_polls: int

    def __init__(
        self,
        *,
        store: TaskBoard,
        claim_service: DirectTaskClaimService | None = None,
        poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
        max_idle_polls: int = DEFAULT_MAX_IDLE_POLLS,
    ) -> None:
        service = claim_service if claim_service is not None else DirectTaskClaimService(store)
        # Catch "the Lead writes database A while teammates scan database B" at wiring time.
        if service.store is not store:
            raise WiringError("the claim service must use the very same store object")
        if poll_interval_seconds <= 0:
            raise WiringError("poll_interval_seconds must be positive")
        if max_idle_polls < 1:
            raise WiringError("max_idle_polls must be at least 1")
        object.__setattr__(self, "store", store)
        object.__setattr__(self, "claim_service", service)
        object.__setattr__(self, "poll_interval_seconds", float(poll_interval_seconds))
        object.__setattr__(self, "max_idle_polls", int(max_idle_polls))
