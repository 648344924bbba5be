"""The classic wrong answers to `task_graph`, and another right one.

Each function has one line above it saying the mistake it makes; `wrong_answers.WRONG_ANSWERS`
lists them with words their feedback must contain.
"""

from __future__ import annotations

from agent17.domain import Task
from agent17.exercises.task_graph import JOB, CreateTask


# Puts every task after the one before it: nothing ever runs at once.
def one_after_the_other(create_task: CreateTask) -> None:
    before: list[str] = []
    for job in JOB:
        before = [create_task(job.subject, job.description, blocked_by=before).id]


# Gives no task a dependency: everything may start at once.
def no_dependencies(create_task: CreateTask) -> None:
    for job in JOB:
        create_task(job.subject, job.description)


# Names the tasks it needs by subject, not by id.
def subjects_as_ids(create_task: CreateTask) -> None:
    for job in JOB:
        create_task(job.subject, job.description, blocked_by=list(job.needs))


# Hands over the Task objects themselves, not their ids.
def tasks_as_ids(create_task: CreateTask) -> None:
    made: dict[str, Task] = {}
    for job in JOB:
        made[job.subject] = create_task(
            job.subject, job.description, blocked_by=[made[need] for need in job.needs]
        )


# Lets release wait only for the task created just before it.
def release_waits_for_the_last_only(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for job in JOB:
        needs = job.needs[-1:] if job.subject == "release" else job.needs
        made[job.subject] = create_task(
            job.subject, job.description, blocked_by=[made[need] for need in needs]
        ).id


# Makes the tests wait for the api too, which the job does not ask.
def tests_wait_for_the_api(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for job in JOB:
        needs = (*job.needs, "api") if job.subject == "tests" else job.needs
        made[job.subject] = create_task(
            job.subject, job.description, blocked_by=[made[need] for need in needs]
        ).id


# Leaves out a task that needs nothing, and the tasks that need it wait for nothing.
def forgets_the_fixtures(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for job in JOB:
        if job.subject != "fixtures":
            needs = [made[need] for need in job.needs if need in made]
            made[job.subject] = create_task(job.subject, job.description, blocked_by=needs).id


# Names one task it needs twice in blocked_by.
def one_dependency_twice(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for job in JOB:
        needs = [made[need] for need in job.needs]
        made[job.subject] = create_task(
            job.subject, job.description, blocked_by=needs + needs[:1]
        ).id


# Right: release waits for everything else, which the job's order already implies.
def release_waits_for_all(create_task: CreateTask) -> None:
    made: dict[str, str] = {}
    for job in JOB:
        needs = list(made.values()) if job.subject == "release" else job.needs
        ids = needs if job.subject == "release" else [made[need] for need in needs]
        made[job.subject] = create_task(job.subject, job.description, blocked_by=ids).id
