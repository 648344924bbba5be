"""Who is calling: the claim service turns a caller's identity into the task owner.

An `owner` field in tool input is never trusted (the input models forbid it);
the owner is always `ToolContext.identity`, so a model can only claim and
complete as itself, and automatic claims go through the same boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from agent17.domain import Task, TaskClaim, TaskCompletion


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The caller of a tool: `identity` is the agent's name and becomes the owner.

    `idempotency_key` is set while an agent run works on an auto-claimed task
    (it is that claim's token), so side-effecting tools can recognise a retry.
    """

    identity: str
    idempotency_key: str | None = None


@runtime_checkable
class LeasedTaskStore(Protocol):
    """What the chapter needs of a task store (SqliteTaskStore is the implementation)."""

    def create_task(
        self, subject: str, description: str = "", blocked_by: tuple[str, ...] | list[str] = ()
    ) -> Task: ...

    def get_task(self, task_id: str) -> Task: ...

    def list_tasks(self) -> list[Task]: ...

    def claim_task(self, task_id: str, owner: str) -> TaskClaim: ...

    def claim_next(self, owner: str) -> TaskClaim | None: ...

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion: ...

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim: ...

    def next_lease_expiry(self) -> datetime | None: ...

    def data_version(self) -> int: ...


class DirectTaskClaimService:
    """The default claim service: the caller's identity is the owner, nothing else."""

    def __init__(self, store: LeasedTaskStore) -> None:
        self.store = store

    def claim_task(self, task_id: str, context: ToolContext) -> TaskClaim:
        """Claim one named task for the caller."""
        return self.store.claim_task(task_id, context.identity)

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task (by creation order) for `owner`, or None."""
        return self.store.claim_next(owner)

    def complete_task(self, task_id: str, claim_token: str, context: ToolContext) -> TaskCompletion:
        """Complete a task the caller holds, proving it with the claim token."""
        return self.store.complete_task(task_id, context.identity, claim_token)

    def verify_claim(self, claim: TaskClaim, context: ToolContext) -> TaskClaim:
        """The claim again if the caller still holds it (owner, token, lease); else a TaskError."""
        return self.store.verify_claim(claim.task.id, context.identity, claim.claim_token)
