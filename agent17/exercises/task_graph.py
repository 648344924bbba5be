"""The capstone: the Lead's part. Put a described job on the board as a task graph.

The student writes `task_graph(create_task)`, which calls the board's own `create_task` once
per task of the job (below), each with the ids of what it needs in `blocked_by`. The check
runs it on a real store in the sandbox and sends back the board as plain data (or the
store's own refusal). The verdict, in the caller's process: the graph is valid (the store
took it), it holds each of the job's tasks once, and on every ordered pair of tasks (a
complete space of 42) it orders them exactly as the job does: a missing order lets a task
start before its input is done, an extra one keeps apart work that could run at once. The
first pair where the board and the job disagree is shown, with the rounds the graph takes
with three teammates (each round, each idle teammate claims one ready task, the first
created first) against the rounds the job allows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from agent17.deterministic import uuid_sequence
from agent17.domain import Task, TaskError
from agent17.exercises._bounded import Checker, CheckResult, Plain
from agent17.store.sqlite import SqliteTaskStore

CreateTask = Callable[..., Task]


@dataclass(frozen=True, slots=True)
class JobTask:
    """One task of the job: its subject, what it is, and the subjects it needs first."""

    subject: str
    description: str
    needs: tuple[str, ...]


JOB: Final = (
    JobTask("schema", "Write the new database tables.", ()),
    JobTask("mockups", "Draw the new settings page.", ()),
    JobTask("fixtures", "Write the test data.", ()),
    JobTask("api", "Serve the settings from the new tables.", ("schema",)),
    JobTask("page", "Build the settings page from the mockups.", ("mockups",)),
    JobTask("tests", "Test the new tables with the test data.", ("schema", "fixtures")),
    JobTask("release", "Tag and publish version 2.", ("api", "page", "tests")),
)
"""Version 2 of a small web app: seven tasks, and what each needs."""

TEAMMATES: Final = 3


def task_graph_starter(create_task: CreateTask) -> None:
    """The Lead's part: each task of the job on the board, blocked by the ids it needs."""
    before: list[str] = []
    for subject in ("schema", "mockups", "fixtures", "api", "page", "tests", "release"):
        task = create_task(subject, f"The job's {subject}.", blocked_by=before)
        before = [task.id]  # one after the other: safe, surely?


def task_graph_solution(create_task: CreateTask) -> None:
    """The Lead's part: each task of the job on the board, blocked by the ids it needs."""
    # A task can only wait for tasks that exist: create what is needed first, keep its id.
    schema = create_task("schema", "Write the new database tables.")
    mockups = create_task("mockups", "Draw the new settings page.")
    fixtures = create_task("fixtures", "Write the test data.")
    api = create_task("api", "Serve the settings from the new tables.", blocked_by=[schema.id])
    page = create_task("page", "Build the settings page from the mockups.", blocked_by=[mockups.id])
    tests = create_task(
        "tests", "Test the new tables with the test data.", blocked_by=[schema.id, fixtures.id]
    )
    create_task("release", "Tag and publish version 2.", blocked_by=[api.id, page.id, tests.id])


TASK_GRAPH_HINT = (
    "blocked_by is a list of task ids, and an id exists only once its task is on the board:"
    " create_task returns the new Task, so keep what it returns. Give each task exactly what"
    " the job says it needs, no more: every extra wait is work the team cannot do at once."
    " Which tasks need nothing at all?"
)


# -- the board the candidate made, as plain data (in the sandbox) --------------------------


def board_of(candidate: Callable[[CreateTask], object]) -> Plain:
    """Run the candidate on a real store in the current folder; the board it left, as data."""
    store = SqliteTaskStore(Path(os.getcwd()) / "board", new_task_id=uuid_sequence(17))
    try:
        refused: Plain = None
        try:
            candidate(store.create_task)
        except TaskError as error:
            refused = {"code": error.code, "message": error.message}
        tasks = store.list_tasks()
    finally:
        store.close()
    number = {task.id: index for index, task in enumerate(tasks)}
    drafts: list[Plain] = [
        {"subject": task.subject, "blocked_by": [number[dep] for dep in task.blocked_by]}
        for task in tasks
    ]
    return {"tasks": drafts, "refused": refused}


# -- the verdict (in the caller's process) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Graph:
    """A board's tasks in creation order: subjects, and each one's dependencies by position."""

    subjects: tuple[str, ...]
    blocked_by: tuple[tuple[int, ...], ...]

    @classmethod
    def of_job(cls) -> Graph:
        """The job's own graph."""
        position = {task.subject: index for index, task in enumerate(JOB)}
        return cls(
            tuple(task.subject for task in JOB),
            tuple(tuple(position[need] for need in task.needs) for task in JOB),
        )

    def before(self) -> list[set[str]]:
        """For each task, the subjects that must be completed before it can start."""
        found: list[set[str]] = []
        for deps in self.blocked_by:  # dependencies always come earlier in creation order
            found.append(set().union(*({self.subjects[d]} | found[d] for d in deps)))
        return found

    def rounds(self, teammates: int = TEAMMATES) -> list[list[str]]:
        """Each round, each idle teammate claims one ready task, the first created first."""
        done: set[int] = set()
        left = list(range(len(self.subjects)))
        found: list[list[str]] = []
        while left:
            ready = [i for i in left if all(d in done for d in self.blocked_by[i])][:teammates]
            found.append([self.subjects[i] for i in ready])
            done.update(ready)
            left = [i for i in left if i not in done]
        return found


def _graph(data: Plain) -> tuple[Graph, dict[str, Any] | None]:
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(tasks, list):
        raise ValueError("not a board")
    subjects: list[str] = []
    blocked_by: list[tuple[int, ...]] = []
    for index, task in enumerate(tasks):
        subject = task.get("subject") if isinstance(task, dict) else None
        deps = task.get("blocked_by") if isinstance(task, dict) else None
        if not isinstance(subject, str) or not isinstance(deps, list):
            raise ValueError("not a task")
        numbers = [d for d in deps if type(d) is int and 0 <= d < index]
        if len(numbers) != len(deps):
            raise ValueError("not dependencies")
        subjects.append(subject)
        blocked_by.append(tuple(numbers))
    refused = data.get("refused")
    if refused is not None and not isinstance(refused, dict):
        raise ValueError("not a refusal")
    return Graph(tuple(subjects), tuple(blocked_by)), refused


def _rounds_text(graph: Graph) -> str:
    rounds = graph.rounds()
    lines = [f"  round {n}: {', '.join(subjects)}" for n, subjects in enumerate(rounds, 1)]
    best = len(Graph.of_job().rounds())
    return (
        f"With {TEAMMATES} teammates (each round, each idle teammate claims one ready task),"
        f" your board takes {len(rounds)} rounds; the job can be done in {best}:\n"
        + "\n".join(lines)
    )


def _refusal(refused: dict[str, Any]) -> str:
    code, message = refused.get("code"), refused.get("message")
    advice = "Nothing was created from that call on."
    if "UUID" in str(message) or "canonical" in str(message):
        advice = (
            "blocked_by takes the ids that create_task returned (task.id), not subjects and"
            " not the tasks themselves. " + advice
        )
    return f"the store refused your graph: {code}: {message}\n{advice}"


def _subjects_wrong(graph: Graph) -> str | None:
    job = [task.subject for task in JOB]
    for subject in graph.subjects:
        if subject not in job:
            return f"{subject!r} is not a task of the job; its tasks are: {', '.join(job)}."
    for subject in job:
        count = graph.subjects.count(subject)
        if count == 0:
            return f"the job's task {subject!r} is not on your board."
        if count > 1:
            return f"{subject!r} is on your board {count} times: the job has it once."
    return None


def _needs(subject: str) -> tuple[str, ...]:
    return next(task.needs for task in JOB if task.subject == subject)


def _needs_text(subject: str) -> str:
    needs = _needs(subject)
    return f"{subject} needs {', '.join(needs)}" if needs else f"{subject} needs nothing"


def _why(later: str, first: str) -> str:
    """Why the job has `first` before `later`: the chain of needs from one to the other."""
    chain = [later]
    while first not in _needs(chain[-1]):
        chain.append(next(n for n in _needs(chain[-1]) if first in _before_in_job(n)))
    chain.append(first)
    return ", and ".join(f"{a} needs {b}" for a, b in pairwise(chain))


def _before_in_job(subject: str) -> set[str]:
    job = Graph.of_job()
    return job.before()[job.subjects.index(subject)]


def _first_difference(graph: Graph) -> str | None:
    """The first ordered pair (in the job's order) that the board orders otherwise."""
    job = Graph.of_job()
    job_before = dict(zip(job.subjects, job.before(), strict=True))
    yours = dict(zip(graph.subjects, graph.before(), strict=True))
    pairs = [(later, first) for later in job.subjects for first in job.subjects if first != later]
    for later, first in pairs:
        if first in job_before[later] and first not in yours[later]:
            return f"{later} can start before {first} is done, but {_why(later, first)}."
    for later, first in pairs:
        if first in yours[later] and first not in job_before[later]:
            return (
                f"{later} waits for {first}, which it does not need (the job:"
                f" {_needs_text(later)}): the team could work on them at once."
            )
    return None


def judge_board(data: Plain) -> CheckResult:
    """The verdict on the board the candidate made."""
    graph, refused = _graph(data)
    if refused is not None:
        return CheckResult(False, _refusal(refused))
    wrong = _subjects_wrong(graph)
    if wrong is not None:
        return CheckResult(False, wrong)
    pairs = len(JOB) * (len(JOB) - 1)
    differs = _first_difference(graph)
    if differs is not None:
        return CheckResult(
            False,
            f"the first of all {pairs} ordered pairs of tasks where your board and the job"
            f" disagree: {differs}\n\n{_rounds_text(graph)}",
        )
    edges = sum(map(len, graph.blocked_by))
    return CheckResult(
        True,
        f"your board orders all {pairs} pairs of tasks as the job does ({edges} edges), and the"
        f" store took it.\n\n{_rounds_text(graph)}",
    )


TASK_GRAPH_CHECK: Final = Checker(board_of, judge_board)
"""The board made on a real store, judged against the job on every ordered pair of tasks."""
