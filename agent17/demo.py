"""`agent17 demo`: the chapter's minimal scenario with a real team, offline, the same every run.

The Lead creates A and B, then C blocked by both, and spawns alice and bob
without assigning anything. Each teammate runs in its own thread and claims
work from the board by itself; each task takes simulated time (A 30 s, B 45 s,
C 20 s). A `SimulatedTime` lets one thread move at a time and jumps the clock
when all of them wait, so the story is the same on every run while it shows
what real teammates do:

1-3. the Lead builds the board and starts both teammates, assigning nothing;
4-5. both scan; alice takes A, bob takes B: both held at the same time;
6.   alice finishes A first: C is still not claimable (it waits for B);
     the Lead decides one teammate is enough for C and asks bob to shut down,
     a request that waits in bob's mailbox while he works on B;
7.   bob finishes B, so C is ready; bob's next pass reads his mailbox first,
     shuts down and takes no task (step 8); alice claims C, the only one to;
8.   when the board is done the Lead asks alice to shut down too.

The checks at the end read the event log and the team's own records.
`agent17 demo --processes` (demo_processes.py) tells the same story with
alice and bob as real `agent17 teammate` processes. With `--store
postgresql://...` the board and the mailbox are in that database, and the story
and the checks are the same: the clock is the simulation's on either engine.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent17.agent.models import minimal_scenario_lead_script, teammate_script
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import counted_ids
from agent17.domain import EventKind, Task, TaskEvent, TaskStatus, completed_ids, waiting_for
from agent17.team.protocol import ShutdownResponse, TextMessage
from agent17.team.simulation import SimulatedTime
from agent17.team.teammate import TickKind, TickOutcome
from agent17.team.workplace import StoreLocation, board_in_the_way, parse_store_url
from agent17.viz.dag import active_leases, board_table
from agent17.viz.replay import describe_event
from agent17.wire import wire_clock

DEMO_PROMPT = (
    "Create A and B, then C that needs both; start alice and bob and let them steal the work."
)
WORK_SECONDS: Mapping[str, float] = {"A": 30.0, "B": 45.0, "C": 20.0}
"""How long each task takes, in simulated seconds."""
LEAD_LOOK_SECONDS = 1.0
WORKER_TIMEOUT_SECONDS = 60.0


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


@dataclass
class _Story:
    """Prints what happens, in the order it happens, and remembers what the checks need."""

    out: TextIO
    team: Team | None = None
    printed: int = 0
    handled_while_ready: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, who: str, text: str) -> None:
        assert self.team is not None and self.team.settings.clock is not None
        now = wire_clock(self.team.settings.clock())
        self.out.write(f"  {now} {who:<6} {text}\n")
        self.out.flush()

    def board_events(self) -> None:
        assert self.team is not None
        tasks = self.team.store.list_tasks()
        for event in self.team.store.events(self.printed):
            self.printed = event.sequence
            self.say("board", describe_event(event, tasks, timed=False))

    def working(self, name: str, task: Mapping[str, Any], seconds: float) -> None:
        with self.lock:
            self.board_events()
            self.say(name, f"works on {task['subject']} for {seconds:g} s")

    def on_outcome(self, outcome: TickOutcome) -> None:
        if outcome.kind is TickKind.IDLE:
            return  # how often a teammate polls is not part of the story
        assert self.team is not None
        with self.lock:
            tasks = self.team.store.list_tasks()
            self.board_events()
            if outcome.kind is TickKind.PROTOCOL_HANDLED:
                ready = readiness(tasks)
                if ready.startswith("ready: ") and not ready.startswith("ready: nothing"):
                    self.handled_while_ready.append((outcome.teammate, ready))
                self.say(outcome.teammate, f"{outcome.describe(named=False)} ({ready})")
                return
            self.say(outcome.teammate, f"pass done: {outcome.describe(named=False)}")
            if outcome.kind is TickKind.CLAIMED:
                self.say("board", readiness(tasks))


def demo_settings(
    workspace: Path,
    simulation: SimulatedTime,
    story: _Story | None = None,
    *,
    store: str | None = None,
) -> TeamSettings:
    """The deterministic team of the demo (and notebook 07): simulated time, counted ids.

    `store`: where the board and mailbox live (None: the workspace's SQLite files).
    The clock is the simulation's on either engine, so the story is the same.
    """

    def teammate_model(name: str) -> Any:
        def work(task: Mapping[str, Any]) -> None:
            seconds = WORK_SECONDS.get(str(task["subject"]), 10.0)
            if story is not None:
                story.working(name, task, seconds)
            simulation.sleep(seconds)

        return teammate_script(work=work)

    return TeamSettings(
        workspace=workspace,
        lead_model=minimal_scenario_lead_script(),
        teammate_model=teammate_model,
        clock=simulation.clock,
        **counted_ids(),
        simulation=simulation,
        on_outcome=None if story is None else story.on_outcome,
        store=store,
    )


def scenario_checks(events: list[TaskEvent], subjects: dict[str, str]) -> list[tuple[str, bool]]:
    """The chapter's acceptance claims about the board, checked on its event log."""
    by_subject = {subject: task_id for task_id, subject in subjects.items()}
    a, b, c = (by_subject.get(name, "") for name in ("A", "B", "C"))
    claims = [event for event in events if event.kind is EventKind.CLAIMED]
    completions = {event.task_id: event for event in events if event.kind is EventKind.COMPLETED}
    first_claim = {e.task_id: e for e in reversed(claims)}
    owner = {task_id: event.owner for task_id, event in completions.items()}
    held_at_once = (
        a in first_claim
        and b in first_claim
        and a in completions
        and b in completions
        and max(first_claim[a].sequence, first_claim[b].sequence)
        < min(completions[a].sequence, completions[b].sequence)
    )
    c_claims = [event for event in claims if event.task_id == c]
    c_after = bool(c_claims) and all(
        task in completions and completions[task].sequence < c_claims[0].sequence for task in (a, b)
    )
    return [
        (
            "A and B went to different teammates",
            owner.get(a) is not None and owner.get(b) is not None and owner.get(a) != owner.get(b),
        ),
        ("A and B were both claimed before either was completed (held at once)", held_at_once),
        ("with one of A and B done, C was not claimable; C was claimed after both", c_after),
        ("C was claimed by exactly one teammate", len(c_claims) == 1),
        (
            "every task was claimed once and completed once",
            len(claims) == len(subjects) == len(completions),
        ),
        (
            "time moved on the clock while the team worked",
            bool(events) and events[-1].at_utc > events[0].at_utc,
        ),
    ]


def _lead_watches(team: Team, simulation: SimulatedTime, story: _Story) -> None:
    """The Lead's part while the team works: look every simulated second, ask for shutdowns."""
    asked: set[str] = set()
    never = threading.Event()
    while True:
        tasks = {task.subject: task for task in team.store.list_tasks()}
        registry = team.teammates.registry
        with story.lock:
            story.board_events()
            held = [t for t in tasks.values() if t.status is TaskStatus.IN_PROGRESS]
            if len(held) == 2 and "both" not in asked:
                asked.add("both")
                leases = active_leases(team.store.events())
                story.say(
                    "lead",
                    "sees A and B both in_progress, held at once:\n"
                    + _indent(board_table(list(tasks.values()), leases=leases)),
                )
            a_done = tasks["A"].status is TaskStatus.COMPLETED
            if a_done and tasks["B"].status is TaskStatus.IN_PROGRESS and "bob" not in asked:
                asked.add("bob")
                request = team.protocol.request_shutdown("bob")
                story.say(
                    "lead",
                    f"asks bob to shut down after B (request …{request.request_id[-4:]}):"
                    " one teammate is enough for C.\n"
                    + _indent("The request waits in bob's mailbox while he works on B."),
                )
            if all(t.status is TaskStatus.COMPLETED for t in tasks.values()):
                if "alice" not in asked:
                    asked.add("alice")
                    request = team.protocol.request_shutdown("alice")
                    story.say(
                        "lead",
                        f"the board is done: asks alice to shut down (…{request.request_id[-4:]})",
                    )
                if all(registry.is_closed(name) for name in team.teammates.names):
                    return
        simulation.wait(LEAD_LOOK_SECONDS, never)


def _indent(text: str) -> str:
    return "\n".join(f"{' ' * 19}{line}" for line in text.splitlines())


def fresh_place(
    store: str | None, workspace: Path | None, prefix: str, out: TextIO, title: str
) -> tuple[StoreLocation, Path] | None:
    """Where a demo's story goes: its store and workspace (a new folder named `prefix`...),
    said on `out` under the story's `title`.

    None, said on stderr, when that store already holds a board: the demo's ids are
    fixed, and a second story on the same board would be a different one.
    """
    location = parse_store_url(store)
    taken = board_in_the_way(location, workspace)
    if taken is not None:
        print(
            f"agent17: {taken} already has a task board; the demo needs a fresh one",
            file=sys.stderr,
        )
        return None
    workspace = workspace or Path(tempfile.mkdtemp(prefix=prefix))
    out.write(f"{title}\nworkspace: {workspace}\n")
    if location.on_postgres:
        out.write(f"board and mailbox: {location.shown()}\n")
    out.write("\n")
    return location, workspace


def run_demo(workspace: Path | None, out: TextIO, *, store: str | None = None) -> int:
    """Run the minimal scenario offline; print the timeline; 0 if every check holds.

    `store`: a `postgresql://` URL puts the board and the mailbox in that database
    (it must hold no board yet); the workspace still holds each host's own records.
    """
    title = "agent17 demo: work stealing and autonomy (offline, scripted model, simulated time)"
    place = fresh_place(store, workspace, "agent17-demo-", out, title)
    if place is None:
        return 2
    location, workspace = place
    simulation = SimulatedTime()
    story = _Story(out)
    team = build_team(demo_settings(workspace, simulation, story, store=store))
    story.team = team
    try:
        simulation.join("lead")
        simulation.enter("lead")
        out.write("1-3. The Lead builds the board and starts the team, assigning nothing:\n")
        result = team.lead.run(DEMO_PROMPT)
        for call in result.tool_calls:
            story.say("lead", f"{call.tool} {_arguments_text(call.arguments)} -> {call.outcome}")
        story.board_events()
        story.say("lead", f"answers: {result.final_text!r}")
        out.write("\n4-8. alice and bob, each in its own thread, claim whatever is ready:\n")
        team.teammates.start()
        _lead_watches(team, simulation, story)
        simulation.leave()
        finished = team.teammates.wait_for_workers(timeout=WORKER_TIMEOUT_SECONDS)
        return _report(team, story, result.stopped == "answered", finished, location, out)
    finally:
        team.close()


def _report(
    team: Team,
    story: _Story,
    answered: bool,
    finished: bool,
    location: StoreLocation,
    out: TextIO,
) -> int:
    out.write("\nThe Lead's inbox:\n")
    approved: set[str] = set()
    for delivery in team.protocol.receive_all(team.settings.lead_name):
        message, sender = delivery.message, delivery.envelope.sender
        if isinstance(message, TextMessage):
            out.write(f"  {sender:<6} -> lead: {message.content!r}\n")
        elif isinstance(message, ShutdownResponse):
            out.write(
                f"  {sender:<6} -> lead: shutdown {'approved' if message.approved else 'refused'}\n"
            )
            if message.approved:
                approved.add(sender)
    tasks = team.store.list_tasks()
    out.write("\nThe board at the end:\n")
    out.write(board_table(tasks) + "\n\n")
    names = team.teammates.names
    checks = [("the Lead built the board and started two teammates", answered and len(names) == 2)]
    checks += scenario_checks(team.store.events(), {task.id: task.subject for task in tasks})
    checks.append(
        (
            "a shutdown request waiting while a task was ready was handled first; no task taken",
            any(name == "bob" for name, _ in story.handled_while_ready),
        )
    )
    registry = team.teammates.registry
    checks.append(
        (
            "every teammate shut down through the protocol",
            finished
            and not team.teammates.failures()
            and approved == set(names)
            and all(registry.is_closed(name) for name in names),
        )
    )
    for text, ok in checks:
        out.write(f"  [{'ok' if ok else 'FAILED'}] {text}\n")
    out.write(f"\nSee the board again: {location.board_command(team.workspace)}\n")
    return 0 if all(ok for _, ok in checks) else 1


def _arguments_text(arguments: dict[str, object]) -> str:
    shown = []
    for key, value in arguments.items():
        if key == "blocked_by" and isinstance(value, list):
            value = "[" + ", ".join(f"…{str(item)[-4:]}" for item in value) + "]"
        shown.append(f"{key}={value}")
    return " ".join(shown)
