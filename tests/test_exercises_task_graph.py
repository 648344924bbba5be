"""task_graph, the capstone: the Lead's create_task calls run on a real store; the board is
judged against the job on every ordered pair of tasks, with the rounds three teammates need;
and alice, bob and carol run the graph on simulated time."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import wrong_graphs

from agent17.exercises import EXERCISES, check
from agent17.exercises._bounded import Checker, run_check
from agent17.exercises.job_run import run_the_job
from agent17.exercises.task_graph import JOB, CreateTask, Graph, board_of, judge_board

Edges = dict[str, tuple[str, ...]]


def _job_edges() -> Edges:
    return {task.subject: task.needs for task in JOB}


def _graph_of(edges: Edges) -> Callable[[CreateTask], None]:
    """An answer that creates the job's tasks, in the job's order, with these needs."""

    def task_graph(create_task: CreateTask) -> None:
        made: dict[str, str] = {}
        for task in JOB:
            needs = [made[need] for need in edges[task.subject]]
            made[task.subject] = create_task(task.subject, task.description, blocked_by=needs).id

    return task_graph


def _verdict(candidate: Callable[[CreateTask], object], folder: Path) -> str:
    """The checker's two halves in this process: the board on a real store in a new `folder`,
    then the verdict."""
    folder.mkdir()
    here = os.getcwd()
    os.chdir(folder)
    try:
        result = judge_board(board_of(candidate))
    finally:
        os.chdir(here)
    return ("PASSED: " if result.passed else "NOT YET: ") + result.feedback


def test_the_job_takes_three_rounds_with_three_teammates_and_a_chain_seven() -> None:
    job = Graph.of_job()
    assert job.rounds() == [
        ["schema", "mockups", "fixtures"],
        ["api", "page", "tests"],
        ["release"],
    ]
    chain = Graph(job.subjects, ((), *((n,) for n in range(len(JOB) - 1))))
    assert len(chain.rounds()) == len(JOB)
    assert len(job.rounds(teammates=2)) == 4


def test_every_missing_edge_is_found(tmp_path: Path) -> None:
    for later, needs in _job_edges().items():
        for first in needs:
            edges = _job_edges() | {later: tuple(n for n in needs if n != first)}
            verdict = _verdict(_graph_of(edges), tmp_path / f"{later}-{first}")
            assert verdict.startswith("NOT YET"), (later, first)
            assert f"{later} can start before " in verdict, verdict


def test_every_extra_edge_the_job_does_not_imply_is_found(tmp_path: Path) -> None:
    job_before = dict(zip(Graph.of_job().subjects, Graph.of_job().before(), strict=True))
    order = [task.subject for task in JOB]
    extra = [
        (later, first)
        for index, later in enumerate(order)
        for first in order[:index]
        if first not in job_before[later]
    ]
    assert len(extra) >= 10
    for number, (later, first) in enumerate(extra):
        edges = _job_edges() | {later: (*_job_edges()[later], first)}
        verdict = _verdict(_graph_of(edges), tmp_path / str(number))
        # The first pair the extra edge orders: `first`, or something `first` waits for.
        said = re.search(rf"{later} waits for (\w+), which it does not need", verdict)
        assert said is not None, verdict
        assert said.group(1) in {first} | job_before[first], verdict


def test_an_edge_the_job_already_implies_is_no_mistake(tmp_path: Path) -> None:
    edges = _job_edges() | {"release": ("api", "page", "tests", "schema")}  # api needs schema
    assert _verdict(_graph_of(edges), tmp_path / "board").startswith("PASSED")


def test_the_store_refuses_an_invalid_graph_with_its_own_code() -> None:
    feedback = check("task_graph", wrong_graphs.subjects_as_ids).feedback
    assert "the store refused your graph: invalid_task_input" in feedback
    assert "ids that create_task returned" in feedback


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (wrong_graphs.one_after_the_other, "7 rounds; the job can be done in 3"),
        (wrong_graphs.no_dependencies, "api can start before schema is done"),
        (wrong_graphs.tests_wait_for_the_api, "4 rounds; the job can be done in 3"),
        (wrong_graphs.forgets_the_fixtures, "'fixtures' is not on your board"),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_classic_mistakes_fail_and_say_what_the_team_loses(
    wrong: Callable[[CreateTask], None], says: str
) -> None:
    result = check("task_graph", wrong)
    assert not result.passed and says in result.feedback


def test_the_reference_and_another_right_answer_pass() -> None:
    for right in (EXERCISES["task_graph"].solution, wrong_graphs.release_waits_for_all):
        result = check("task_graph", right)
        assert result.passed, result.feedback
        assert "your board takes 3 rounds" in result.feedback


def test_an_answer_that_raises_is_told_its_error() -> None:
    def typo(create_task: CreateTask) -> None:
        create_task("schema", "Write the new database tables.")
        create_task("api", "Serve the settings.", blocked_by=[shema.id])  # type: ignore[name-defined]  # noqa: F821

    feedback = check("task_graph", typo).feedback
    assert "NameError" in feedback and "shema" in feedback


def test_a_board_report_of_the_wrong_shape_is_a_failed_check() -> None:
    forged = Checker(
        lambda candidate: {"tasks": [{"subject": "x", "blocked_by": [5]}]}, judge_board
    )
    result = run_check(forged, lambda create_task: None, 10.0)
    assert not result.passed and "could not read" in result.feedback


def test_three_teammates_run_the_jobs_graph_three_tasks_at_a_time() -> None:
    run = run_the_job(EXERCISES["task_graph"].solution)
    assert run.refused is None
    claimed = [e for e in run.events if e.kind.value == "claimed"]
    start = run.events[0].at_utc
    first_round = {e.owner for e in claimed if e.at_utc == start}
    assert first_round == {"alice", "bob", "carol"}
    assert run.story().endswith("the board was done after 90 s")
    assert run.story() == run_the_job(EXERCISES["task_graph"].solution).story()
    assert [bar.owner for bar in run.timeline().bars].count("alice") >= 2


def test_a_chain_keeps_two_teammates_idle() -> None:
    story = run_the_job(EXERCISES["task_graph"].starter).story()
    assert "  bob    nothing" in story and "  carol  nothing" in story
    assert story.endswith("the board was done after 210 s")


def test_a_refused_graph_gives_the_team_nothing_to_run() -> None:
    run = run_the_job(wrong_graphs.subjects_as_ids)
    assert run.refused is not None and run.refused.startswith("invalid_task_input")
    assert "the team has nothing to run" in run.story()
