"""The exercises: every solution passes, every starter fails, and every classic wrong answer
in the package's catalogue fails with its own feedback, each with the same verdict run after
run; hints do not give the answer away, and a solution is shown only after a passed check.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

import pytest
import wrong_graphs
import wrong_paths
import wrong_pure
from wrong_answers import RIGHT_ANSWERS, WRONG_ANSWERS, WrongAnswer

import agent17.exercises as exercises
from agent17 import Task
from agent17.exercises import EXERCISES, check, show_solution
from agent17.exercises._bounded import run_check


def test_there_are_at_least_eight_exercises_in_course_order() -> None:
    assert len(EXERCISES) >= 8
    assert {"lease_is_live", "ready_in_order", "claim_one"} <= set(EXERCISES)
    notebooks = [exercise.notebook for exercise in EXERCISES.values()]
    assert notebooks == sorted(notebooks)
    for name, exercise in EXERCISES.items():
        assert exercise.name == name and exercise.title and len(exercise.hint) > 40


@pytest.mark.processes
@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_solution_passes_and_the_starter_fails_the_same_way_five_times(name: str) -> None:
    exercise = EXERCISES[name]
    passes = {check(name, exercise.solution) for _ in range(5)}
    assert len(passes) == 1 and passes.pop().passed
    failures = {check(name, exercise.starter) for _ in range(5)}
    assert len(failures) == 1, failures
    failed = failures.pop()
    assert not failed.passed
    assert len(failed.feedback) > 30


def fails_with(name: str, candidate: Callable[..., Any], *fragments: str) -> str:
    result = check(name, candidate)
    assert not result.passed, f"{name}: {candidate.__name__} passed"
    for fragment in fragments:
        assert fragment in result.feedback, (fragment, result.feedback)
    return result.feedback


# -- a candidate that raises, hangs, or is not a function ------------------------------------


def test_a_candidate_that_raises_is_a_failed_check_naming_the_error() -> None:
    def broken(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        raise ZeroDivisionError("oops")

    fails_with("lease_is_live", broken, "ZeroDivisionError", "oops", "broken")


def test_a_candidate_that_never_returns_fails_after_a_bounded_time() -> None:
    def spins(tasks: list[Task]) -> list[str]:
        while True:
            pass

    started = time.monotonic()
    result = run_check(EXERCISES["ready_in_order"].checker, spins, timeout=2.0)
    assert not result.passed and "did not finish within 2 seconds" in result.feedback
    assert time.monotonic() - started < 10


def test_an_unknown_exercise_or_a_non_function_is_a_failed_check() -> None:
    assert "there is no exercise" in check("no_such", lambda: None).feedback
    assert "pass your function" in check("claim_one", "SELECT 1").feedback


def test_what_a_failing_candidate_printed_is_shown() -> None:
    def chatty(tasks: list[Task]) -> list[str]:
        print("I think A and C")
        return []

    fails_with("ready_in_order", chatty, "your code printed: I think A and C")


# -- the catalogue of classic wrong answers ---------------------------------------------------

CATALOGUE = [
    pytest.param(name, wrong, id=f"{name}: {wrong.label}")
    for name, wrongs in WRONG_ANSWERS.items()
    for wrong in wrongs
]


def test_every_exercise_has_classic_wrong_answers_with_their_own_feedback() -> None:
    assert set(WRONG_ANSWERS) == set(EXERCISES)
    for name, wrongs in WRONG_ANSWERS.items():
        assert len(wrongs) >= 3, name
        assert len({wrong.label for wrong in wrongs}) == len(wrongs), name
    assert sum(map(len, WRONG_ANSWERS.values())) >= 60


def test_the_catalogue_holds_the_wrong_answers_that_once_passed() -> None:
    # Found by a teacher doing every exercise wrong (issue 25): each passed a list of cases.
    once_passed = {
        "ready_in_order": "the last dependency decides",
        "next_pass": "the board before the plan gate",
        "wait_or_wake": "sleeps in slices of 0.8 s",
    }
    for name, label in once_passed.items():
        assert label in {wrong.label for wrong in WRONG_ANSWERS[name]}, (name, label)


@pytest.mark.parametrize(
    ("module", "at_least"),
    [(wrong_pure, 40), (wrong_paths, 7), (wrong_graphs, 8)],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_each_wrong_answer_to_a_searched_exercise_says_its_mistake_in_one_line(
    module: ModuleType, at_least: int
) -> None:
    lines = inspect.getsource(module).splitlines()
    functions = [n for n, line in enumerate(lines) if re.match(r"def [a-z]", line)]
    assert len(functions) >= at_least
    for number in functions:
        assert lines[number - 1].startswith("# "), lines[number]
        assert not lines[number - 2].startswith("#"), lines[number]  # one line, not two


# Quick checks: each of their wrong answers is checked five times, and must read the same.
REPEATED = {"ready_in_order", "claim_query", "lease_is_live", "next_pass", "wait_or_wake"}


@pytest.mark.processes
@pytest.mark.parametrize(("name", "wrong"), CATALOGUE)
def test_each_classic_wrong_answer_fails_with_its_feedback(name: str, wrong: WrongAnswer) -> None:
    feedbacks = {fails_with(name, wrong.candidate, wrong.fragment)}
    for _ in range(4 if name in REPEATED else 0):
        feedbacks.add(fails_with(name, wrong.candidate, wrong.fragment))
    assert len(feedbacks) == 1, feedbacks


@pytest.mark.parametrize(
    ("name", "candidate"),
    [(name, right) for name, rights in RIGHT_ANSWERS.items() for right in rights],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_other_right_answers_pass(name: str, candidate: Callable[..., Any]) -> None:
    result = check(name, candidate)
    assert result.passed, result.feedback


def test_a_rowcount_returned_as_an_int_is_told_to_return_a_bool() -> None:
    feedback = fails_with(
        "take_if_pending",
        WRONG_ANSWERS["take_if_pending"][3].candidate,
        "returned 1, an int",
        "1 when your UPDATE changed the row and 0 when it changed none",
        "must return a bool",
    )
    assert "you answered 0" not in feedback


@pytest.mark.processes
def test_a_thread_lock_is_told_that_it_does_not_cross_processes() -> None:
    wrong = next(w for w in WRONG_ANSWERS["claim_one"] if "threading" in w.label)
    feedback = fails_with("claim_one", wrong.candidate, "threading lock", "processes")
    assert feedback.startswith("Your code holds a threading lock")


# -- nothing spoiled -----------------------------------------------------------------------------


def _code_lines(function: Callable[..., Any]) -> list[str]:
    lines = inspect.getsource(function).splitlines()[1:]  # not the def line: the signature
    return [
        line.strip()
        for line in lines
        if len(line.strip()) > 12 and not line.strip().startswith(("#", '"', "'"))
    ]


@pytest.mark.parametrize("name", list(EXERCISES))
def test_no_hint_quotes_its_solution(name: str) -> None:
    exercise = EXERCISES[name]
    for line in _code_lines(exercise.solution):
        assert line not in exercise.hint, (name, line)
    # The key move of each racy exercise is left for the student to find.
    giveaways = {
        "take_if_pending": "status = 'pending'",
        "claim_one": "BEGIN IMMEDIATE",
        "fenced_effect": "verify_claim",
        "append_note": "notes.append",
        "wait_or_wake": "wait(",
    }
    assert giveaways.get(name, "\0") not in exercise.hint


@pytest.mark.parametrize(
    "name",
    [
        "ready_in_order",
        "claim_query",
        "lease_is_live",
        "inside_workspace",
        "next_pass",
        "task_graph",
    ],
)
def test_no_counterexample_shows_the_solutions_code(name: str) -> None:
    code = _code_lines(EXERCISES[name].solution)
    for wrong in WRONG_ANSWERS[name]:
        feedback = check(name, wrong.candidate).feedback
        for line in code:
            assert line not in feedback, (wrong.label, line)


def test_a_solution_is_shown_only_after_its_check_passed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exercises, "_PASSED", set())
    show_solution("lease_is_live")
    before = capsys.readouterr().out
    assert before.startswith("Not yet: show_solution('lease_is_live')")
    assert "claimed_at <= now" not in before
    assert not check("lease_is_live", EXERCISES["lease_is_live"].starter).passed
    show_solution("lease_is_live")
    assert capsys.readouterr().out.startswith("Not yet")
    assert check("lease_is_live", EXERCISES["lease_is_live"].solution).passed
    show_solution("lease_is_live")
    after = capsys.readouterr().out
    assert "def lease_is_live_solution" in after and "claimed_at <= now" in after
    show_solution("claim_one")  # another exercise's pass opens no other solution
    assert capsys.readouterr().out.startswith("Not yet")
    show_solution("no_such")
    assert "There is no exercise 'no_such'" in capsys.readouterr().out


# -- claim_one in a notebook cell ---------------------------------------------------------


def test_a_candidate_defined_like_a_notebook_cell_works() -> None:
    # A notebook cell's function lives in __main__ and uses names from other cells.
    cell = (
        "ORDER = 'ORDER BY id LIMIT 1'\n"
        "def claim_one(connection, owner):\n"
        "    row = connection.execute(\n"
        "        'UPDATE jobs SET status = ? , owner = ? WHERE id = (SELECT id FROM jobs'\n"
        "        ' WHERE status = \\'pending\\' ' + ORDER + ') RETURNING id', ('taken', owner)\n"
        "    ).fetchone()\n"
        "    return None if row is None else row[0]\n"
    )
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(cell, namespace)
    assert check("claim_one", namespace["claim_one"]).passed


def _takes_then_asks_who_holds_it(connection: Any, job_id: int, owner: str) -> bool:
    connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'",
        (owner, job_id),
    )
    row = connection.execute("SELECT owner FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row is not None and row[0] == owner


def _counts_rows_it_never_fetched(connection: Any, job_id: int, owner: str) -> bool:
    cursor = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ? WHERE id = ? AND status = 'pending'"
        " RETURNING id",
        (owner, job_id),
    )
    return bool(cursor.rowcount == 1)


def test_take_if_pending_is_false_for_a_job_the_caller_already_held() -> None:
    # Found in the browser: "is it mine now?" after the UPDATE passed, though a job carol
    # held before the call was not taken by it (notebook 3: same owner, a new claim).
    feedback = fails_with(
        "take_if_pending",
        _takes_then_asks_who_holds_it,
        "for job 5, which carol already held before this call, you answered True",
    )
    assert "rowcount" not in feedback  # a nudge, not the answer


def test_take_if_pending_that_took_the_job_but_answered_false_is_told_what_happened() -> None:
    fails_with(
        "take_if_pending",
        _counts_rows_it_never_fetched,
        "your UPDATE took it (the table says ('taken', 'carol')), yet you answered False",
        "With RETURNING",
    )
