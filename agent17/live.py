"""`agent17 run`: a real team through the openai SDK, with free concurrency.

Configuration is validated first: without OPENAI_API_KEY or OPENAI_BASE_URL
the command exits with one line and creates nothing. Then the Lead plans the
board and spawns teammates, who claim work by themselves. The run ends by
itself once the Lead has answered and no teammate has work left; the Lead
then reads its teammates' reports, and each teammate is shut down through the
typed protocol (a real handshake, not a timeout). Ctrl-C stops every worker
after its current step; each store operation is one transaction, so nothing
is left half done. A model server that refuses the calls, or still fails
after the retries, stops the agent that made the call with one line: the
Lead's stops the run, a teammate's stops that teammate, and a task it held
stays in progress until its lease runs out.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from agent17.agent.model_failures import ModelError
from agent17.agent.openai_model import ConfigurationError, OpenAIModel, validate_openai_environment
from agent17.agent.permissions import terminal_approver
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.domain import Refusal
from agent17.team.plans import PlanStatus
from agent17.team.protocol import (
    Delivery,
    PlanSubmission,
    ShutdownResponse,
    TextMessage,
)
from agent17.team.teammate import TickKind, TickOutcome
from agent17.viz.dag import active_leases, board_table

QUIET_TIMEOUT_SECONDS = 30 * 60.0
SHUTDOWN_TIMEOUT_SECONDS = 120.0
LEAD_CHECK_SECONDS = 1.0


def run_live(
    prompt: str,
    workspace: Path,
    environ: Mapping[str, str],
    out: TextIO,
    *,
    stdin: TextIO | None = None,
    poll_interval_seconds: float = 5.0,
    max_idle_polls: int = 12,
    quiet_timeout_seconds: float = QUIET_TIMEOUT_SECONDS,
    store: str | None = None,
) -> int:
    """Run a real team on `prompt`; 0 when the board was finished and the team shut down."""
    try:
        config = validate_openai_environment(environ)
    except ConfigurationError as error:
        print(f"agent17: {error}", file=sys.stderr)
        return 2

    def log(outcome: TickOutcome) -> None:
        if outcome.kind is not TickKind.IDLE:
            out.write(f"  {outcome.describe()}\n")
            out.flush()

    settings = TeamSettings(
        workspace=workspace,
        lead_model=OpenAIModel.from_config(config),
        teammate_model=lambda name: OpenAIModel.from_config(config),
        # No terminal at all (CI, a closed stdin): every approval request is denied.
        approver=terminal_approver(stdin or sys.stdin or io.StringIO(), out),
        on_outcome=log,
        poll_interval_seconds=poll_interval_seconds,
        max_idle_polls=max_idle_polls,
        store=store,
        # Teammates started elsewhere (`agent17 teammate`, another host) complete tasks
        # and send messages too: their changes wake this process's teammates at once.
        watch_shared_state=True,
    )
    team = build_team(settings)
    try:
        return _run_team(team, prompt, config.model, out, quiet_timeout_seconds)
    except ModelError as error:  # the Lead's own call: nothing can go on without it
        print(f"agent17 run: the Lead stopped: {error.code}: {error.message}", file=sys.stderr)
        return 1
    finally:
        team.close()


def _run_team(team: Team, prompt: str, model: str, out: TextIO, quiet_timeout: float) -> int:
    lead_name = team.settings.lead_name
    out.write(f"agent17 run: model {model}, workspace {team.workspace}\n")
    out.write(f"agent17 run: teammates hear of changes by {team.state.wakes_by}\n")
    team.teammates.start()
    answer = team.lead.run(prompt + _pending_plans_note(team))
    out.write(f"lead: {answer.final_text}\n")
    finished = _until_quiet(team, out, quiet_timeout)
    for name in team.teammates.names:
        if not team.teammates.teammate(name).closed:
            team.protocol.request_shutdown(name)
    team.teammates.wait_for_workers(timeout=SHUTDOWN_TIMEOUT_SECONDS)
    closed = [
        delivery.envelope.sender
        for delivery in team.protocol.receive_all(lead_name)
        if isinstance(delivery.message, ShutdownResponse) and delivery.message.approved
    ]
    if closed:
        out.write(f"shut down: {', '.join(sorted(closed))}\n")
    for name, failure in team.teammates.failures().items():
        said = (
            f"{failure.code}: {failure.message}"
            if isinstance(failure, Refusal)
            else f"{type(failure).__name__}: {failure}"
        )
        print(f"agent17 run: {name} stopped: {said}", file=sys.stderr)
    # With the leases: a task a stopped teammate held shows when it comes back.
    leases = active_leases(team.store.events())
    out.write(board_table(team.store.list_tasks(), leases=leases) + "\n")
    if not finished:
        out.write("agent17 run: stopped with work left on the board (no teammate could do it)\n")
        return 1
    return 0


def _until_quiet(team: Team, out: TextIO, timeout: float) -> bool:
    """Let the Lead read its inbox (reports, plans to review) until the team has nothing left."""
    lead_name = team.settings.lead_name
    mail_for_lead = team.mailbox.wakeups.event_for(lead_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mail_for_lead.clear()
        inbox = team.protocol.receive_all(lead_name)
        if inbox:
            reply = team.lead.run(_inbox_text(inbox))
            out.write(f"lead: {reply.final_text}\n")
            continue
        if team.teammates.run_until_quiet(timeout=LEAD_CHECK_SECONDS):
            if not mail_for_lead.is_set():
                return True
        elif not team.teammates.active_workers() and not mail_for_lead.is_set():
            return False  # nobody is running and nobody wrote: nothing will change
    return False


def _inbox_text(inbox: list[Delivery]) -> str:
    lines = ["Messages for you from your team:"]
    for delivery in inbox:
        sender, message = delivery.envelope.sender, delivery.message
        if isinstance(message, TextMessage):
            lines.append(f"- {sender}: {message.content}")
        elif isinstance(message, PlanSubmission):
            lines.append(
                f"- {sender} submitted a plan (request_id {message.request_id}); approve or"
                f" reject it with review_plan:\n{message.plan}"
            )
        elif message is not None:
            lines.append(f"- {sender}: {message.kind.value}")
        else:
            lines.append(f"- {sender}: an unreadable message ({delivery.error})")
    return "\n".join(lines)


def _pending_plans_note(team: Team) -> str:
    # Plans outlive a run (the gate is persistent); an earlier run's pending plan
    # still blocks its teammate, so the Lead is told about it up front.
    pending = [plan for plan in team.protocol.plans() if plan.status is PlanStatus.PENDING]
    if not pending:
        return ""
    listed = "\n".join(
        f"- {plan.agent} (request_id {plan.request_id}): {plan.plan}" for plan in pending
    )
    return f"\n\nPlans from an earlier run still wait for your review_plan:\n{listed}"
