"""`agent17 teammate`: one teammate as its own OS process on a shared board.

This is the team the chapter describes: independent workers that never see
each other's memory, coordinating only through the board and the mailbox: the
workspace's SQLite files, or with `--store postgresql://...` a PostgreSQL
database that teammates on other hosts share (the workspace stays this
teammate's working directory, with its own ledger and audit trail). A
teammate process

1. checks its configuration before it touches any file (one line and a non-zero
   exit otherwise);
2. opens the board and the team's mailbox, and joins the team under its name:
   refused while another live worker has that name (one name, one worker);
   mail it claimed but never acked before a crash is delivered again;
3. runs the idle loop (mailbox -> protocol -> plan gate -> claim_next -> wait);
   the wait ends early when another process changes the board or the mailbox,
   or when a lease runs out (file notifications and `PRAGMA data_version` on
   SQLite, LISTEN/NOTIFY on PostgreSQL: `TeamState.sleeper`), so a message or
   a newly ready task is noticed within milliseconds; it says once how it
   hears of changes (`TeamState.wakes_by`: the 0.1 s look where there are no
   file notifications);
4. ends after the shutdown handshake or after its idle timeout (exit 0, one
   line saying which), on Ctrl-C (exit 130), or when its model server refuses
   the call or still fails after its retries (exit 1, one line). Every store and mailbox
   operation is one transaction, so a Ctrl-C or a kill -9 leaves every file
   (and the database) whole: a task it held waits for its lease to run out,
   and a message it held is delivered again when the name starts next.

With `--model scripted` (the default, offline) each auto-claimed task takes
`--work-seconds` of real time, then is completed with its claim token and
reported to the Lead. `--model openai` uses the same configuration as
`agent17 run` (OPENAI_API_KEY, OPENAI_BASE_URL, AGENT17_MODEL).
"""

from __future__ import annotations

import io
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent17.agent.ledger import IdempotencyLedger
from agent17.agent.model_failures import ModelError
from agent17.agent.models import Model, teammate_script
from agent17.agent.openai_model import ConfigurationError, OpenAIModel, validate_openai_environment
from agent17.agent.permissions import AuditTrail, teammate_policy, terminal_approver
from agent17.bootstrap import PlanGatedPolicy, teammate_runner
from agent17.claims import WorkStealingRuntime
from agent17.domain import Refusal, utc_now
from agent17.team.idle_loop import LoopEnd, run_idle_loop
from agent17.team.protocol import DEFAULT_LEAD_NAME, TeamProtocol
from agent17.team.registry import TeamRegistry, require_teammate_name
from agent17.team.teammate import Teammate, TickKind, TickOutcome
from agent17.team.workplace import StoreUrlError, open_team_state, parse_store_url, real_workspace

START_GATE_TIMEOUT_SECONDS = 120.0


class TeammateConfigError(ValueError):
    """The teammate cannot start as configured; the message is one line."""


@dataclass(frozen=True, slots=True)
class TeammateConfig:
    """A teammate process's settings, checked before any file is touched."""

    name: str
    workspace: Path
    model: str
    poll_interval_seconds: float
    max_idle_polls: int
    lease_seconds: float
    work_seconds: float
    start_gate: Path | None
    environ: Mapping[str, str] = field(repr=False)  # the whole environment: keys and passwords
    store: str | None = field(default=None, repr=False)  # a URL may hold a password
    """None: the workspace's SQLite files; a `postgresql://` URL: that database."""


def check_config(config: TeammateConfig) -> None:
    """Refuse a configuration that cannot run, in one line, creating nothing."""
    try:
        require_teammate_name(config.name, DEFAULT_LEAD_NAME)
    except Refusal as error:
        raise TeammateConfigError(f"--name: {error.message}") from None
    if not 0 < config.poll_interval_seconds <= 3600:
        raise TeammateConfigError("--poll-interval must be more than 0 and at most 3600 seconds")
    if not 1 <= config.max_idle_polls <= 1_000_000:
        raise TeammateConfigError("--max-idle-polls must be at least 1")
    if not 0.001 <= config.lease_seconds <= 31_536_000:
        raise TeammateConfigError("--lease-seconds must be from 0.001 to 31,536,000 (a year)")
    if not 0 <= config.work_seconds <= 86_400:
        raise TeammateConfigError("--work-seconds must be from 0 to 86,400")
    if config.model == "openai":
        try:
            validate_openai_environment(config.environ)
        except ConfigurationError as error:
            raise TeammateConfigError(str(error)) from None
    elif config.model != "scripted":
        raise TeammateConfigError("--model must be scripted or openai")
    if config.workspace.exists() and not config.workspace.is_dir():
        raise TeammateConfigError(f"--workspace {config.workspace} is not a directory")
    try:
        parse_store_url(config.store)
    except StoreUrlError as error:
        raise TeammateConfigError(str(error)) from None


@dataclass(frozen=True, slots=True)
class ProcessTeam:
    """The team as one teammate process sees it (the team tools' TeamView)."""

    lead_name: str
    protocol: TeamProtocol
    registry: TeamRegistry


def _stamp() -> str:
    return utc_now().strftime("%H:%M:%S.%f")[:-3]


def _line(out: TextIO, name: str, text: str) -> None:
    out.write(f"{_stamp()} {name}[{os.getpid()}] {text}\n")
    out.flush()


def _model(config: TeammateConfig, out: TextIO) -> Model:
    if config.model == "openai":
        return OpenAIModel.from_environment(config.environ)

    def work(task: Mapping[str, Any]) -> None:
        _line(out, config.name, f"works on {task['subject']} for {config.work_seconds:g} s")
        time.sleep(config.work_seconds)  # the task's work; Ctrl-C cuts it short

    return teammate_script(work=work if config.work_seconds > 0 else None)


def _wait_for_gate(gate: Path) -> None:
    deadline = time.monotonic() + START_GATE_TIMEOUT_SECONDS
    while not gate.exists():
        if time.monotonic() > deadline:
            raise TeammateConfigError(f"the start gate {gate} never opened")
        time.sleep(0.01)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the process as cleanly as Ctrl-C


def run_teammate(config: TeammateConfig, out: TextIO, err: TextIO) -> int:
    """Run one teammate until shutdown, idle timeout or Ctrl-C; the process exit code."""
    try:
        check_config(config)
    except TeammateConfigError as error:
        err.write(f"agent17 teammate: {error}\n")
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate)
    opened: list[Any] = []
    teammate: Teammate | None = None
    try:
        # The board and the mailbox first: a server that cannot be reached stops here,
        # before this host's ledger and audit trail are made in the workspace.
        state = open_team_state(
            parse_store_url(config.store), config.workspace, lease_seconds=config.lease_seconds
        )
        opened.append(state)
        store, mailbox = state.store, state.mailbox
        protocol = TeamProtocol(mailbox)
        work_stealing = WorkStealingRuntime(
            store=store,
            poll_interval_seconds=config.poll_interval_seconds,
            max_idle_polls=config.max_idle_polls,
        )
        audit = AuditTrail.for_workspace(state.records())
        ledger = IdempotencyLedger.for_workspace(state.records())
        opened.append(ledger)
        # A teammate process usually has no terminal: then every approval is denied.
        approver = terminal_approver(sys.stdin or io.StringIO(), out)
        runner = teammate_runner(
            config.name,
            _model(config, out),
            workspace=real_workspace(config.workspace),
            team=ProcessTeam(DEFAULT_LEAD_NAME, protocol, TeamRegistry(mailbox)),
            work_stealing=work_stealing,
            policy=PlanGatedPolicy(teammate_policy(approver), protocol),
            audit=audit,
            ledger=ledger,
            max_turns=12,
        )
        teammate = Teammate(
            config.name, agent=runner, protocol=protocol, work_stealing=work_stealing
        )
        sleeper = state.sleeper(config.name)
        if config.start_gate is not None:
            _wait_for_gate(config.start_gate)
        _line(out, config.name, f"joined the team on {state.where}")
        _line(out, config.name, f"hears of changes by {state.wakes_by}")
        member = teammate

        def before_scan() -> None:
            member.ensure_membership()  # a lost hold on the name stops it (PostgreSQL)
            sleeper.mark()

        def report(outcome: TickOutcome) -> None:
            if outcome.kind is not TickKind.IDLE:
                _line(out, config.name, outcome.describe(named=False))

        end = run_idle_loop(
            teammate,
            sleeper=sleeper,
            wake=mailbox.wakeups.event_for(config.name),
            poll_interval_seconds=config.poll_interval_seconds,
            max_idle_polls=config.max_idle_polls,
            on_outcome=report,
            before_scan=before_scan,
        )
        if end is LoopEnd.CLOSED:
            _line(out, config.name, "shut down through the protocol (the Lead's request)")
        else:
            _line(
                out,
                config.name,
                f"idle timeout: {config.max_idle_polls} empty polls in a row; exiting"
                " (no shutdown was requested)",
            )
        return 0
    except KeyboardInterrupt:
        err.write(
            f"agent17 teammate {config.name}: interrupted; every finished transaction is on"
            " disk (a task it held comes back when its lease runs out)\n"
        )
        return 130
    except TeammateConfigError as error:
        err.write(f"agent17 teammate: {error}\n")
        return 2
    except ModelError as error:
        # Neither completed nor given back: finishing it is the model's call, and a
        # release could hand the task on while an effect of this run still goes on.
        err.write(
            f"agent17 teammate {config.name}: {error.code}: {error.message}; stopped (a task"
            " it held stays in progress until its lease runs out)\n"
        )
        return 1
    except Refusal as error:
        err.write(f"agent17 teammate {config.name}: {error.code}: {error.message}\n")
        return 1
    finally:
        if teammate is not None:
            teammate.leave()
        for thing in reversed(opened):
            thing.close()
        signal.signal(signal.SIGTERM, previous)
