"""Watch a team run the board a `task_graph` answer makes: three teammates on simulated time.

The same team as the demo's (build_team, scripted teammates, a SimulatedTime), with the
job's tasks made by the student's function instead of the Lead's script. Each task takes the
same simulated time, so what the picture shows is the graph's parallelism and nothing else:
a chain keeps two teammates idle, the job's own graph keeps all three busy.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.agent.models import lead_script, teammate_script
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import counted_ids
from agent17.domain import EventKind, Task, TaskError, TaskEvent, TaskStatus
from agent17.exercises.task_graph import CreateTask
from agent17.team.simulation import SimulatedTime
from agent17.team.teammate import TickOutcome
from agent17.viz.dag import BoardGraph, board_digraph
from agent17.viz.timeline import LeaseTimeline, lease_timeline

TEAM: Final = ("alice", "bob", "carol")
TASK_SECONDS: Final = 30.0
"""How long every task takes, in simulated seconds."""
_LEASE_SECONDS: Final = 60.0
_WORKERS_TIMEOUT: Final = 60.0


@dataclass(frozen=True, slots=True)
class JobRun:
    """What the team did with the board: its tasks and event log, and how long it took."""

    tasks: tuple[Task, ...]
    events: tuple[TaskEvent, ...]
    refused: str | None

    def story(self) -> str:
        """Who worked on what, when (seconds from the start), and when the board was done."""
        if self.refused is not None:
            return f"the store refused the graph ({self.refused}): the team has nothing to run"
        subjects = {task.id: task.subject for task in self.tasks}
        start = self.events[0].at_utc
        work: dict[str, list[str]] = {name: [] for name in TEAM}
        for event in self.events:
            if event.kind is EventKind.CLAIMED and event.owner is not None:
                second = (event.at_utc - start).total_seconds()
                work[event.owner].append(f"{subjects[event.task_id]} at {second:g} s")
        done = (self.events[-1].at_utc - start).total_seconds()
        lines = [f"  {name:<6} {', '.join(items) or 'nothing'}" for name, items in work.items()]
        return (
            f"{len(TEAM)} teammates, each task {TASK_SECONDS:g} simulated seconds; who claimed"
            f" what, when:\n" + "\n".join(lines) + f"\nthe board was done after {done:g} s"
        )

    def timeline(self) -> LeaseTimeline:
        """One lane per teammate, one bar per task it worked on."""
        return lease_timeline(self.events, self.tasks)

    def graph(self) -> BoardGraph:
        """The task graph itself, as the board holds it at the end."""
        return board_digraph(list(self.tasks), title="your task graph, done")


def run_the_job(task_graph: Callable[[CreateTask], object]) -> JobRun:
    """Make the board with `task_graph`, then let alice, bob and carol steal the work."""
    simulation = SimulatedTime()
    lead = _LeadAtTheEnd()
    with tempfile.TemporaryDirectory(prefix="agent17-job-") as folder:
        team = build_team(_settings(Path(folder), simulation, lead))
        lead.team = team
        try:
            for name in TEAM:
                team.teammates.spawn(name)
            try:
                task_graph(team.store.create_task)
            except TaskError as error:
                return JobRun((), (), f"{error.code}: {error.message}")
            team.teammates.start()
            team.teammates.wait_for_workers(timeout=_WORKERS_TIMEOUT)
            return JobRun(tuple(team.store.list_tasks()), tuple(team.store.events()), None)
        finally:
            team.close()


def _settings(workspace: Path, simulation: SimulatedTime, lead: _LeadAtTheEnd) -> TeamSettings:
    def teammate_model(name: str) -> Any:
        def work(task: Mapping[str, Any]) -> None:
            simulation.sleep(TASK_SECONDS)

        return teammate_script(work=work)

    return TeamSettings(
        workspace=workspace,
        lead_model=lead_script((), ()),
        teammate_model=teammate_model,
        clock=simulation.clock,
        **counted_ids(),
        lease_seconds=_LEASE_SECONDS,
        max_idle_polls=1000,  # the Lead ends the run, not an idle timeout
        simulation=simulation,
        on_outcome=lead,
        persistent_audit=False,
    )


class _LeadAtTheEnd:
    """The Lead's last part: once every task is completed, ask each teammate to shut down."""

    def __init__(self) -> None:
        self.team: Team | None = None
        self.asked = False

    def __call__(self, outcome: TickOutcome) -> None:
        if self.team is None or self.asked:
            return
        if all(task.status is TaskStatus.COMPLETED for task in self.team.store.list_tasks()):
            self.asked = True
            for name in TEAM:
                self.team.protocol.request_shutdown(name)
