"""`agent17 run`: a real team through the openai SDK, with free concurrency.

Configuration is validated first: without OPENAI_API_KEY or OPENAI_BASE_URL
the command exits with one line and creates nothing. Then the Lead plans the
board and spawns teammates, who claim work by themselves. The run ends by
itself once the Lead has answered and no teammate has work left; the Lead
then reads its teammates' reports, and each teammate is shut down through the
typed protocol (a real handshake, not a timeout). Ctrl-C stops every worker
after its current step; each store operation is one transaction, so nothing
is left half done.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from agent17.agent.openai_model import ConfigurationError, OpenAIModel, validate_openai_environment
from agent17.agent.permissions import terminal_approver
from agent17.bootstrap import TeamSettings, build_team
from agent17.team.protocol import ShutdownResponse, TextMessage
from agent17.team.teammate import TickKind, TickOutcome
from agent17.viz.dag import board_table

QUIET_TIMEOUT_SECONDS = 30 * 60.0
SHUTDOWN_TIMEOUT_SECONDS = 120.0


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
        approver=terminal_approver(stdin if stdin is not None else sys.stdin, out),
        on_outcome=log,
        poll_interval_seconds=poll_interval_seconds,
        max_idle_polls=max_idle_polls,
    )
    team = build_team(settings)
    try:
        out.write(f"agent17 run: model {config.model}, workspace {team.store.workspace}\n")
        team.teammates.start()
        answer = team.lead.run(prompt)
        out.write(f"lead: {answer.final_text}\n")
        finished = team.teammates.run_until_quiet(timeout=quiet_timeout_seconds)
        reports = [
            f"{delivery.envelope.sender}: {delivery.message.content}"
            for delivery in team.protocol.receive_all(settings.lead_name)
            if isinstance(delivery.message, TextMessage)
        ]
        if reports:
            summary = team.lead.run("Reports from your teammates:\n" + "\n".join(reports))
            out.write(f"lead: {summary.final_text}\n")
        for name in team.teammates.names:
            if not team.teammates.teammate(name).closed:
                team.protocol.request_shutdown(name)
        team.teammates.wait_for_workers(timeout=SHUTDOWN_TIMEOUT_SECONDS)
        closed = [
            delivery.envelope.sender
            for delivery in team.protocol.receive_all(settings.lead_name)
            if isinstance(delivery.message, ShutdownResponse) and delivery.message.approved
        ]
        if closed:
            out.write(f"shut down: {', '.join(sorted(closed))}\n")
        out.write(board_table(team.store.list_tasks()) + "\n")
        if not finished:
            out.write(
                "agent17 run: stopped with work left on the board (no teammate could do it)\n"
            )
            return 1
        return 0
    finally:
        team.close()
