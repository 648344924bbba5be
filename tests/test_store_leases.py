"""Leases: the half-open interval [claimed_at, expires_at), release on read, late workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_fixtures import (
    ONE_MICROSECOND,
    ManualClock,
    at,
    db_path,
    new_store,
    raises_code,
    raw_connection,
    token,
)

from agent17 import EventKind, SqliteTaskStore, TaskStatus

LEASE = 60.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> SqliteTaskStore:
    return new_store(tmp_path, clock=clock, lease_seconds=LEASE)


def _kinds(store: SqliteTaskStore) -> list[str]:
    return [event.kind.value for event in store.events()]


def test_the_lease_ends_lease_seconds_after_the_claim(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    clock.advance(5)
    claim = store.claim_task(a.id, "alice")
    assert claim.lease_expires_at_utc == at(5 + LEASE)
    assert claim.lease_expires_at_utc.utcoffset() is not None


def test_completing_one_microsecond_before_expiry_succeeds(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc - ONE_MICROSECOND)
    done = store.complete_task(a.id, "alice", claim.claim_token)
    assert done.task.status == TaskStatus.COMPLETED and done.task.owner == "alice"
    assert EventKind.LEASE_EXPIRED not in _kinds(store)


def test_completing_at_the_expiry_instant_is_lease_expired_and_releases_the_task(
    store: SqliteTaskStore, clock: ManualClock, tmp_path: Path
) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)
    raises_code("lease_expired", lambda: store.complete_task(a.id, "alice", claim.claim_token))

    # Read straight from the file: the release was committed by the refused call itself.
    with raw_connection(db_path(tmp_path)) as connection:
        row = connection.execute(
            "SELECT status, owner, claim_token, claimed_at_utc, lease_expires_at_utc FROM tasks"
        ).fetchone()
        kinds = [kind for (kind,) in connection.execute("SELECT kind FROM task_events")]
    assert row == ("pending", None, None, None, None)
    assert kinds == ["created", "claimed", "lease_expired"]
    expired = store.events()[-1]
    assert (expired.owner, expired.claim_token, expired.at_utc) == (
        "alice",
        claim.claim_token,
        claim.lease_expires_at_utc,
    )


@pytest.mark.parametrize("reader", ["get_task", "list_tasks", "claim_task", "claim_next"])
def test_every_operation_releases_expired_leases_first(
    store: SqliteTaskStore, clock: ManualClock, reader: str
) -> None:
    a = store.create_task("A")
    b = store.create_task("B")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)

    if reader == "get_task":
        assert store.get_task(a.id).status == TaskStatus.PENDING
    elif reader == "list_tasks":
        assert store.list_tasks()[0].status == TaskStatus.PENDING
    elif reader == "claim_task":
        store.claim_task(b.id, "bob")  # a different task: the release is a side effect
    else:
        again = store.claim_next("bob")  # the released A is the oldest ready task again
        assert again is not None and again.task.id == a.id
    assert _kinds(store)[:4] == ["created", "created", "claimed", "lease_expired"]
    assert _kinds(store).count("lease_expired") == 1


def test_a_lease_not_yet_expired_is_not_released(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc - ONE_MICROSECOND)
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    assert store.claim_next("bob") is None
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))


def test_a_late_worker_is_refused_and_the_new_owner_keeps_the_task(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    late = store.claim_task(a.id, "alice")
    clock.set(late.lease_expires_at_utc)
    fresh = store.claim_next("bob")
    assert fresh is not None and fresh.task.id == a.id and fresh.claim_token != late.claim_token

    error = raises_code(
        "lease_expired", lambda: store.complete_task(a.id, "alice", late.claim_token)
    )
    assert "bob" in str(error)
    # Every other way the late worker might try is refused too.
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", fresh.claim_token))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "bob", late.claim_token))
    held = store.get_task(a.id)
    assert (held.status, held.owner) == (TaskStatus.IN_PROGRESS, "bob")

    done = store.complete_task(a.id, "bob", fresh.claim_token)
    assert done.task.owner == "bob"
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", late.claim_token))


def test_the_same_owner_reclaiming_gets_a_new_token_and_the_old_one_is_refused(
    store: SqliteTaskStore, clock: ManualClock
) -> None:
    a = store.create_task("A")
    first = store.claim_task(a.id, "alice")
    clock.set(first.lease_expires_at_utc)
    second = store.claim_task(a.id, "alice")
    assert second.claim_token != first.claim_token
    assert second.lease_expires_at_utc == at(2 * LEASE)

    # The old token is a stale lease even though alice holds the task again.
    raises_code("lease_expired", lambda: store.complete_task(a.id, "alice", first.claim_token))
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    store.complete_task(a.id, "alice", second.claim_token)


def test_claim_tokens_are_never_reissued_across_many_expiries(
    store: SqliteTaskStore, clock: ManualClock, tmp_path: Path
) -> None:
    a = store.create_task("A")
    tokens = []
    for _ in range(5):
        claim = store.claim_next("alice")
        assert claim is not None
        tokens.append(claim.claim_token)
        clock.set(claim.lease_expires_at_utc)
    assert tokens == [token(n) for n in range(1, 6)]
    assert store.issued_claim_tokens() == tokens
    with raw_connection(db_path(tmp_path)) as connection:
        history = [t for (t,) in connection.execute("SELECT token FROM task_claim_tokens")]
    assert sorted(history) == sorted(tokens)
    assert _kinds(store).count("lease_expired") == 4  # the fifth lease ends but is not read yet
    store.get_task(a.id)
    assert _kinds(store).count("lease_expired") == 5


def test_a_lease_expiring_between_two_stores_is_released_once(
    clock: ManualClock, tmp_path: Path
) -> None:
    first = new_store(tmp_path, clock=clock, lease_seconds=LEASE)
    second = new_store(tmp_path, clock=clock, lease_seconds=LEASE, new_claim_token=lambda: token(9))
    a = first.create_task("A")
    claim = first.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)
    assert second.get_task(a.id).status == TaskStatus.PENDING
    assert first.get_task(a.id).status == TaskStatus.PENDING
    assert _kinds(first).count("lease_expired") == 1
