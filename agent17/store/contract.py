"""TaskStore: what every task store offers, whatever engine holds the board.

SqliteTaskStore and PostgresTaskStore both satisfy it (mypy --strict checks
it wherever a store is passed), and everything above the store (the claim
service, the team, the tools, the tests, the benchmarks) asks for this and
nothing more, so none of it knows which engine it runs on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol, Self

from agent17.domain import Task, TaskClaim, TaskCompletion, TaskEvent


class TaskStore(Protocol):
    """The leased task board: tasks, claims with a lease and a token, and its history."""

    @property
    def lease(self) -> timedelta:
        """How long a claim holds its task."""
        ...

    def create_task(
        self, subject: str, description: str = "", blocked_by: Sequence[str] | Iterable[str] = ()
    ) -> Task:
        """Add a pending task; `blocked_by` names existing tasks that must complete first."""
        ...

    def create_tasks(
        self, drafts: Iterable[tuple[str, str, Sequence[str] | Iterable[str]]]
    ) -> list[Task]:
        """Add several tasks in one transaction, all or none."""
        ...

    def get_task(self, task_id: str) -> Task:
        """One task by id."""
        ...

    def list_tasks(self) -> list[Task]:
        """Every task in creation order."""
        ...

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        ...

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        ...

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        ...

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim:
        """The claim if `owner` still holds `task_id` with `claim_token`, else a TaskError."""
        ...

    def events(self, after_sequence: int = 0) -> list[TaskEvent]:
        """The append-only event log, oldest first, after the given event sequence."""
        ...

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token the board has issued, in issue order."""
        ...

    def next_lease_expiry(self) -> datetime | None:
        """When the first lease now held runs out (None if none is held)."""
        ...

    def data_version(self) -> int:
        """Changes whenever another connection commits to the board."""
        ...

    def explain_claim_next(self) -> list[str]:
        """The engine's query plan for the claim statement, one line per step."""
        ...

    def close(self) -> None:
        """Close the connection; the board stays."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc_info: object) -> None: ...
