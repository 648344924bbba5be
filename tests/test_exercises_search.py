"""The searched exercises (issue 25, item 1): each space is complete and listed smallest first,
a failure shows the smallest input where the candidate is wrong (found here independently),
and the references are the package's own behaviour.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import datetime
from itertools import combinations, product
from pathlib import Path
from typing import Any

import pytest
from wrong_answers import RIGHT_ANSWERS, WRONG_ANSWERS

from agent17 import Task, TaskStatus
from agent17.exercises import EXERCISES, check
from agent17.exercises.board import READY_SEARCH, ready_boards, work_tables
from agent17.exercises.lease import LEASE_SEARCH, lease_cases
from agent17.exercises.team import NEXT_PASS_SEARCH, pass_cases, real_pass, what_tick_did

PENDING, IN_PROGRESS, COMPLETED = TaskStatus

# -- the spaces ---------------------------------------------------------------------------


def _shape(board: tuple[Task, ...]) -> tuple[tuple[TaskStatus, tuple[int, ...]], ...]:
    number = {task.id: n for n, task in enumerate(board)}
    return tuple((task.status, tuple(number[dep] for dep in task.blocked_by)) for task in board)


def test_every_board_of_up_to_three_tasks_claim_next_can_meet_is_searched() -> None:
    boards = ready_boards()
    shapes = {_shape(board) for board in boards}
    assert len(shapes) == len(boards)
    for size in range(4):
        for statuses in product(TaskStatus, repeat=size):
            earlier = [
                [s for k in range(n + 1) for s in combinations(range(n), k)] for n in range(size)
            ]
            for waits in product(*earlier):
                # A task ever claimed had every task it waits for completed.
                possible = all(
                    status is PENDING or all(statuses[d] is COMPLETED for d in waits[n])
                    for n, status in enumerate(statuses)
                )
                shape = tuple(zip(statuses, waits, strict=True))
                assert (shape in shapes) == possible, shape
    assert max(map(len, boards)) == 4
    sizes = [(len(board), sum(len(task.blocked_by) for task in board)) for board in boards]
    assert sizes == sorted(sizes)


def test_the_other_spaces_are_complete_and_smallest_first() -> None:
    cases = lease_cases()
    assert len(cases) == 3 * 9 * 27
    utc = cases[0].now.utcoffset()
    outside_utc = [
        sum(when.utcoffset() != utc for when in (c.now, c.claimed_at, c.lease_expires_at))
        for c in cases
    ]
    assert outside_utc == sorted(outside_utc)
    assert {c.lease_expires_at.microsecond for c in cases} == {0, 250_000}
    situations = pass_cases()
    assert len(set(situations)) == len(situations) == 45 + 3 * 40 * 3
    sizes = [len(s.mailbox) + (s.latest_plan is not None) + len(s.ready) for s in situations]
    assert sizes == sorted(sizes)
    assert {s.latest_plan for s in situations} == {None, "approved", "pending", "rejected"}
    tables = work_tables()
    assert len(set(tables)) == len(tables) == sum(5**n for n in range(5))
    assert [len(t) for t in tables] == sorted(len(t) for t in tables)


# -- the smallest counterexample ---------------------------------------------------------


def _ready(board: tuple[Task, ...]) -> list[str]:
    done = {task.id for task in board if task.status is COMPLETED}
    return [t.id for t in board if t.status is PENDING and all(d in done for d in t.blocked_by)]


def _answers_right(got: object, expected: object) -> bool:
    if type(expected) is list:
        return type(got) is list and all(type(x) is str for x in got) and got == expected
    return type(got) is type(expected) and got == expected


def _first_wrong(inputs: Any, ask: Callable[[Any], object], truth: Callable[[Any], object]) -> Any:
    for item in inputs:
        try:
            got = ask(item)
        except Exception:
            return item
        if not _answers_right(got, truth(item)):
            return item
    raise AssertionError("no wrong answer")


SEARCHED: dict[str, tuple[Any, Callable[[Any, Any], object], Callable[[Any], object]]] = {
    "ready_in_order": (READY_SEARCH, lambda f, board: f(list(board)), _ready),
    "lease_is_live": (
        LEASE_SEARCH,
        lambda f, c: f(c.now, c.claimed_at, c.lease_expires_at),
        lambda c: c.claimed_at <= c.now < c.lease_expires_at,
    ),
    "next_pass": (
        NEXT_PASS_SEARCH,
        lambda f, c: f(list(c.mailbox), c.latest_plan, list(c.ready)),
        lambda c: (
            ("message_handled" if c.mailbox[0] == "text" else "protocol_handled")
            if c.mailbox
            else "plan_blocked"
            if c.latest_plan in ("pending", "rejected")
            else f"claimed {c.ready[0]}"
            if c.ready
            else "idle"
        ),
    ),
}


@pytest.mark.parametrize(
    ("name", "candidate"),
    [
        pytest.param(name, wrong.candidate, id=f"{name}: {wrong.label}")
        for name in SEARCHED
        for wrong in WRONG_ANSWERS[name]
        if wrong.label != "patches the checker"  # it would patch this process
    ],
)
def test_a_failure_draws_the_smallest_input_where_the_answer_is_wrong(
    name: str, candidate: Callable[..., Any]
) -> None:
    search, ask, truth = SEARCHED[name]
    smallest = _first_wrong(search.space(), lambda item: ask(candidate, item), truth)
    feedback = check(name, candidate).feedback
    assert f"\n\n{search.draw(smallest)}\n\n" in feedback


def test_the_next_pass_reference_is_what_alices_real_tick_does() -> None:
    # Every situation a real team can be put in: a plan response is the first message, and
    # only one. (A third message cannot change one pass: up to two are built here.)
    buildable = [
        case
        for case in pass_cases()
        if len(case.mailbox) <= 2
        and case.mailbox.count("plan_response") <= 1
        and case.mailbox[1:].count("plan_response") == 0
    ]
    assert len(buildable) > 80
    solution = EXERCISES["next_pass"].solution
    with tempfile.TemporaryDirectory() as folder:
        for number, case in enumerate(buildable):
            did = what_tick_did(real_pass(case, Path(folder) / str(number)))
            assert solution(list(case.mailbox), case.latest_plan, list(case.ready)) == did, case


def test_other_right_answers_of_every_kind_pass_the_searched_exercises() -> None:
    for name in SEARCHED:
        for right in RIGHT_ANSWERS[name]:
            assert check(name, right).passed, (name, right.__name__)


def test_next_pass_feedback_lists_the_situation() -> None:
    result = check("next_pass", EXERCISES["next_pass"].starter)
    assert result.feedback == (
        "the smallest situation where your answer is not right, of all 405 situations: every"
        " mailbox of up to three messages, every plan state, 0-2 ready tasks:\n"
        "\n"
        "  mailbox, oldest first:  empty\n"
        "  latest plan:            pending\n"
        "  ready tasks:            none\n"
        "\n"
        "you said 'idle'; alice's pass does 'plan_blocked'. A pending or rejected latest plan"
        " stops the pass before claim_next, whether or not a task is ready."
    )


def test_lease_feedback_lists_the_three_datetimes_with_their_zones() -> None:
    def compares_text(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        return claimed_at.isoformat() <= now.isoformat() < lease_expires_at.isoformat()

    feedback = check("lease_is_live", compares_text).feedback
    assert (
        "\n\n"
        "  now               2026-01-01T09:02:30+00:00  (UTC), in the middle of the lease\n"
        "  claimed_at        2026-01-01T09:00:00+00:00  (UTC)\n"
        "  lease_expires_at  2026-01-01T04:05:00-05:00  (New York time, UTC-5)\n"
        "\n"
        "the lease is live here, and you said False."
    ) in feedback
