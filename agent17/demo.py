"""`agent17 demo`: the chapter's minimal scenario with a real team and the scripted model.

The Lead creates A and B, then C blocked by both, and spawns alice and bob
without assigning anything. The teammates run in their own worker threads and
claim work from the board by themselves. A lockstep schedule (one tick at a
time, in spawn order) plus injected ids, tokens and clock make the printed
story identical on every run; `agent17 run` is the same team without lockstep.
When the board is done the Lead asks each teammate to shut down through the
typed protocol, and the demo checks the scenario's claims on the event log.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from agent17.agent.models import minimal_scenario_lead_script, teammate_script
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import COURSE_START, ManualClock, uuid_sequence
from agent17.domain import (
    EventKind,
    Task,
    TaskEvent,
    TaskStatus,
    completed_ids,
    waiting_for,
)
from agent17.store.paths import STATE_DIRNAME, TASK_DB_NAME
from agent17.team.lockstep import Lockstep
from agent17.team.protocol import ShutdownResponse, TextMessage
from agent17.team.teammate import TickKind, TickOutcome
from agent17.viz.dag import board_table
from agent17.viz.replay import describe_event

DEMO_PROMPT = (
    "Create A and B, then C that needs both; start alice and bob and let them steal the work."
)
WORKER_TIMEOUT_SECONDS = 60.0


@dataclass
class _Narrator:
    """Prints the story as it happens, from inside each teammate's turn (so in a fixed order)."""

    out: TextIO
    team: Team | None = None
    printed_events: int = 0
    shutdown_sent: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, who: str, text: str) -> None:
        self.out.write(f"  {who:<6} {text}\n")
        self.out.flush()

    def board_events(self) -> None:
        assert self.team is not None
        tasks = self.team.store.list_tasks()
        for event in self.team.store.events(self.printed_events):
            self.printed_events = event.sequence
            self.say("board", describe_event(event, tasks))

    def on_outcome(self, outcome: TickOutcome) -> None:
        with self.lock:
            if outcome.kind is TickKind.IDLE:
                return  # how many empty polls happen is not part of the story
            self.board_events()
            self.say(outcome.teammate, outcome.describe())
            if outcome.kind is TickKind.CLAIMED:
                assert self.team is not None
                self.say("board", readiness(self.team.store.list_tasks()))
            self._shutdown_when_done()

    def _shutdown_when_done(self) -> None:
        assert self.team is not None
        if self.shutdown_sent:
            return
        if all(task.status is TaskStatus.COMPLETED for task in self.team.store.list_tasks()):
            self.shutdown_sent = True
            for name in self.team.teammates.names:
                request = self.team.protocol.request_shutdown(name)
                self.say("lead", f"asks {name} to shut down (request {request.request_id[-4:]})")


def readiness(tasks: list[Task]) -> str:
    """What the board offers now: ready tasks, and what each waiting task still needs."""
    done = completed_ids(tasks)
    subjects = {task.id: task.subject for task in tasks}
    ready, waiting = [], []
    for task in tasks:
        if task.status is not TaskStatus.PENDING:
            continue
        missing = [subjects[dep] for dep in waiting_for(task, done)]
        if missing:
            waiting.append(f"{task.subject} (waits for {', '.join(missing)})")
        else:
            ready.append(task.subject)
    if not ready and not waiting:
        return "nothing left to claim"
    parts = [f"ready: {', '.join(ready) or 'nothing'}"]
    if waiting:
        parts.append(f"not claimable: {', '.join(waiting)}")
    return "; ".join(parts)


def demo_settings(workspace: Path, on_outcome: Callable[[TickOutcome], None]) -> TeamSettings:
    """The deterministic settings the demo (and the notebooks) build their team with."""
    return TeamSettings(
        workspace=workspace,
        lead_model=minimal_scenario_lead_script(),
        teammate_model=lambda name: teammate_script(),
        clock=ManualClock(COURSE_START),
        new_task_id=uuid_sequence(17),
        new_claim_token=uuid_sequence(71),
        new_request_id=uuid_sequence(99),
        lockstep=Lockstep(),
        on_outcome=on_outcome,
    )


def scenario_checks(events: list[TaskEvent], subjects: dict[str, str]) -> list[tuple[str, bool]]:
    """The chapter's acceptance claims, checked on the event log."""
    by_subject = {subject: task_id for task_id, subject in subjects.items()}
    claims = [event for event in events if event.kind is EventKind.CLAIMED]
    completions = {e.task_id: e for e in events if e.kind is EventKind.COMPLETED}
    owner = {task_id: event.owner for task_id, event in completions.items()}
    a, b, c = (by_subject.get(name, "") for name in ("A", "B", "C"))
    c_claims = [event for event in claims if event.task_id == c]
    c_after = bool(c_claims) and all(
        task in completions and completions[task].sequence < c_claims[0].sequence for task in (a, b)
    )
    return [
        (
            "A and B went to different teammates",
            owner.get(a) is not None and owner.get(b) is not None and owner.get(a) != owner.get(b),
        ),
        ("C was claimed only after A and B were completed", c_after),
        ("C was claimed by exactly one teammate", len(c_claims) == 1),
        (
            "every task was claimed once and completed once",
            len(claims) == len(subjects) == len(completions),
        ),
    ]


def run_demo(workspace: Path | None, out: TextIO) -> int:
    """Run the minimal scenario offline; print the timeline; 0 if every check holds."""
    if workspace is None:
        workspace = Path(tempfile.mkdtemp(prefix="agent17-demo-"))
    elif (workspace / STATE_DIRNAME / TASK_DB_NAME).exists():
        # The demo's ids are fixed; a second story on the same board would be a different one.
        print(
            f"agent17: {workspace} already has a task board; the demo needs a fresh workspace",
            file=sys.stderr,
        )
        return 2
    narrator = _Narrator(out)
    out.write("agent17 demo: work stealing and autonomy (offline, scripted model)\n")
    out.write(f"workspace: {workspace}\n\n")
    team = build_team(demo_settings(workspace, narrator.on_outcome))
    narrator.team = team
    try:
        out.write("The Lead builds the board and the team:\n")
        result = team.lead.run(DEMO_PROMPT)
        for call in result.tool_calls:
            narrator.say("lead", f"{call.tool} {_arguments_text(call.arguments)} -> {call.outcome}")
        narrator.board_events()
        narrator.say("lead", f"answers: {result.final_text!r}")
        out.write("\nalice and bob run on their own, claiming whatever is ready:\n")
        team.teammates.start()
        finished = team.teammates.wait_for_workers(timeout=WORKER_TIMEOUT_SECONDS)
        failures = team.teammates.failures()
        with narrator.lock:
            narrator.board_events()
        out.write("\nThe Lead's inbox:\n")
        approved_shutdowns: set[str] = set()
        for delivery in team.protocol.receive_all(team.settings.lead_name):
            message = delivery.message
            sender = delivery.envelope.sender
            if isinstance(message, TextMessage):
                narrator.say(sender, f"-> lead: {message.content!r}")
            elif isinstance(message, ShutdownResponse):
                verdict = "approved" if message.approved else "refused"
                narrator.say(sender, f"-> lead: shutdown {verdict}")
                if message.approved:
                    approved_shutdowns.add(sender)
            elif message is not None:
                narrator.say(sender, f"-> lead: {message.kind.value}")
        tasks = team.store.list_tasks()
        out.write("\nThe board at the end:\n")
        out.write(board_table(tasks) + "\n\n")
        checks = [
            (
                "the Lead built the board and the team",
                result.stopped == "answered" and len(team.teammates.names) == 2,
            )
        ]
        checks += scenario_checks(team.store.events(), {task.id: task.subject for task in tasks})
        names = team.teammates.names
        closed = all(team.teammates.teammate(name).closed for name in names)
        checks.append(
            (
                "every teammate shut down through the protocol",
                finished and not failures and closed and approved_shutdowns == set(names),
            )
        )
        for text, ok in checks:
            out.write(f"  [{'ok' if ok else 'FAILED'}] {text}\n")
        return 0 if all(ok for _, ok in checks) else 1
    finally:
        team.close()


def _arguments_text(arguments: dict[str, object]) -> str:
    shown = []
    for key, value in arguments.items():
        if key == "blocked_by" and isinstance(value, list):
            value = "[" + ", ".join(f"…{str(item)[-4:]}" for item in value) + "]"
        shown.append(f"{key}={value}")
    return " ".join(shown)
