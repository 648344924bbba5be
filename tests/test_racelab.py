"""The race lab: the naive JSON board double-claims under the chapter's interleaving, SQLite not."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from agent17.deterministic import uuid_sequence
from agent17.racelab import DEFAULT_SCHEDULE, run_json_race, run_process_race, run_sqlite_race
from agent17.racelab.json_board import NaiveJsonTaskBoard
from agent17.racelab.schedule import Step


def _all_schedules() -> list[tuple[Step, ...]]:
    """Every interleaving of alice's and bob's scan-then-claim."""
    slots = ("alice", "alice", "bob", "bob")
    schedules = []
    for order in sorted(set(itertools.permutations(slots))):
        seen: dict[str, int] = {}
        steps: list[Step] = []
        for worker in order:
            steps.append((worker, "scan" if seen.get(worker, 0) == 0 else "claim"))
            seen[worker] = seen.get(worker, 0) + 1
        schedules.append(tuple(steps))
    return schedules


def test_on_the_json_board_alice_and_bob_both_believe_they_own_c() -> None:
    result = run_json_race()
    assert result.double_claim
    assert result.believers == ("alice", "bob")
    assert result.recorded_owner == "bob"  # the last write won, silently
    assert result.claims_committed == 2
    assert "double claim: YES" in str(result)


def test_on_sqlite_exactly_one_claim_of_c_commits() -> None:
    result = run_sqlite_race()
    assert not result.double_claim
    assert result.believers == ("alice",)
    assert result.recorded_owner == "alice"
    assert result.claims_committed == 1
    assert "bob then tries claim_task(C) -> task_not_claimable" in result.notes


def test_on_sqlite_the_second_scan_is_blocked_by_the_first_transaction() -> None:
    result = run_sqlite_race()
    bob_scan = result.steps[1]
    assert (bob_scan.worker, bob_scan.action) == ("bob", "scan")
    assert "'database is locked'" in bob_scan.outcome


@pytest.mark.parametrize("schedule", _all_schedules())
def test_every_interleaving_on_sqlite_gives_c_exactly_one_owner(
    schedule: tuple[Step, ...],
) -> None:
    result = run_sqlite_race(schedule)
    first_scanner = schedule[0][0]
    assert result.believers == (first_scanner,)
    assert result.claims_committed == 1


@pytest.mark.parametrize("schedule", _all_schedules())
def test_the_json_board_is_safe_only_when_one_worker_finishes_before_the_other_scans(
    schedule: tuple[Step, ...],
) -> None:
    sequential = schedule[0][0] == schedule[1][0]
    assert run_json_race(schedule).double_claim is not sequential


@pytest.mark.parametrize(
    "schedule",
    [
        (("alice", "claim"), ("alice", "scan")),
        (("alice", "scan"), ("alice", "scan"), ("alice", "claim")),
        (("alice", "scan"), ("alice", "write")),
    ],
)
def test_a_schedule_that_is_not_scan_then_claim_is_refused(schedule: tuple[Step, ...]) -> None:
    with pytest.raises(ValueError):
        run_json_race(schedule)
    with pytest.raises(ValueError):
        run_sqlite_race(schedule)


def test_the_naive_board_scan_only_offers_pending_unowned_tasks_whose_dependencies_are_done(
    tmp_path: Path,
) -> None:
    board = NaiveJsonTaskBoard(tmp_path, new_task_id=uuid_sequence(17))
    a = board.create_task("A")
    b = board.create_task("B")
    board.create_task("C", blocked_by=(a.id, b.id))
    assert [task.subject for task in board.scan_unclaimed()] == ["A", "B"]
    board.claim(a.id, "alice")
    board.complete(a.id, "alice")
    assert [task.subject for task in board.scan_unclaimed()] == ["B"]
    board.complete(b.id, "bob")
    assert [task.subject for task in board.scan_unclaimed()] == ["C"]


def test_the_default_schedule_is_both_scans_before_either_claim() -> None:
    assert [action for _, action in DEFAULT_SCHEDULE] == ["scan", "scan", "claim", "claim"]


@pytest.mark.processes
def test_real_processes_claim_every_task_exactly_once(tmp_path: Path) -> None:
    seen: list[int] = []
    result = run_process_race(tmp_path, workers=3, tasks=24, progress=seen.append)
    assert result.claimed_once == 24
    assert result.claimed_more_than_once == 0
    assert result.completed == 24
    assert result.clean_exits == 3
    assert seen[-1] == 24
    assert seen == sorted(seen)


def test_the_process_race_refuses_a_board_that_is_not_empty(tmp_path: Path) -> None:
    from agent17 import SqliteTaskStore

    with SqliteTaskStore(tmp_path) as store:
        store.create_task("already here")
    with pytest.raises(ValueError, match="empty board"):
        run_process_race(tmp_path, workers=1, tasks=1)


@pytest.mark.parametrize("attempt", range(8))
def test_three_workers_waiting_on_the_lock_are_followed_whichever_gets_in_first(
    attempt: int,
) -> None:
    # SQLite's busy handler is not a queue: after alice commits, bob or carol may
    # get the write lock first. The lab must follow whoever did (it once waited for
    # the longest waiter and timed out).
    schedule: tuple[Step, ...] = (
        ("alice", "scan"),
        ("bob", "scan"),
        ("carol", "scan"),
        ("alice", "claim"),
        ("bob", "claim"),
        ("carol", "claim"),
    )
    result = run_sqlite_race(schedule)
    assert result.believers == ("alice",)
    assert result.claims_committed == 1
    entered = [step.worker for step in result.steps if "gets the write lock" in step.outcome]
    assert sorted(entered) == ["bob", "carol"]
