"""Shared helpers of the team tests: a deterministic team and fake agents that record their runs.

The unit under test is the teammate and its runtime, so the agent is a small
fake: it records every run and, when told to, completes its auto-claimed task
through the claim service with the claim token (as a real model would, by
calling complete_task).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store_fixtures import new_store
from team_backends import TeamPlace

from agent17 import (
    DirectTaskClaimService,
    TaskStatus,
    ToolContext,
    WorkStealingRuntime,
)
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.team.mailbox import Mailbox, TeamMailbox
from agent17.team.protocol import ProtocolMessage, TeamProtocol, encode_message
from agent17.team.runtime import TeammateRuntime
from agent17.team.sleepers import Sleeper
from agent17.team.teammate import Teammate, TickOutcome

REQUEST_BLOCK = 5
AUTO_CLAIMED = re.compile(r"<auto-claimed-task>(.*?)</auto-claimed-task>", re.DOTALL)


def request_id(number: int) -> str:
    """The n-th protocol request id of a team built here (1-based)."""
    return f"00000000-0000-4000-8000-{REQUEST_BLOCK:04d}{number:08d}"


def auto_claimed_payload(user_text: str) -> dict[str, Any] | None:
    """The JSON inside `<auto-claimed-task>`, or None for any other message."""
    match = AUTO_CLAIMED.search(user_text)
    return None if match is None else dict(json.loads(match.group(1)))


@dataclass(frozen=True, slots=True)
class FakeReply:
    """What a fake run returns: only the final text."""

    final_text: str


@dataclass(frozen=True, slots=True)
class AgentCall:
    """One recorded run of a fake agent."""

    user_text: str
    idempotency_key: str | None


@dataclass
class FakeAgent:
    """Records runs; completes auto-claimed tasks if `complete`, between the two hooks."""

    name: str
    claim_service: DirectTaskClaimService | None = None
    complete: bool = False
    before_complete: Callable[[dict[str, Any]], None] | None = None
    after_complete: Callable[[dict[str, Any]], None] | None = None
    fail_with: BaseException | None = None
    reply: str | None = None
    calls: list[AgentCall] = field(default_factory=list)

    def run(
        self, user_text: str, *, idempotency_key: str | None = None, claim: Any = None
    ) -> FakeReply:
        """Record the run, then act like a model would."""
        self.calls.append(AgentCall(user_text, idempotency_key))
        if self.fail_with is not None:
            raise self.fail_with
        payload = auto_claimed_payload(user_text)
        if payload is None:
            return FakeReply(f"{self.name} read it" if self.reply is None else self.reply)
        subject = payload["task"]["subject"]
        if not self.complete:
            return FakeReply(f"{self.name} is still working on {subject}")
        if self.before_complete is not None:
            self.before_complete(payload)
        assert self.claim_service is not None, "a completing fake agent needs the claim service"
        self.claim_service.complete_task(
            payload["task"]["id"], payload["claim_token"], ToolContext(identity=self.name)
        )
        if self.after_complete is not None:
            self.after_complete(payload)
        return FakeReply(f"{self.name} completed {subject}")


@dataclass
class Team:
    """Everything one test's team is made of, built on one workspace."""

    workspace: Path
    store: Any
    mailbox: TeamMailbox
    protocol: TeamProtocol
    work_stealing: WorkStealingRuntime
    runtime: TeammateRuntime
    agents: dict[str, FakeAgent]
    outcomes: list[TickOutcome]

    def spawn(self, name: str) -> Teammate:
        """Spawn a teammate through the runtime (its agent lands in `agents`)."""
        return self.runtime.spawn(name)

    def status(self, task_id: str) -> TaskStatus:
        """A task's status, read from the store."""
        return self.store.get_task(task_id).status


@contextlib.contextmanager
def team(
    workspace: Path,
    *,
    sleeper: Sleeper | None = None,
    complete: bool = True,
    before_complete: Callable[[dict[str, Any]], None] | None = None,
    after_complete: Callable[[dict[str, Any]], None] | None = None,
    poll_interval_seconds: float = 5.0,
    max_idle_polls: int = 12,
    clock: ManualClock | None = None,
    place: TeamPlace | None = None,
) -> Iterator[Team]:
    """A wired team (protocol, board, fake agents) with fixed ids; stopped and closed after.

    `place`: where the board and the mailbox live (default: SQLite files in `workspace`).
    """
    store: Any = new_store(workspace, clock=clock) if place is None else place.store(clock=clock)
    mailbox: TeamMailbox = Mailbox(workspace) if place is None else place.mailbox()
    protocol = TeamProtocol(mailbox, new_request_id=uuid_sequence(REQUEST_BLOCK))
    work_stealing = WorkStealingRuntime(
        store=store,
        poll_interval_seconds=poll_interval_seconds,
        max_idle_polls=max_idle_polls,
    )
    outcomes: list[TickOutcome] = []
    runtime = TeammateRuntime(mailbox, sleeper=sleeper, on_outcome=outcomes.append)
    agents: dict[str, FakeAgent] = {}

    def make_agent(name: str) -> FakeAgent:
        agents[name] = FakeAgent(
            name,
            claim_service=work_stealing.claim_service,
            complete=complete,
            before_complete=before_complete,
            after_complete=after_complete,
        )
        return agents[name]

    runtime.configure_protocol(protocol)
    runtime.configure_work_stealing(work_stealing)
    runtime.configure_agent_factory(make_agent)
    try:
        yield Team(workspace, store, mailbox, protocol, work_stealing, runtime, agents, outcomes)
    finally:
        runtime.stop(timeout=10)
        mailbox.close()
        store.close()


def post(mailbox: TeamMailbox, to: str, message: ProtocolMessage, *, sender: str) -> None:
    """Put a typed message in `to`'s mailbox as `sender` (even one our tools would refuse)."""
    kind, body = encode_message(message)
    mailbox.send(to, sender=sender, kind=kind, body=body)


def lead_context() -> ToolContext:
    """The Lead calling a tool."""
    return ToolContext(identity="lead")
