"""The composition root: the one place where a team is put together.

It builds exactly one task store and hands that same object to the Lead, the
one-shot subagent and every teammate, wires the teammate runtime in the
order the chapter requires (protocol, then work stealing, then agents),
and gives each role exactly its tool surface:

- Lead: the five task tools + spawn_teammate, send_message, request_shutdown, review_plan
- one-shot subagent: the five task tools
- teammate: shell, read_file, write_file, send_message, submit_plan + four task tools

Model configuration is checked by the caller before `build_team` runs, so a
bad configuration never leaves a `.agent_tutorial` folder behind. Where
the board and the mailbox live is `TeamSettings.store` (team/state.py): the
workspace's SQLite files, or a PostgreSQL database; the board is opened first,
so a server that cannot be reached stops the build before anything is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent17.agent.ledger import IdempotencyLedger
from agent17.agent.models import Model
from agent17.agent.permissions import (
    ApprovalRequest,
    Approver,
    AuditTrail,
    Decision,
    PermissionPolicy,
    teammate_policy,
)
from agent17.agent.runner import AgentRunner
from agent17.claims import (
    DEFAULT_MAX_IDLE_POLLS,
    DEFAULT_POLL_INTERVAL_SECONDS,
    ToolContext,
    WorkStealingRuntime,
)
from agent17.domain import Clock, IdFactory, TaskClaim, utc_now
from agent17.store.board import TaskBoard
from agent17.team.mailbox import TeamMailbox
from agent17.team.protocol import DEFAULT_LEAD_NAME, TeamProtocol
from agent17.team.runtime import OutcomeListener, TeammateRuntime
from agent17.team.simulation import SimulatedTime
from agent17.team.sleepers import Sleeper, WatcherFactory, WatchingSleeper
from agent17.team.workplace import TeamState, open_team_state, parse_store_url, real_workspace
from agent17.tools.base import ToolRegistry
from agent17.tools.task_tools import (
    register_leased_task_tools,
    register_teammate_leased_task_tools,
)
from agent17.tools.team_tools import (
    TeamView,
    lead_team_tool_definitions,
    teammate_team_tool_definitions,
)
from agent17.tools.workspace_tools import workspace_tool_definitions

LEAD_SYSTEM_PROMPT = (
    "You are the Lead of a small agent team. Break the user's goal into tasks on the shared"
    " board with create_task (use blocked_by for dependencies), then spawn teammates with"
    " spawn_teammate. Do not assign tasks: idle teammates claim ready tasks by themselves."
    " Answer the user briefly once the board and the team are set up."
)

SUBAGENT_SYSTEM_PROMPT = (
    "You are a one-shot helper with the task board tools. Do what you are asked and answer."
)


def teammate_system_prompt(name: str, lead_name: str) -> str:
    """The system prompt of teammate `name`: who it is and how it works."""
    return (
        f"You are {name}, a teammate in an agent team led by {lead_name}. When a task arrives"
        " in <auto-claimed-task>, do the work with your tools, then call complete_task with"
        " the task's id and its claim_token. Only complete_task marks a task done. Answer with"
        " one short sentence for the Lead."
    )


class PlanGatedPolicy(PermissionPolicy):
    """Permission rules plus the plan gate: no effectful tool while the plan is not approved."""

    def __init__(self, base: PermissionPolicy, protocol: TeamProtocol) -> None:
        super().__init__(base.rules, base.ask)
        self._protocol = protocol

    def decide(self, request: ApprovalRequest, *, effectful: bool) -> Decision:
        """Deny effectful calls under a pending or rejected plan; otherwise ask the base rules."""
        if effectful and not self._protocol.plan_allows_effectful(request.identity):
            return "deny"
        return super().decide(request, effectful=effectful)


TEAMMATE_HISTORY_RUNS = 8
"""Runs (tasks, messages) a teammate's conversation keeps; see AgentRunner.history_runs."""


def teammate_runner(
    name: str,
    model: Model,
    *,
    workspace: Path,
    team: TeamView,
    work_stealing: WorkStealingRuntime,
    policy: PermissionPolicy,
    audit: AuditTrail,
    ledger: IdempotencyLedger,
    max_turns: int,
) -> AgentRunner:
    """A teammate's agent: its nine tools, its prompt, and the fence on its side effects."""
    registry = ToolRegistry(list(workspace_tool_definitions(workspace)))
    for tool in teammate_team_tool_definitions(team):
        registry.register(tool)
    register_teammate_leased_task_tools(registry, work_stealing)
    service = work_stealing.claim_service

    def fence(claim: TaskClaim, identity: str) -> None:
        service.verify_claim(claim, ToolContext(identity=identity))

    return AgentRunner(
        name,
        model,
        registry,
        system_prompt=teammate_system_prompt(name, team.lead_name),
        policy=policy,
        audit=audit,
        ledger=ledger,
        max_turns=max_turns,
        fence=fence,
        history_runs=TEAMMATE_HISTORY_RUNS,
    )


@dataclass(frozen=True, slots=True)
class TeamSettings:
    """Everything a team needs from outside: models, time, ids, and how to wait and approve."""

    workspace: Path
    lead_model: Model
    teammate_model: Callable[[str], Model]
    clock: Clock | None = None
    new_task_id: IdFactory | None = None
    new_claim_token: IdFactory | None = None
    new_request_id: IdFactory | None = None
    lease_seconds: float = 300.0
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS
    max_idle_polls: int = DEFAULT_MAX_IDLE_POLLS
    sleeper: Sleeper | None = None
    simulation: SimulatedTime | None = None
    approver: Approver | None = None
    on_outcome: OutcomeListener | None = None
    persistent_audit: bool = True
    max_turns: int = 12
    lead_name: str = DEFAULT_LEAD_NAME
    store: str | None = field(default=None, repr=False)  # a URL may hold a password
    """Where the board and mailbox live: None, the workspace's SQLite files; or a
    `postgresql://` URL (the workspace stays the teammates' working directory)."""
    watch_shared_state: bool = False
    """Real time, with teammates of other processes or hosts: each worker waits on a
    sleeper of its own that their changes wake (SQLite: file notifications, then the
    files' data versions; PostgreSQL: LISTEN/NOTIFY), not on `sleeper`. `agent17 run`
    sets it."""


@dataclass(slots=True)
class Team:
    """A wired team: one store, one mailbox, the teammate runtime and the Lead's runner."""

    store: TaskBoard
    work_stealing: WorkStealingRuntime
    mailbox: TeamMailbox
    protocol: TeamProtocol
    teammates: TeammateRuntime
    lead: AgentRunner
    audit: AuditTrail
    ledger: IdempotencyLedger
    settings: TeamSettings
    state: TeamState
    runners: dict[str, AgentRunner] = field(default_factory=dict)
    _closed: bool = False

    def make_subagent(self, model: Model, name: str = "subagent") -> AgentRunner:
        """A one-shot subagent on the same store with the five task tools."""
        registry = ToolRegistry()
        register_leased_task_tools(registry, self.work_stealing)
        return AgentRunner(
            name,
            model,
            registry,
            system_prompt=SUBAGENT_SYSTEM_PROMPT,
            audit=self.audit,
            max_turns=self.settings.max_turns,
        )

    @property
    def workspace(self) -> Path:
        """The teammates' working directory (real path), wherever the board is."""
        return real_workspace(self.settings.workspace)

    @property
    def closed(self) -> bool:
        """True once `close()` ran: a widget still on screen must not use the team."""
        return self._closed

    def close(self) -> None:
        """Stop every worker, then close the databases (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.teammates.stop()
        self.ledger.close()
        self.state.close()


def build_team(settings: TeamSettings) -> Team:
    """Build one store and everything that shares it, wired in the chapter's order."""
    workspace = settings.workspace
    # The board first: a server that cannot be reached stops here, before any file is made.
    state = open_team_state(
        parse_store_url(settings.store),
        workspace,
        clock=settings.clock,
        new_task_id=settings.new_task_id,
        new_claim_token=settings.new_claim_token,
        lease_seconds=settings.lease_seconds,
    )
    store, mailbox = state.store, state.mailbox
    work_stealing = WorkStealingRuntime(
        store=store,
        poll_interval_seconds=settings.poll_interval_seconds,
        max_idle_polls=settings.max_idle_polls,
    )
    protocol = TeamProtocol(
        mailbox, lead_name=settings.lead_name, new_request_id=settings.new_request_id
    )
    watch: WatcherFactory | None = None
    if settings.watch_shared_state:
        board_clock = settings.clock or utc_now

        def watch(name: str) -> tuple[WatchingSleeper, Callable[[], None]]:
            return state.watch(name, clock=board_clock)

    teammates = TeammateRuntime(
        mailbox,
        lead_name=settings.lead_name,
        sleeper=settings.sleeper,
        on_outcome=settings.on_outcome,
        simulation=settings.simulation,
        watch=watch,
    )
    clock_kwargs = {} if settings.clock is None else {"clock": settings.clock}
    audit = (
        AuditTrail.for_workspace(state.records(), **clock_kwargs)
        if settings.persistent_audit
        else AuditTrail.in_memory(**clock_kwargs)
    )
    ledger = (
        IdempotencyLedger.for_workspace(state.records())
        if settings.persistent_audit
        else IdempotencyLedger.in_memory()
    )
    policy = PlanGatedPolicy(teammate_policy(settings.approver), protocol)
    runners: dict[str, AgentRunner] = {}
    teammates_folder = real_workspace(workspace)

    def teammate_agent(name: str) -> AgentRunner:
        runner = teammate_runner(
            name,
            settings.teammate_model(name),
            workspace=teammates_folder,
            team=teammates,
            work_stealing=work_stealing,
            policy=policy,
            audit=audit,
            ledger=ledger,
            max_turns=settings.max_turns,
        )
        runners[name] = runner
        return runner

    teammates.configure_protocol(protocol)
    teammates.configure_work_stealing(work_stealing)
    teammates.configure_agent_factory(teammate_agent)

    lead_tools = ToolRegistry()
    register_leased_task_tools(lead_tools, work_stealing)
    for tool in lead_team_tool_definitions(teammates):
        lead_tools.register(tool)
    lead = AgentRunner(
        settings.lead_name,
        settings.lead_model,
        lead_tools,
        system_prompt=LEAD_SYSTEM_PROMPT,
        audit=audit,
        max_turns=settings.max_turns,
    )
    return Team(
        store=store,
        work_stealing=work_stealing,
        mailbox=mailbox,
        protocol=protocol,
        teammates=teammates,
        lead=lead,
        audit=audit,
        ledger=ledger,
        settings=settings,
        state=state,
        runners=runners,
    )
