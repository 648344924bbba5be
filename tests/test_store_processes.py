"""Real OS processes on one file: exactly one winner, DAG order respected, kill -9 survived."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
import store_workers
from store_fixtures import raw_connection

from agent17 import EventKind, SqliteTaskStore, TaskEvent, TaskStatus

pytestmark = pytest.mark.processes

WORKERS = 8
RESULT_TIMEOUT_SECONDS = 60.0
JOIN_TIMEOUT_SECONDS = 60.0

spawn = multiprocessing.get_context("spawn")


@pytest.fixture
def processes() -> Iterator[list[BaseProcess]]:
    """Started children; any still alive at the end (a failed test) are killed, not leaked."""
    started: list[BaseProcess] = []
    yield started
    for process in started:
        if process.is_alive():
            process.kill()
        process.join(JOIN_TIMEOUT_SECONDS)


def _next_result(queue: Any) -> tuple[str, int, str, Any]:
    result: tuple[str, int, str, Any] = queue.get(timeout=RESULT_TIMEOUT_SECONDS)
    if result[0] == "error":
        pytest.fail(f"worker {result[2]} failed:\n{result[3]}")
    return result


def _join_all(processes: list[BaseProcess]) -> None:
    for process in processes:
        process.join(JOIN_TIMEOUT_SECONDS)
        assert not process.is_alive(), f"{process.name} did not finish"
        assert process.exitcode == 0, f"{process.name} exited with {process.exitcode}"


def _check_integrity(path: Path) -> None:
    with raw_connection(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        history = connection.execute(
            "SELECT count(*), count(DISTINCT token) FROM task_claim_tokens"
        ).fetchone()
    assert history[0] == history[1]


def test_eight_processes_racing_for_one_task_have_exactly_one_winner_each_round(
    tmp_path: Path, processes: list[BaseProcess]
) -> None:
    rounds = 30
    store = SqliteTaskStore(tmp_path)
    barrier = spawn.Barrier(WORKERS + 1)
    results = spawn.Queue()
    for n in range(WORKERS):
        process = spawn.Process(
            target=store_workers.race_for_one_task,
            args=(str(tmp_path), f"worker-{n}", rounds, barrier, results),
            name=f"worker-{n}",
        )
        process.start()
        processes.append(process)

    winners = []
    for round_number in range(rounds):
        task = store.create_task(f"round {round_number}")
        # Everyone, the parent included, lines up; then all claim at once.
        barrier.wait(store_workers.BARRIER_TIMEOUT_SECONDS)
        outcomes = [_next_result(results) for _ in range(WORKERS)]
        assert {outcome[1] for outcome in outcomes} == {round_number}
        won = [(name, claimed) for _, _, name, claimed in outcomes if claimed is not None]
        assert len(won) == 1, f"round {round_number}: {won}"
        assert won[0][1] == task.id
        winners.append(won[0][0])
    _join_all(processes)

    board = store.list_tasks()
    assert all(t.status == TaskStatus.IN_PROGRESS for t in board)
    assert [t.owner for t in board] == winners
    claimed = [e for e in store.events() if e.kind == EventKind.CLAIMED]
    assert len(claimed) == rounds
    _check_integrity(store.path)


def _build_dag(store: SqliteTaskStore, size: int, seed: int) -> dict[str, tuple[str, ...]]:
    rng = random.Random(seed)
    deps: dict[str, tuple[str, ...]] = {}
    ids: list[str] = []
    for n in range(size):
        older = ids[-30:]  # nearby tasks, so the graph is deep rather than wide
        blocked_by = rng.sample(older, k=min(len(older), rng.choice([0, 1, 1, 2, 3])))
        task = store.create_task(f"T{n}", blocked_by=blocked_by)
        ids.append(task.id)
        deps[task.id] = task.blocked_by
    return deps


def _events_by_task(events: list[TaskEvent]) -> dict[str, list[TaskEvent]]:
    grouped: dict[str, list[TaskEvent]] = defaultdict(list)
    for event in events:
        grouped[event.task_id].append(event)
    return grouped


def test_eight_processes_drain_a_dag_in_dependency_order_each_task_once(
    tmp_path: Path, processes: list[BaseProcess]
) -> None:
    store = SqliteTaskStore(tmp_path)
    deps = _build_dag(store, 200, seed=1717)
    assert sum(1 for d in deps.values() if d) > 100  # a real graph, not a flat list
    barrier = spawn.Barrier(WORKERS + 1)
    results = spawn.Queue()
    for n in range(WORKERS):
        process = spawn.Process(
            target=store_workers.drain_board,
            args=(str(tmp_path), f"worker-{n}", barrier, results),
            name=f"worker-{n}",
        )
        process.start()
        processes.append(process)
    barrier.wait(store_workers.BARRIER_TIMEOUT_SECONDS)
    reports = [_next_result(results) for _ in range(WORKERS)]
    _join_all(processes)

    assert sum(report[1] for report in reports) == len(deps)
    events = store.events()
    by_task = _events_by_task(events)
    completed_at: dict[str, int] = {}
    for task_id, task_events in by_task.items():
        kinds = [event.kind for event in task_events]
        assert kinds == [EventKind.CREATED, EventKind.CLAIMED, EventKind.COMPLETED], task_id
        completed_at[task_id] = task_events[2].sequence
        assert task_events[1].claim_token == task_events[2].claim_token
        assert task_events[1].owner == task_events[2].owner
    for task_id, blocked_by in deps.items():
        claimed_at = by_task[task_id][1].sequence
        for dep in blocked_by:
            assert completed_at[dep] < claimed_at, f"{task_id} claimed before {dep} completed"
    assert all(t.status == TaskStatus.COMPLETED for t in store.list_tasks())
    # Which workers got the work is up to SQLite's busy handler (not FIFO: one
    # worker may take nearly everything); correctness must not depend on it.
    _check_integrity(store.path)


def test_workers_killed_at_random_points_leave_a_consistent_board_that_still_drains(
    tmp_path: Path, processes: list[BaseProcess]
) -> None:
    lease_seconds = 0.75  # real time: what is tested is expiry, not ordering
    kills = 30
    store = SqliteTaskStore(tmp_path)
    deps = _build_dag(store, 400, seed=99)
    rng = random.Random(4242)

    def start(slot: int, generation: int) -> BaseProcess:
        process = spawn.Process(
            target=store_workers.work_until_killed,
            args=(str(tmp_path), f"worker-{slot}.{generation}", lease_seconds, generation),
            name=f"worker-{slot}.{generation}",
        )
        process.start()
        processes.append(process)
        return process

    live = [start(slot, 0) for slot in range(WORKERS)]
    killed_holders = killed_anywhere = 0
    deadline = time.monotonic() + RESULT_TIMEOUT_SECONDS
    while killed_holders + killed_anywhere < kills and time.monotonic() < deadline:
        # Fault injection at random instants; no test outcome depends on the timing.
        time.sleep(rng.uniform(0.005, 0.05))
        if store_workers.unfinished_count(store.path) == 0:
            break
        holders, workers_seen = _holders_and_workers(store.path)
        # Kill only processes that are past start-up (they have claimed
        # something). Two of three kills hit a worker holding a claim right
        # now, so its task must come back through lease expiry; the rest land
        # anywhere in the loop, mid-transaction included.
        holding = [slot for slot, p in enumerate(live) if p.name in holders]
        working = [slot for slot, p in enumerate(live) if p.name in workers_seen]
        if holding and rng.random() < 2 / 3:
            slot = rng.choice(holding)
            killed_holders += 1
        elif working:
            slot = rng.choice(working)
            killed_anywhere += 1
        else:
            continue
        victim = live[slot]
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(JOIN_TIMEOUT_SECONDS)
        live[slot] = start(slot, killed_holders + killed_anywhere)
    assert killed_holders >= 5, (killed_holders, killed_anywhere)
    assert killed_holders + killed_anywhere >= kills // 2, (killed_holders, killed_anywhere)

    for process in live:
        process.join(JOIN_TIMEOUT_SECONDS)
        assert not process.is_alive(), f"{process.name} did not finish"
        assert process.exitcode == 0, f"{process.name} exited with {process.exitcode}"

    _check_integrity(store.path)
    board = store.list_tasks()  # also re-checks every edge and unmet count
    assert [t.status for t in board] == [TaskStatus.COMPLETED] * len(deps)
    events = store.events()
    by_task = _events_by_task(events)
    with raw_connection(store.path) as connection:
        history = {t for (t,) in connection.execute("SELECT token FROM task_claim_tokens")}
    claimed_tokens = [e.claim_token for e in events if e.kind == EventKind.CLAIMED]
    # No half claims: every issued token has its claimed event and vice versa.
    assert len(claimed_tokens) == len(set(claimed_tokens))
    assert set(claimed_tokens) == history
    completions = Counter(e.task_id for e in events if e.kind == EventKind.COMPLETED)
    assert set(completions.values()) == {1} and len(completions) == len(deps)
    for task_id, task_events in by_task.items():
        _assert_one_holder_at_a_time(task_id, task_events, deps[task_id], by_task)
    # Some kills really did land between claim and complete.
    assert any(e.kind == EventKind.LEASE_EXPIRED for e in events)


def _holders_and_workers(path: Path) -> tuple[set[str], set[str]]:
    """Who holds a claim now, and who has ever claimed (a worker past start-up)."""
    with raw_connection(path) as connection:
        holders = {
            owner
            for (owner,) in connection.execute(
                "SELECT owner FROM tasks WHERE status = 'in_progress'"
            )
        }
        seen = {owner for (owner,) in connection.execute("SELECT owner FROM task_claim_tokens")}
    return holders, seen


def _assert_one_holder_at_a_time(
    task_id: str,
    events: list[TaskEvent],
    blocked_by: tuple[str, ...],
    by_task: dict[str, list[TaskEvent]],
) -> None:
    """created, then (claimed, lease_expired)*, claimed, completed by that same claim."""
    kinds = [event.kind for event in events]
    assert kinds[0] == EventKind.CREATED and kinds[-1] == EventKind.COMPLETED, task_id
    middle = kinds[1:-1]
    assert middle[-1] == EventKind.CLAIMED, task_id
    expected = [EventKind.CLAIMED, EventKind.LEASE_EXPIRED] * (len(middle) // 2)
    assert middle[:-1] == expected, (task_id, kinds)
    for claimed, after in zip(events[1:-1:2], events[2::2], strict=True):
        assert after.claim_token == claimed.claim_token, task_id
    first_claim = events[1].sequence
    for dep in blocked_by:
        dep_completed = by_task[dep][-1].sequence
        assert dep_completed < first_claim, f"{task_id} claimed before {dep} completed"
