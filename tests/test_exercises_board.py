"""The board exercises (notebooks 2 and 3): feedback that is the same on every run, because
the notebooks commit the starter's failed check and nbval compares it, and answers of the
wrong kind, each told what it gets wrong.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from agent17 import Task, TaskStatus
from agent17.exercises import EXERCISES, check


def test_ready_in_order_feedback_draws_the_smallest_board_and_names_its_tasks() -> None:
    result = check("ready_in_order", EXERCISES["ready_in_order"].starter)
    assert result.feedback == (
        "the smallest board where your answer is not right, of all 1,570 boards of up to four"
        " tasks that claim_next can meet (every status and dependency pattern; ids sort against"
        " creation order):\n"
        "\n"
        "  task  status   blocked_by  id\n"
        "  A     pending  -           00000099-0000-4000-8000-000000000000\n"
        "  B     pending  A           00000098-0000-4000-8000-000000000000\n"
        "  (rows in creation order)\n"
        "\n"
        "you said [A, B]; claim_next would take [A]: B is not ready: pending is not enough,"
        " every task in blocked_by must be completed"
    )


def test_ready_in_order_right_on_small_boards_only_is_shown_its_first_four_task_board() -> None:
    def every_pending_task(tasks: list[Task]) -> list[str]:
        return [t.id for t in tasks if t.status is TaskStatus.PENDING]

    def right_up_to_three_tasks(tasks: list[Task]) -> list[str]:
        if len(tasks) < 4:
            return EXERCISES["ready_in_order"].solution(tasks)  # type: ignore[no-any-return]
        return every_pending_task(tasks)

    feedback = check("ready_in_order", right_up_to_three_tasks).feedback
    assert "  D     pending  A  " in feedback, feedback
    assert "  E  " not in feedback
    assert feedback.endswith(
        "D is not ready: pending is not enough, every task in blocked_by must be completed"
    )


def test_ready_in_order_that_takes_a_task_in_progress_is_told_only_pending_tasks_go() -> None:
    def not_completed(tasks: list[Task]) -> list[str]:
        return [t.id for t in tasks if t.status is not TaskStatus.COMPLETED]

    feedback = check("ready_in_order", not_completed).feedback
    assert "  A     in_progress  -  " in feedback, feedback
    assert feedback.endswith("A is not pending: claim_next hands out only pending tasks")


def test_ready_in_order_refuses_something_that_is_not_a_list_of_ids() -> None:
    def answers_with_subjects(tasks: list[Task]) -> list[str]:
        return [t.subject for t in tasks if t.status is TaskStatus.PENDING and not t.blocked_by]

    def answers_with_a_generator(tasks: list[Task]) -> object:
        return (t.id for t in tasks)

    assert "claim_next would take" in check("ready_in_order", answers_with_subjects).feedback
    assert not check("ready_in_order", answers_with_a_generator).passed


def _ready(tasks: list[Task]) -> list[Task]:
    done = {t.id for t in tasks if t.status is TaskStatus.COMPLETED}
    return [
        t for t in tasks if t.status is TaskStatus.PENDING and all(d in done for d in t.blocked_by)
    ]


def test_ready_in_order_that_returns_the_tasks_is_told_to_return_their_ids() -> None:
    # Found in the browser: the checker sorted the answer, and a list of Tasks made it
    # report "your code raised TypeError: '<' not supported", which the student's code never did.
    def returns_the_tasks(tasks: list[Task]) -> list[Task]:
        return _ready(tasks)

    result = check("ready_in_order", returns_the_tasks)
    assert not result.passed
    assert "raised" not in result.feedback, result.feedback
    assert "you said [the Task A]" in result.feedback, result.feedback
    assert "return each task's id (task.id), not the Task itself" in result.feedback


def test_ready_in_order_that_returns_subjects_or_a_generator_is_told_so() -> None:
    # "you said ['A', 'B']; claim_next would take [A, B]: claim_next would take something
    # else" read as the same answer twice.
    def returns_the_subjects(tasks: list[Task]) -> list[str]:
        return [t.subject for t in _ready(tasks)]

    def returns_a_generator(tasks: list[Task]) -> object:
        return (t.id for t in _ready(tasks))

    def returns_numbers(tasks: list[Task]) -> list[int]:
        return [n for n, t in enumerate(tasks) if t in _ready(tasks)]

    subjects = check("ready_in_order", returns_the_subjects).feedback
    assert "you said ['A']" in subjects, subjects
    assert subjects.endswith("return the tasks' ids (task.id), not their subjects"), subjects
    generator = check("ready_in_order", returns_a_generator).feedback
    assert generator.endswith("return a list of ids, not a generator"), generator
    numbers = check("ready_in_order", returns_numbers).feedback
    assert numbers.endswith("return the tasks' ids (task.id, a str each), not int values"), numbers

    def forgets_to_return(tasks: list[Task]) -> None:
        _ready(tasks)

    nothing = check("ready_in_order", forgets_to_return).feedback
    assert "you said None" in nothing, nothing
    assert "did your function reach its return?" in nothing, nothing


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM work WHERE unmet = 0 AND status = 'pending' ORDER BY id LIMIT 1",
        "select id from work where status = 'pending' and unmet = 0 order by id limit 1",
        "SELECT min(id) FROM work WHERE status = 'pending' AND unmet = 0",
    ],
)
def test_claim_query_accepts_any_query_that_seeks_the_first_ready_task(sql: str) -> None:
    result = check("claim_query", lambda: sql)
    assert result.passed, result.feedback
    assert "work_ready" in result.feedback


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        # A range on unmet: found by the index, but every match is sorted first.
        (
            "SELECT id FROM work WHERE status = 'pending' AND unmet < 1 ORDER BY id LIMIT 1",
            "sorts every matching row",
        ),
        # LIKE is not equality: the whole table is read.
        (
            "SELECT id FROM work WHERE status LIKE 'pending' AND unmet = 0 ORDER BY id LIMIT 1",
            "reads the whole table",
        ),
        (
            "SELECT id FROM work WHERE status = 'pending' AND unmet = 0 ORDER BY id LIMIT 1"
            " OFFSET 1",
            "your query returned []; the first ready task is 1",
        ),
        ("SELECT 15013", "your query returned [(15013,)]; there is no ready task, so no row"),
        # Right on every small table, wrong only on the big board.
        (
            "SELECT id FROM work WHERE status = 'pending' AND unmet = 0 AND id < 10 ORDER BY id"
            " LIMIT 1",
            "on a 20,000-row board the first ready task is 15013 and your query returned []",
        ),
    ],
)
def test_claim_query_wrong_plans_are_named(sql: str, fragment: str) -> None:
    result = check("claim_query", lambda: sql)
    assert not result.passed
    assert fragment in result.feedback, result.feedback


def test_claim_query_that_is_not_text_or_raises_fails_with_the_reason() -> None:
    def raises() -> str:
        raise ValueError("no idea yet")

    assert "return the text of one SELECT" in check("claim_query", lambda: 42).feedback
    assert "ValueError: no idea yet" in check("claim_query", raises).feedback


def test_lease_is_live_that_drops_the_offsets_is_caught() -> None:
    def naive_clock(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        strip = {"tzinfo": None}
        return (
            claimed_at.replace(**strip)  # type: ignore[arg-type]
            <= now.replace(**strip)  # type: ignore[arg-type]
            < lease_expires_at.replace(**strip)  # type: ignore[arg-type]
        )

    feedback = check("lease_is_live", naive_clock).feedback
    assert "The same instants written in UTC got the right answer from you" in feedback
    assert "whatever their UTC offsets (New York time, UTC-5)" in feedback


def test_lease_is_live_must_answer_a_bool() -> None:
    def truthy(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
        return 1 if claimed_at <= now < lease_expires_at else 0  # type: ignore[return-value]

    assert "you said 1" in check("lease_is_live", truthy).feedback
