"""The classic wrong answers to `task_graph`, and another right one.

Each function has one line above it saying the mistake it makes; `wrong_answers.WRONG_ANSWERS`
lists them with words their feedback must contain.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise

from agent17.domain import Task
from agent17.exercises.task_graph import JOB, CreateTask

SUBJECTS = tuple(task.subject for task in JOB)


def _job_with(create_task: CreateTask, needs: Mapping[str, tuple[str, ...]]) -> None:
    """The job's tasks in the job's order, each blocked by `needs` (else by what it needs)."""
    made: dict[str, str] = {}
    for task in JOB:
        ids = [made[need] for need in needs.get(task.subject, task.needs)]
        made[task.subject] = create_task(task.subject, task.description, blocked_by=ids).id


# Puts every task after the one before it: nothing ever runs at once.
def one_after_the_other(create_task: CreateTask) -> None:
    _job_with(create_task, {later: (first,) for first, later in pairwise(SUBJECTS)})


# Gives no task a dependency: everything may start at once.
def no_dependencies(create_task: CreateTask) -> None:
    _job_with(create_task, dict.fromkeys(SUBJECTS, ()))


# Names the tasks it needs by subject, not by id.
def subjects_as_ids(create_task: CreateTask) -> None:
    for task in JOB:
        create_task(task.subject, task.description, blocked_by=list(task.needs))


# Hands over the Task objects themselves, not their ids.
def tasks_as_ids(create_task: CreateTask) -> None:
    made: dict[str, Task] = {}
    for task in JOB:
        made[task.subject] = create_task(
            task.subject, task.description, blocked_by=[made[need] for need in task.needs]
        )


# Lets release wait only for the task created just before it.
def release_waits_for_the_last_only(create_task: CreateTask) -> None:
    _job_with(create_task, {"release": ("tests",)})


# Makes the tests wait for the api too, which the job does not ask.
def tests_wait_for_the_api(create_task: CreateTask) -> None:
    _job_with(create_task, {"tests": ("schema", "fixtures", "api")})


# Leaves out a task that needs nothing, and the tasks that need it wait for nothing.
def forgets_the_fixtures(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for task in JOB:
        if task.subject != "fixtures":
            needs = [made[need] for need in task.needs if need in made]
            made[task.subject] = create_task(task.subject, task.description, blocked_by=needs).id


# Names one task it needs twice in blocked_by.
def one_dependency_twice(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for task in JOB:
        needs = [made[need] for need in task.needs]
        made[task.subject] = create_task(
            task.subject, task.description, blocked_by=needs + needs[:1]
        ).id


# Right: release waits for everything else, which the job's order already implies.
def release_waits_for_all(create_task: CreateTask) -> None:
    _job_with(create_task, {"release": SUBJECTS[:-1]})
