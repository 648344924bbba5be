"""The chapter's minimal scenario on the store, the event log, the wire shape and claim cost."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from store_fixtures import (
    ManualClock,
    at,
    db_path,
    descending_ids,
    new_store,
    raises_code,
    raw_connection,
    task_id,
    token,
)

from agent17 import (
    EventKind,
    SqliteTaskStore,
    TaskStatus,
    claim_payload,
    task_payload,
)
from agent17.deterministic import uuid_sequence


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> SqliteTaskStore:
    return new_store(tmp_path, clock=clock)


def test_alice_and_bob_claim_a_and_b_and_c_waits_for_both(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    b = store.create_task("B")
    c = store.create_task("C", blocked_by=[a.id, b.id])
    assert c.blocked_by == (a.id, b.id)

    alice = store.claim_next("alice")
    bob = store.claim_next("bob")
    assert alice is not None and bob is not None
    assert {alice.task.id, bob.task.id} == {a.id, b.id}
    assert alice.task.id != bob.task.id
    # Nothing else is ready while A and B are held.
    assert store.claim_next("carol") is None
    raises_code("task_blocked", lambda: store.claim_task(c.id, "carol"))

    first = store.complete_task(alice.task.id, "alice", alice.claim_token)
    assert first.unblocked == ()
    # One of two done: C is still not claimable, by name or by scan.
    raises_code("task_blocked", lambda: store.claim_task(c.id, "alice"))
    assert store.claim_next("alice") is None
    assert store.get_task(c.id).status == TaskStatus.PENDING

    second = store.complete_task(bob.task.id, "bob", bob.claim_token)
    assert second.unblocked == (c.id,)

    winner = store.claim_next("bob")
    assert winner is not None and winner.task.id == c.id and winner.task.owner == "bob"
    assert store.claim_next("alice") is None
    raises_code("task_not_claimable", lambda: store.claim_task(c.id, "alice"))
    assert [(t.subject, t.status, t.owner) for t in store.list_tasks()] == [
        ("A", TaskStatus.COMPLETED, "alice"),
        ("B", TaskStatus.COMPLETED, "bob"),
        ("C", TaskStatus.IN_PROGRESS, "bob"),
    ]


def test_every_transition_is_appended_to_the_event_log_in_order(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    first = store.claim_task(a.id, "alice")
    clock.set(first.lease_expires_at_utc)
    store.list_tasks()  # releases the lease
    clock.advance(1)
    second = store.claim_next("bob")
    assert second is not None
    clock.advance(1)
    store.complete_task(a.id, "bob", second.claim_token)

    events = store.events()
    assert [(e.kind, e.task_id, e.owner, e.claim_token, e.at_utc) for e in events] == [
        (EventKind.CREATED, a.id, None, None, at(0)),
        (EventKind.CLAIMED, a.id, "alice", token(1), at(0)),
        (EventKind.LEASE_EXPIRED, a.id, "alice", token(1), at(300)),
        (EventKind.CLAIMED, a.id, "bob", token(2), at(301)),
        (EventKind.COMPLETED, a.id, "bob", token(2), at(302)),
    ]
    assert [e.sequence for e in events] == sorted(e.sequence for e in events)
    assert store.events(after_sequence=events[2].sequence) == events[3:]


def test_a_refused_operation_appends_no_event(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    b = store.create_task("B", blocked_by=[a.id])
    claim = store.claim_task(a.id, "alice")
    before = store.events()

    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))
    raises_code("task_blocked", lambda: store.claim_task(b.id, "bob"))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "bob", claim.claim_token))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", token(99)))
    raises_code("dependency_not_found", lambda: store.create_task("D", blocked_by=[task_id(9)]))
    raises_code("invalid_task_input", lambda: store.create_task("  "))
    raises_code("task_not_found", lambda: store.get_task(task_id(9)))

    assert store.events() == before
    assert store.issued_claim_tokens() == [claim.claim_token]


def test_list_and_claim_next_follow_creation_order_not_uuid_order(tmp_path: Path) -> None:
    store = new_store(tmp_path, new_task_id=descending_ids(5))
    created = [store.create_task(f"T{n}") for n in range(5)]
    ids = [task.id for task in created]
    assert ids == sorted(ids, reverse=True)  # the adversary: UUID order is backwards

    assert [task.id for task in store.list_tasks()] == ids
    claimed = []
    while (claim := store.claim_next("alice")) is not None:
        claimed.append(claim.task.id)
    assert claimed == ids


def test_task_payload_is_snake_case_with_blocked_by_as_a_list(store: SqliteTaskStore) -> None:
    a = store.create_task("A", "first")
    c = store.create_task("C", blocked_by=[a.id])
    assert task_payload(c) == {
        "id": task_id(2),
        "subject": "C",
        "description": "",
        "status": "pending",
        "owner": None,
        "blocked_by": [task_id(1)],
    }


def test_claim_payload_carries_the_token_and_a_z_timestamp(store: SqliteTaskStore) -> None:
    a = store.create_task("A", "first")
    payload = claim_payload(store.claim_task(a.id, "alice"))
    assert payload == {
        "task": {
            "id": task_id(1),
            "subject": "A",
            "description": "first",
            "status": "in_progress",
            "owner": "alice",
            "blocked_by": [],
        },
        "claim_token": token(1),
        "lease_expires_at_utc": "2026-01-01T09:05:00Z",
    }


def _assert_claim_query_uses_an_index(plan: list[str]) -> None:
    assert plan, "no plan"
    assert not any(line.startswith("SCAN") for line in plan), plan
    assert any("tasks_ready" in line for line in plan), plan


def test_claim_query_is_an_index_seek(store: SqliteTaskStore) -> None:
    _assert_claim_query_uses_an_index(store.explain_claim_next())


def test_claim_query_stays_an_index_seek_after_analyze_on_a_large_mixed_board(
    tmp_path: Path,
) -> None:
    # Build a few thousand tasks of every status, then let ANALYZE gather
    # statistics: the planner must still seek the ready index, not scan.
    store = new_store(tmp_path)
    rng = random.Random(17)
    ids: list[str] = []
    for n in range(600):
        deps = rng.sample(ids, k=min(len(ids), rng.choice([0, 0, 1, 2])))
        ids.append(store.create_task(f"T{n}", blocked_by=deps).id)
    for _ in range(250):
        claim = store.claim_next("alice")
        assert claim is not None
        if rng.random() < 0.7:
            store.complete_task(claim.task.id, "alice", claim.claim_token)
    store.close()
    _bulk_add_blocked_tasks(db_path(tmp_path), 3000)
    with raw_connection(db_path(tmp_path)) as connection:
        connection.execute("ANALYZE")
        statuses = dict(connection.execute("SELECT status, count(*) FROM tasks GROUP BY status"))
    assert set(statuses) == {"pending", "in_progress", "completed"}

    # A fresh token counter would collide with the tokens already issued.
    reopened = new_store(tmp_path, new_claim_token=uuid_sequence(72))
    _assert_claim_query_uses_an_index(reopened.explain_claim_next())
    board = reopened.list_tasks()
    status = {t.id: t.status for t in board}
    ready = [
        t.id
        for t in board
        if t.status == TaskStatus.PENDING
        and all(status[dep] == TaskStatus.COMPLETED for dep in t.blocked_by)
    ]
    claim = reopened.claim_next("bob")
    assert claim is not None and claim.task.id == ready[0]


def _bulk_add_blocked_tasks(path: Path, count: int) -> None:
    """Append `count` pending tasks, each blocked by the first in-progress task, consistently."""
    with raw_connection(path) as connection:
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("BEGIN IMMEDIATE")
        (blocker,) = connection.execute(
            "SELECT sequence FROM tasks WHERE status = 'in_progress' ORDER BY sequence LIMIT 1"
        ).fetchone()
        (last,) = connection.execute("SELECT max(sequence) FROM tasks").fetchone()
        rows = [
            (f"00000000-0000-4000-8000-9999{n:08d}", f"bulk {n}", "", "pending", 1)
            for n in range(count)
        ]
        connection.executemany(
            "INSERT INTO tasks (id, subject, description, status, unmet_dependencies)"
            " VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        connection.executemany(
            "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
            " VALUES (?, ?, 0)",
            [(last + 1 + n, blocker) for n in range(count)],
        )
        connection.execute("COMMIT")
