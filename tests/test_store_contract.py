"""The store contract: what every task store must do, run unchanged against every backend.

Each test gets a `board` (one shared board of one backend, see
`store_backends.py`) and makes as many store instances on it as it needs.
Only the public store API is used, except `board.force(...)`, which plants
the damage no store would write so that its detection can be tested.
File and path rules of the SQLite store are in `test_store_sqlite_files.py`.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
import store_workers
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)
from store_backends import ONE_MICROSECOND, Board, ManualClock, make_board, task_id, token

from agent17 import (
    EventKind,
    TaskClaim,
    TaskError,
    TaskEvent,
    TaskStatus,
    claim_payload,
    task_payload,
)
from agent17.deterministic import COURSE_START, uuid_sequence

LEASE = 60.0
WORKERS = 8
RESULT_TIMEOUT_SECONDS = 60.0
JOIN_TIMEOUT_SECONDS = 60.0
spawn = multiprocessing.get_context("spawn")


@pytest.fixture(params=store_workers.BACKENDS)
def board(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Board]:
    made = make_board(request.param, tmp_path)
    yield made
    made.close_all()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(board: Board, clock: ManualClock) -> Any:
    return board.store(clock=clock, lease_seconds=LEASE)


def at(seconds: float) -> datetime:
    return COURSE_START + timedelta(seconds=seconds)


def raises_code(code: str, action: Callable[[], object]) -> TaskError:
    with pytest.raises(TaskError) as caught:
        action()
    assert caught.value.code == code, f"expected {code}, got {caught.value.code}: {caught.value}"
    return caught.value


def fixed_ids(*ids: str) -> Callable[[], str]:
    values = iter(ids)
    return lambda: next(values)


def descending_ids(count: int) -> Callable[[], str]:
    """Task ids whose UUID order is the reverse of creation order."""
    digits = "fedcba9876543210"[:count]
    values = iter(f"{d * 8}-{d * 4}-4{d * 3}-8{d * 3}-{d * 12}" for d in digits)
    return lambda: next(values)


def kinds(store: Any) -> list[str]:
    return [event.kind.value for event in store.events()]


def abc(store: Any) -> tuple[str, str, str]:
    a = store.create_task("A")
    b = store.create_task("B")
    c = store.create_task("C", blocked_by=[a.id, b.id])
    return a.id, b.id, c.id


# -- the chapter's scenario ---------------------------------------------------------------


def test_alice_and_bob_claim_a_and_b_and_c_waits_for_both(store: Any) -> None:
    a, b, c = abc(store)
    assert store.get_task(c).blocked_by == (a, b)

    alice = store.claim_next("alice")
    bob = store.claim_next("bob")
    assert alice is not None and bob is not None
    assert {alice.task.id, bob.task.id} == {a, b}
    # Nothing else is ready while A and B are held.
    assert store.claim_next("carol") is None
    raises_code("task_blocked", lambda: store.claim_task(c, "carol"))

    first = store.complete_task(alice.task.id, "alice", alice.claim_token)
    assert first.unblocked == ()
    # One of two done: C is still not claimable, by name or by scan.
    raises_code("task_blocked", lambda: store.claim_task(c, "alice"))
    assert store.claim_next("alice") is None
    assert store.get_task(c).status == TaskStatus.PENDING

    second = store.complete_task(bob.task.id, "bob", bob.claim_token)
    assert second.unblocked == (c,)

    winner = store.claim_next("bob")
    assert winner is not None and winner.task.id == c and winner.task.owner == "bob"
    assert store.claim_next("alice") is None
    raises_code("task_not_claimable", lambda: store.claim_task(c, "alice"))
    assert [(t.subject, t.status, t.owner) for t in store.list_tasks()] == [
        ("A", TaskStatus.COMPLETED, "alice"),
        ("B", TaskStatus.COMPLETED, "bob"),
        ("C", TaskStatus.IN_PROGRESS, "bob"),
    ]


def test_list_and_claim_next_follow_creation_order_not_uuid_order(board: Board) -> None:
    store = board.store(new_task_id=descending_ids(5))
    ids = [store.create_task(f"T{n}").id for n in range(5)]
    assert ids == sorted(ids, reverse=True)  # the adversary: UUID order is backwards
    assert [task.id for task in store.list_tasks()] == ids
    claimed = []
    while (claim := store.claim_next("alice")) is not None:
        claimed.append(claim.task.id)
    assert claimed == ids


def test_claim_next_takes_the_first_ready_task_even_behind_blocked_and_held_ones(
    store: Any,
) -> None:
    a = store.create_task("A")
    b = store.create_task("B", blocked_by=[a.id])
    c = store.create_task("C")
    d = store.create_task("D")
    held = store.claim_next("alice")
    assert held is not None and held.task.id == a.id
    # B waits for A; the first ready task after it is C, then D.
    assert [store.claim_next(name).task.id for name in ("bob", "carol")] == [c.id, d.id]
    assert store.get_task(b.id).status == TaskStatus.PENDING


def test_created_tasks_come_back_exactly_as_given(store: Any) -> None:
    a = store.create_task("A", "first\nline two\ttabbed — ünïcode ✓")
    c = store.create_task("C", blocked_by=[a.id])
    assert store.get_task(a.id) == a
    assert store.get_task(c.id) == c
    assert store.list_tasks() == [a, c]


def test_create_tasks_adds_a_batch_in_one_transaction_all_or_nothing(store: Any) -> None:
    a = store.create_task("A")
    made = store.create_tasks([("B", "", [a.id]), ("C", "both", [a.id, task_id(2)])])
    assert [t.subject for t in made] == ["B", "C"]
    assert made[1].blocked_by == (a.id, made[0].id)  # a draft may name an earlier draft
    before = store.list_tasks()
    raises_code(
        "dependency_not_found",
        lambda: store.create_tasks([("D", "", []), ("E", "", [task_id(999)])]),
    )
    assert store.list_tasks() == before


# -- the wire -------------------------------------------------------------------------------


def test_task_payload_is_snake_case_with_blocked_by_as_a_list(store: Any) -> None:
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


def test_claim_payload_carries_the_token_and_a_z_timestamp(board: Board) -> None:
    store = board.store()  # the default lease: 300 s
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


# -- the event log and the token history ----------------------------------------------------


def test_every_transition_is_appended_to_the_event_log_in_order(
    store: Any, clock: ManualClock
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
        (EventKind.LEASE_EXPIRED, a.id, "alice", token(1), at(LEASE)),
        (EventKind.CLAIMED, a.id, "bob", token(2), at(LEASE + 1)),
        (EventKind.COMPLETED, a.id, "bob", token(2), at(LEASE + 2)),
    ]
    # Dense, in commit order; a claim also records its lease.
    assert [e.sequence for e in events] == list(range(events[0].sequence, events[0].sequence + 5))
    assert [e.lease_expires_at_utc for e in events] == [
        None,
        at(LEASE),
        None,
        at(2 * LEASE + 1),
        None,
    ]
    assert store.events(after_sequence=events[2].sequence) == events[3:]


def test_a_refused_operation_appends_no_event(store: Any) -> None:
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


def test_default_task_ids_and_claim_tokens_are_random_version_4_uuids(board: Board) -> None:
    store = board.raw_store()
    store.create_tasks([(f"T{n}", "", ()) for n in range(200)])
    drawn = []
    while (claim := store.claim_next("alice")) is not None:
        drawn += [claim.task.id, claim.claim_token]
    assert len(drawn) == 400 and len(set(drawn)) == 400
    for text in drawn:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
    # 122 random bits each: across 400 ids, every digit the format does not fix varies,
    # and the variant digit takes each of its four values.
    free = [n for n in range(36) if n not in (8, 13, 14, 18, 19, 23)]
    assert all(len({text[n] for text in drawn}) > 8 for n in free)
    assert {text[19] for text in drawn} == set("89ab")


def test_an_empty_claim_next_uses_up_no_token(store: Any) -> None:
    assert store.claim_next("alice") is None
    assert store.claim_next("bob") is None
    a = store.create_task("A")
    claim = store.claim_next("carol")
    assert claim is not None and claim.task.id == a.id and claim.claim_token == token(1)


def test_claim_tokens_are_never_reissued_across_many_expiries(
    store: Any, clock: ManualClock
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
    assert kinds(store).count("lease_expired") == 4  # the fifth lease ended but is not read yet
    store.get_task(a.id)
    assert kinds(store).count("lease_expired") == 5


def test_a_colliding_claim_token_rolls_the_whole_claim_back(board: Board) -> None:
    store = board.store(new_claim_token=fixed_ids(token(1), token(1), token(2)))
    a = store.create_task("A")
    b = store.create_task("B")
    store.claim_task(a.id, "alice")
    events_before = store.events()

    raises_code("claim_token_collision", lambda: store.claim_task(b.id, "bob"))
    assert store.get_task(b.id).status == TaskStatus.PENDING
    assert store.get_task(b.id).owner is None
    assert store.events() == events_before
    assert store.issued_claim_tokens() == [token(1)]

    # The next claim draws a fresh token and succeeds.
    claim = store.claim_next("bob")
    assert claim is not None and claim.task.id == b.id and claim.claim_token == token(2)


def test_a_token_reused_after_completion_still_collides(board: Board) -> None:
    # Tokens are unique for the board's lifetime, not just among live claims.
    store = board.store(new_claim_token=fixed_ids(token(1), token(1)))
    a = store.create_task("A")
    b = store.create_task("B")
    store.complete_task(a.id, "alice", store.claim_task(a.id, "alice").claim_token)
    raises_code("claim_token_collision", lambda: store.claim_next("bob"))
    assert store.get_task(b.id).status == TaskStatus.PENDING


def test_a_second_store_on_the_same_board_sees_the_same_board(board: Board) -> None:
    first = board.store()
    a = first.create_task("A")
    claim = first.claim_task(a.id, "alice")
    second = board.store(new_claim_token=uuid_sequence(72))
    assert second.get_task(a.id).owner == "alice"
    second.complete_task(a.id, "alice", claim.claim_token)
    assert first.get_task(a.id).status == TaskStatus.COMPLETED


# -- every error code ----------------------------------------------------------------------


def test_an_unknown_id_is_task_not_found_for_every_operation(store: Any) -> None:
    ghost = task_id(42)
    raises_code("task_not_found", lambda: store.get_task(ghost))
    raises_code("task_not_found", lambda: store.claim_task(ghost, "alice"))
    raises_code("task_not_found", lambda: store.complete_task(ghost, "alice", token(1)))


@pytest.mark.parametrize("subject", ["", "   ", "\n\t", "\u3000"])
def test_an_empty_subject_is_invalid_task_input(store: Any, subject: str) -> None:
    raises_code("invalid_task_input", lambda: store.create_task(subject))
    assert store.list_tasks() == []


LETTERED_ID = "abcdef01-2345-4678-89ab-cdef01234567"


@pytest.mark.parametrize(
    "bad_id",
    [
        LETTERED_ID.upper(),
        "abcdef01-2345-4678-89ab-cdef0123456A",
        "{abcdef01-2345-4678-89ab-cdef01234567}",
        "abcdef012345467889abcdef01234567",
        "urn:uuid:abcdef01-2345-4678-89ab-cdef01234567",
        " abcdef01-2345-4678-89ab-cdef01234567",
        "A",
        "",
        17,
        None,
    ],
)
def test_a_non_canonical_id_is_invalid_task_input_everywhere(board: Board, bad_id: Any) -> None:
    store = board.store(new_task_id=fixed_ids(LETTERED_ID))
    store.create_task("A")
    raises_code("invalid_task_input", lambda: store.get_task(bad_id))
    raises_code("invalid_task_input", lambda: store.claim_task(bad_id, "alice"))
    raises_code("invalid_task_input", lambda: store.complete_task(bad_id, "alice", token(1)))
    raises_code("invalid_task_input", lambda: store.complete_task(LETTERED_ID, "alice", bad_id))
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=[bad_id]))
    assert [t.id for t in store.list_tasks()] == [LETTERED_ID]


def test_a_duplicate_dependency_is_invalid_task_input(store: Any) -> None:
    a = store.create_task("A")
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=[a.id, a.id]))
    assert len(store.list_tasks()) == 1


def test_a_self_dependency_is_invalid_task_input(board: Board) -> None:
    # The only way to name yourself is to know your id in advance: inject it.
    me = task_id(5)
    store = board.store(new_task_id=fixed_ids(me))
    raises_code("invalid_task_input", lambda: store.create_task("me", blocked_by=[me]))
    assert store.list_tasks() == []
    assert store.events() == []


@pytest.mark.parametrize("blocked_by", ["a-string", b"bytes", 7, None])
def test_blocked_by_that_is_not_a_list_is_invalid_task_input(store: Any, blocked_by: Any) -> None:
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=blocked_by))
    assert store.list_tasks() == []


def test_a_missing_dependency_is_dependency_not_found(store: Any) -> None:
    a = store.create_task("A")
    error = raises_code(
        "dependency_not_found", lambda: store.create_task("B", blocked_by=[a.id, task_id(77)])
    )
    assert task_id(77) in str(error)
    assert [t.id for t in store.list_tasks()] == [a.id]


def test_a_duplicate_task_id_from_the_generator_is_invalid_task_input(board: Board) -> None:
    store = board.store(new_task_id=fixed_ids(task_id(1), task_id(1)))
    store.create_task("A")
    raises_code("invalid_task_input", lambda: store.create_task("B"))
    assert [t.subject for t in store.list_tasks()] == ["A"]


def test_claiming_a_task_in_progress_or_completed_is_task_not_claimable(store: Any) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "alice"))
    store.complete_task(a.id, "alice", claim.claim_token)
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))
    assert store.get_task(a.id).owner == "alice"


def test_claiming_a_task_with_unfinished_dependencies_is_task_blocked(store: Any) -> None:
    a = store.create_task("A")
    b = store.create_task("B", blocked_by=[a.id])
    error = raises_code("task_blocked", lambda: store.claim_task(b.id, "alice"))
    assert a.id in str(error)
    assert store.get_task(b.id).status == TaskStatus.PENDING


def test_completing_with_the_wrong_owner_is_claim_mismatch(store: Any) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "bob", claim.claim_token))
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    store.complete_task(a.id, "alice", claim.claim_token)  # alice still holds it


def test_completing_with_the_wrong_token_is_claim_mismatch(store: Any) -> None:
    a = store.create_task("A")
    b = store.create_task("B")
    claim_a = store.claim_task(a.id, "alice")
    claim_b = store.claim_task(b.id, "alice")
    # A real token, but of another task.
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", claim_b.claim_token))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", token(50)))
    store.complete_task(a.id, "alice", claim_a.claim_token)


def test_completing_a_pending_task_is_claim_mismatch(store: Any) -> None:
    a = store.create_task("A")
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", token(1)))
    assert store.get_task(a.id).status == TaskStatus.PENDING


def test_completing_twice_is_claim_mismatch(store: Any) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    store.complete_task(a.id, "alice", claim.claim_token)
    error = raises_code(
        "claim_mismatch", lambda: store.complete_task(a.id, "alice", claim.claim_token)
    )
    assert "already completed" in str(error)
    assert kinds(store).count("completed") == 1


def test_every_refusal_is_a_task_error_with_a_string_code(store: Any) -> None:
    error = raises_code("task_not_found", lambda: store.get_task(task_id(3)))
    assert isinstance(error.code, str) and isinstance(error, Exception)


# -- graph_corrupted: damage planted behind the store's back is found, never "blocked" -------


def test_a_dependency_on_a_deleted_task_is_graph_corrupted(board: Board, store: Any) -> None:
    a, _, c = abc(store)
    board.force("delete_task", id=a)
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(c))
    raises_code("graph_corrupted", lambda: store.claim_task(c, "alice"))


def test_a_dependency_row_of_a_deleted_task_is_graph_corrupted(board: Board, store: Any) -> None:
    _, _, c = abc(store)
    board.force("delete_task", id=c)
    raises_code("graph_corrupted", store.list_tasks)


def test_a_self_edge_is_graph_corrupted(board: Board, store: Any) -> None:
    a, _, _ = abc(store)
    board.force("add_edge", task=a, dependency=a)
    board.force("set_unmet", id=a, count=1)
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(a))
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_a_self_edge_with_a_zero_count_is_caught_by_claim_next(board: Board, store: Any) -> None:
    # The count says "ready", the edge says "waits for itself": claim_next must not take it.
    a, _, _ = abc(store)
    board.force("add_edge", task=a, dependency=a)
    raises_code("graph_corrupted", lambda: store.claim_next("alice"))
    assert kinds(store)[-1] == "created"  # nothing was claimed
    assert store.issued_claim_tokens() == []


def test_an_edge_to_a_newer_task_forming_a_cycle_is_graph_corrupted(
    board: Board, store: Any
) -> None:
    # C already waits for A; make A wait for C as well: A -> C -> A.
    a, _, c = abc(store)
    board.force("add_edge", task=a, dependency=c)
    board.force("set_unmet", id=a, count=1)
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(a))
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_an_unmet_count_below_the_edges_is_graph_corrupted(board: Board, store: Any) -> None:
    a, b, c = abc(store)
    store.claim_task(a, "alice")
    store.claim_task(b, "bob")
    board.force("set_unmet", id=c, count=0)
    raises_code("graph_corrupted", lambda: store.claim_next("carol"))
    raises_code("graph_corrupted", lambda: store.claim_task(c, "carol"))
    raises_code("graph_corrupted", store.list_tasks)
    assert [e.owner for e in store.events() if e.kind == "claimed"] == ["alice", "bob"]


def test_an_unmet_count_above_the_edges_is_graph_corrupted(board: Board, store: Any) -> None:
    a, _, _ = abc(store)
    board.force("set_unmet", id=a, count=1)
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_an_inflated_count_is_caught_when_its_last_dependency_completes(
    board: Board, store: Any
) -> None:
    a, b, c = abc(store)
    claim_a = store.claim_task(a, "alice")
    store.complete_task(a, "alice", claim_a.claim_token)
    claim_b = store.claim_task(b, "bob")
    board.force("set_unmet", id=c, count=2)  # should be 1: A is done
    raises_code("graph_corrupted", lambda: store.complete_task(b, "bob", claim_b.claim_token))
    assert store.get_task(a).status == TaskStatus.COMPLETED


def test_completing_into_a_negative_unmet_count_is_graph_corrupted_and_rolled_back(
    board: Board, store: Any
) -> None:
    a, _, c = abc(store)
    claim = store.claim_task(a, "alice")
    board.force("set_unmet", id=c, count=0)
    raises_code("graph_corrupted", lambda: store.complete_task(a, "alice", claim.claim_token))
    # The completion was rolled back whole: alice still holds A, no completed event.
    board.force("set_unmet", id=c, count=2)
    assert store.get_task(a).status == TaskStatus.IN_PROGRESS
    assert "completed" not in kinds(store)


def test_an_unknown_status_in_a_row_is_store_unreadable(board: Board, store: Any) -> None:
    a, _, _ = abc(store)
    board.force("set_status", id=a, status="paused")
    raises_code("store_unreadable", store.list_tasks)
    raises_code("store_unreadable", lambda: store.get_task(a))


# -- leases: the half-open interval [claimed_at, expires_at) ---------------------------------


def test_the_lease_ends_lease_seconds_after_the_claim(store: Any, clock: ManualClock) -> None:
    a = store.create_task("A")
    clock.advance(5)
    claim = store.claim_task(a.id, "alice")
    assert claim.lease_expires_at_utc == at(5 + LEASE)
    assert claim.lease_expires_at_utc.utcoffset() == timedelta(0)


def test_completing_one_microsecond_before_expiry_succeeds(store: Any, clock: ManualClock) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc - ONE_MICROSECOND)
    done = store.complete_task(a.id, "alice", claim.claim_token)
    assert done.task.status == TaskStatus.COMPLETED and done.task.owner == "alice"
    assert "lease_expired" not in kinds(store)


def test_completing_at_the_expiry_instant_is_lease_expired_and_releases_the_task(
    board: Board, store: Any, clock: ManualClock
) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)
    raises_code("lease_expired", lambda: store.complete_task(a.id, "alice", claim.claim_token))
    # Another store, with a clock that never moved, sees the release committed by the refusal.
    other = board.store(clock=ManualClock(), new_claim_token=uuid_sequence(72))
    assert (other.get_task(a.id).status, other.get_task(a.id).owner) == (TaskStatus.PENDING, None)
    assert kinds(other) == ["created", "claimed", "lease_expired"]
    expired = other.events()[-1]
    assert (expired.owner, expired.claim_token, expired.at_utc) == (
        "alice",
        claim.claim_token,
        claim.lease_expires_at_utc,
    )


@pytest.mark.parametrize("reader", ["get_task", "list_tasks", "claim_task", "claim_next"])
def test_every_operation_releases_expired_leases_first(
    store: Any, clock: ManualClock, reader: str
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
    assert kinds(store)[:4] == ["created", "created", "claimed", "lease_expired"]
    assert kinds(store).count("lease_expired") == 1


def test_a_lease_not_yet_expired_is_not_released(store: Any, clock: ManualClock) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc - ONE_MICROSECOND)
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    assert store.claim_next("bob") is None
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))


def test_a_late_worker_is_refused_and_the_new_owner_keeps_the_task(
    store: Any, clock: ManualClock
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
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", fresh.claim_token))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "bob", late.claim_token))
    held = store.get_task(a.id)
    assert (held.status, held.owner) == (TaskStatus.IN_PROGRESS, "bob")
    assert store.complete_task(a.id, "bob", fresh.claim_token).task.owner == "bob"
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", late.claim_token))


def test_the_same_owner_reclaiming_gets_a_new_token_and_the_old_one_is_refused(
    store: Any, clock: ManualClock
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


def test_a_lease_expiring_between_two_stores_is_released_once(
    board: Board, clock: ManualClock
) -> None:
    first = board.store(clock=clock, lease_seconds=LEASE)
    second = board.store(clock=clock, lease_seconds=LEASE, new_claim_token=lambda: token(9))
    a = first.create_task("A")
    claim = first.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)
    assert second.get_task(a.id).status == TaskStatus.PENDING
    assert first.get_task(a.id).status == TaskStatus.PENDING
    assert kinds(first).count("lease_expired") == 1


def test_each_store_instance_hands_out_its_own_lease_length(
    board: Board, clock: ManualClock
) -> None:
    short = board.store(clock=clock, lease_seconds=1)
    long = board.store(clock=clock, lease_seconds=3600, new_claim_token=uuid_sequence(72))
    a, b = short.create_task("A"), short.create_task("B")
    assert short.claim_task(a.id, "alice").lease_expires_at_utc == at(1)
    assert long.claim_task(b.id, "bob").lease_expires_at_utc == at(3600)
    clock.advance(1)
    # The short lease ran out whichever instance notices it.
    assert [t.status for t in long.list_tasks()] == [TaskStatus.PENDING, TaskStatus.IN_PROGRESS]


def test_a_clock_that_returns_a_naive_datetime_is_refused_and_changes_nothing(
    board: Board,
) -> None:
    store = board.raw_store(clock=lambda: datetime(2026, 1, 1, 9, 0))
    with pytest.raises(ValueError, match="naive"):
        store.create_task("A")
    assert board.store().list_tasks() == []


# -- input rules: a stable code, never a driver or Unicode error ---------------------------


BAD_NAMES = [
    "",
    "   ",
    "\x00alice",
    "ali\x00ce",
    "alice\n",
    "bell\x07",
    "del\x7f",
    "c1\x85",
    "\ud800",
    "alice\udfff",
    "x" * 201,
    7,
    None,
    b"alice",
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_bad_owner_is_invalid_task_input_everywhere(store: Any, name: Any) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code("invalid_task_input", lambda: store.claim_next(name))
    raises_code("invalid_task_input", lambda: store.claim_task(a.id, name))
    raises_code("invalid_task_input", lambda: store.complete_task(a.id, name, claim.claim_token))
    assert store.get_task(a.id).owner == "alice"
    assert kinds(store) == ["created", "claimed"]


@pytest.mark.parametrize("name", ["x" * 200, "ä", "Alice Smith", "worker-7.3", "🦊"], ids=repr)
def test_any_name_within_the_rules_round_trips(store: Any, name: str) -> None:
    store.create_task("A")
    claim = store.claim_next(name)
    assert claim is not None and claim.task.owner == name
    assert store.complete_task(claim.task.id, name, claim.claim_token).task.owner == name
    assert store.events()[-1].owner == name


@pytest.mark.parametrize(
    ("subject", "description"),
    [
        ("\ud83d", ""),
        ("A", "half a pair \udc00"),
        ("A\x00B", ""),
        ("A", "nul \x00 inside"),
        (7, ""),
    ],
    ids=repr,
)
def test_text_that_is_not_valid_unicode_or_has_nul_is_invalid_task_input(
    store: Any, subject: Any, description: Any
) -> None:
    raises_code("invalid_task_input", lambda: store.create_task(subject, description))
    assert store.list_tasks() == []


def test_long_text_round_trips_exactly(store: Any) -> None:
    text = "paragraph ✓\r\n" * 20_000 + "\t the end"
    task = store.create_task("S" * 5000, text)
    assert store.get_task(task.id) == task
    assert store.get_task(task.id).description == text


@pytest.mark.parametrize(
    "seconds", [0, 0.0009, -1, 31_536_000.5, float("nan"), float("inf"), -float("inf")]
)
def test_a_lease_outside_a_millisecond_to_a_year_is_refused_at_construction(
    board: Board, seconds: float
) -> None:
    with pytest.raises(ValueError):
        board.raw_store(lease_seconds=seconds)


@pytest.mark.parametrize("seconds", [True, "300", None, [300]], ids=repr)
def test_a_lease_that_is_not_a_number_is_refused_at_construction(
    board: Board, seconds: Any
) -> None:
    with pytest.raises((TypeError, ValueError)):
        board.raw_store(lease_seconds=seconds)


@pytest.mark.parametrize("seconds", [0.001, 1, 31_536_000])
def test_the_lease_bounds_themselves_are_accepted(board: Board, seconds: float) -> None:
    clock = ManualClock()
    store = board.store(clock=clock, lease_seconds=seconds)
    store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None and claim.lease_expires_at_utc == at(0) + timedelta(seconds=seconds)
    clock.set(claim.lease_expires_at_utc - ONE_MICROSECOND)
    assert store.complete_task(claim.task.id, "alice", claim.claim_token).task.owner == "alice"


def test_a_blocked_by_longer_than_any_driver_variable_limit_works(store: Any) -> None:
    many = 40_000  # above SQLite's 32,766 bound variables, PostgreSQL's 65,535 is near
    roots = store.create_tasks([(f"root {n}", "", ()) for n in range(many)])
    ids = [task.id for task in roots]
    waiting = store.create_task("after all of them", blocked_by=ids)
    assert waiting.blocked_by == tuple(ids)
    assert store.get_task(waiting.id).blocked_by == tuple(ids)
    error = raises_code(
        "dependency_not_found",
        lambda: store.create_task("ghosts", blocked_by=[*ids, task_id(10**8 - 1)]),
    )
    assert task_id(10**8 - 1) in str(error)


# -- interrupts: no open transaction, no lock left behind ------------------------------------


class Interrupted(BaseException):
    """Stands in for KeyboardInterrupt raised mid-operation."""


def test_an_interrupt_inside_an_operation_leaves_the_object_usable_and_the_board_unlocked(
    board: Board,
) -> None:
    moments = iter([False, True, False, False, False, False, False, False])
    base = ManualClock()

    def clock() -> datetime:
        # The clock is read inside the transaction, after the write lock is held.
        if next(moments):
            raise Interrupted
        return base()

    store = board.store(clock=clock)
    a = store.create_task("A")
    with pytest.raises(Interrupted):
        store.claim_next("alice")
    # Another instance (another process, as far as the lock is concerned) is not blocked.
    other = board.store(new_claim_token=uuid_sequence(72))
    assert other.get_task(a.id).status == TaskStatus.PENDING
    claim = store.claim_next("alice")
    assert claim is not None and claim.task.id == a.id
    assert kinds(other) == ["created", "claimed"]


def test_keyboard_interrupt_while_waiting_for_the_write_lock_leaves_no_lock_held(
    board: Board, tmp_path: Path
) -> None:
    """A real SIGINT to a child process blocked on the lock: afterwards all is free and usable."""
    seed = board.store()
    a = seed.create_task("A")
    fifo = tmp_path / "signal-landed"
    os.mkfifo(fifo)
    landed = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    ready, go_on, results = spawn.Event(), spawn.Event(), spawn.Queue()
    child = spawn.Process(
        target=store_workers.claim_through_an_interrupt,
        args=(board.spec, str(fifo), ready, go_on, results),
        name="interrupted",
    )
    try:
        with board.write_lock_held():
            child.start()
            assert ready.wait(RESULT_TIMEOUT_SECONDS), "the child never started its claim"
            assert child.pid is not None
            # Interrupt it only once it really waits for the lock we hold.
            store_workers.wait_until_sleeping(child.pid, RESULT_TIMEOUT_SECONDS)
            os.kill(child.pid, signal.SIGINT)
            readable, _, _ = select.select([landed], [], [], RESULT_TIMEOUT_SECONDS)
            assert readable, "the SIGINT never reached the child"
        # The lock is released: the child's wait returns and KeyboardInterrupt is raised.
        assert results.get(timeout=RESULT_TIMEOUT_SECONDS) == ("interrupted", None)
        # The child is alive and holds nothing: a writer gets the lock at once.
        assert child.is_alive()
        assert board.write_lock_free()
        assert seed.get_task(a.id).status == TaskStatus.PENDING
        go_on.set()
        assert results.get(timeout=RESULT_TIMEOUT_SECONDS) == ("claimed", a.id)
    finally:
        os.close(landed)
        child.join(JOIN_TIMEOUT_SECONDS)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    steps = [(e.kind, e.owner) for e in seed.events() if e.kind != "created"]
    if steps != [("claimed", "interrupted")]:
        # PostgreSQL sends a claim with its COMMIT, in one message: interrupted while it
        # waited for the lock, the claim may have committed once the lock came. Then it
        # was given back at once, its lease ended at that instant (never left held until
        # it ran out), before the claim made after the interrupt.
        assert board.name == "postgres"
        assert steps == [
            ("claimed", "interrupted"),
            ("lease_expired", "interrupted"),
            ("claimed", "interrupted"),
        ]


# -- real OS processes on one board --------------------------------------------------------


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


def _build_dag(store: Any, size: int, seed: int, prefix: str = "T") -> dict[str, tuple[str, ...]]:
    rng = random.Random(seed)
    deps: dict[str, tuple[str, ...]] = {}
    ids: list[str] = []
    for n in range(size):
        older = ids[-30:]  # nearby tasks, so the graph is deep rather than wide
        blocked_by = rng.sample(older, k=min(len(older), rng.choice([0, 1, 1, 2, 3])))
        task = store.create_task(f"{prefix}{n}", blocked_by=blocked_by)
        ids.append(task.id)
        deps[task.id] = task.blocked_by
    return deps


def _events_by_task(events: list[TaskEvent]) -> dict[str, list[TaskEvent]]:
    grouped: dict[str, list[TaskEvent]] = defaultdict(list)
    for event in events:
        grouped[event.task_id].append(event)
    return grouped


@pytest.mark.processes
def test_eight_processes_racing_for_one_task_have_exactly_one_winner_each_round(
    board: Board, processes: list[BaseProcess]
) -> None:
    rounds = 30
    store = board.raw_store()
    barrier = spawn.Barrier(WORKERS + 1)
    results = spawn.Queue()
    for n in range(WORKERS):
        process = spawn.Process(
            target=store_workers.race_for_one_task,
            args=(board.spec, f"worker-{n}", rounds, barrier, results),
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

    tasks = store.list_tasks()
    assert all(t.status == TaskStatus.IN_PROGRESS for t in tasks)
    assert [t.owner for t in tasks] == winners
    assert kinds(store).count("claimed") == rounds
    assert board.integrity_problems() == []


@pytest.mark.processes
def test_eight_processes_drain_a_dag_in_dependency_order_each_task_once(
    board: Board, processes: list[BaseProcess]
) -> None:
    store = board.raw_store()
    deps = _build_dag(store, 200, seed=1717)
    assert sum(1 for d in deps.values() if d) > 100  # a real graph, not a flat list
    barrier = spawn.Barrier(WORKERS + 1)
    results = spawn.Queue()
    for n in range(WORKERS):
        process = spawn.Process(
            target=store_workers.drain_board,
            args=(board.spec, f"worker-{n}", barrier, results),
            name=f"worker-{n}",
        )
        process.start()
        processes.append(process)
    barrier.wait(store_workers.BARRIER_TIMEOUT_SECONDS)
    reports = [_next_result(results) for _ in range(WORKERS)]
    _join_all(processes)

    assert sum(report[1] for report in reports) == len(deps)
    by_task = _events_by_task(store.events())
    completed_at: dict[str, int] = {}
    for task, task_events in by_task.items():
        assert [e.kind for e in task_events] == [
            EventKind.CREATED,
            EventKind.CLAIMED,
            EventKind.COMPLETED,
        ], task
        completed_at[task] = task_events[2].sequence
        assert task_events[1].claim_token == task_events[2].claim_token
        assert task_events[1].owner == task_events[2].owner
    for task, blocked_by in deps.items():
        claimed_at = by_task[task][1].sequence
        for dep in blocked_by:
            assert completed_at[dep] < claimed_at, f"{task} claimed before {dep} completed"
    assert all(t.status == TaskStatus.COMPLETED for t in store.list_tasks())
    # Who got the work is up to the engine's lock waits (not FIFO: one worker may
    # take nearly everything); correctness must not depend on it.
    assert board.integrity_problems() == []


@pytest.mark.processes
def test_workers_killed_at_random_points_leave_a_consistent_board_that_still_drains(
    board: Board, processes: list[BaseProcess]
) -> None:
    lease_seconds = 0.75  # real time: what is tested is expiry, not ordering
    kills = 30
    store = board.raw_store()
    # The parent holds "gate" and "last" waits for it, so the workers stay on even
    # when a fast board drains before the kills are done: the number of kills never
    # depends on the machine's speed. A drained board gets another batch instead.
    holder = board.raw_store(lease_seconds=3600.0)
    gate = holder.create_task("gate")
    last = holder.create_task("last", blocked_by=[gate.id])
    gate_claim = holder.claim_next("parent")
    assert gate_claim is not None and gate_claim.task.id == gate.id
    deps = {gate.id: (), last.id: (gate.id,)}
    deps.update(_build_dag(store, 400, seed=99))
    batches = 1
    rng = random.Random(4242)

    def start(slot: int, generation: int) -> BaseProcess:
        process = spawn.Process(
            target=store_workers.work_until_killed,
            args=(board.spec, f"worker-{slot}.{generation}", lease_seconds, generation),
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
        tasks = store.list_tasks()
        if all(t.status == TaskStatus.COMPLETED for t in tasks if t.id not in (gate.id, last.id)):
            deps.update(_build_dag(store, 200, seed=99 + batches, prefix=f"B{batches}."))
            batches += 1
            continue
        holders = {t.owner for t in tasks if t.status == TaskStatus.IN_PROGRESS}
        seen = {e.owner for e in store.events() if e.kind == EventKind.CLAIMED}
        # Kill only processes past start-up (they have claimed something). Two of
        # three kills hit a worker holding a claim right now, so its task must come
        # back through lease expiry; the rest land anywhere, mid-transaction included.
        holding = [slot for slot, p in enumerate(live) if p.name in holders]
        working = [slot for slot, p in enumerate(live) if p.name in seen]
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
    assert killed_holders + killed_anywhere == kills, (killed_holders, killed_anywhere)
    holder.complete_task(gate.id, "parent", gate_claim.claim_token)
    _join_all(live)

    assert board.integrity_problems() == []
    tasks = store.list_tasks()  # also re-checks every edge and unmet count
    assert [t.status for t in tasks] == [TaskStatus.COMPLETED] * len(deps)
    events = store.events()
    claimed_tokens = [e.claim_token for e in events if e.kind == EventKind.CLAIMED]
    # No half claims: every issued token has exactly one claimed event.
    assert len(claimed_tokens) == len(set(claimed_tokens))
    assert store.issued_claim_tokens() == claimed_tokens
    completions = Counter(e.task_id for e in events if e.kind == EventKind.COMPLETED)
    assert set(completions.values()) == {1} and len(completions) == len(deps)
    by_task = _events_by_task(events)
    for task, task_events in by_task.items():
        _assert_one_holder_at_a_time(task, task_events, deps[task], by_task)
    # Some kills really did land between claim and complete.
    assert any(e.kind == EventKind.LEASE_EXPIRED for e in events)


def _assert_one_holder_at_a_time(
    task: str,
    events: list[TaskEvent],
    blocked_by: tuple[str, ...],
    by_task: dict[str, list[TaskEvent]],
) -> None:
    """created, then (claimed, lease_expired)*, claimed, completed by that same claim."""
    sequence = [event.kind for event in events]
    assert sequence[0] == EventKind.CREATED and sequence[-1] == EventKind.COMPLETED, task
    middle = sequence[1:-1]
    assert middle[-1] == EventKind.CLAIMED, task
    assert middle[:-1] == [EventKind.CLAIMED, EventKind.LEASE_EXPIRED] * (len(middle) // 2)
    for claimed, after in zip(events[1:-1:2], events[2::2], strict=True):
        assert after.claim_token == claimed.claim_token, task
    for dep in blocked_by:
        assert by_task[dep][-1].sequence < events[1].sequence, f"{task} claimed before {dep}"


def test_threads_sharing_one_store_instance_never_double_claim(board: Board) -> None:
    store = board.raw_store()
    store.create_tasks([(f"T{n}", "", ()) for n in range(60)])
    start = threading.Barrier(6)
    taken: list[TaskClaim] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        start.wait(RESULT_TIMEOUT_SECONDS)
        while (claim := store.claim_next(name)) is not None:
            with lock:
                taken.append(claim)
            store.complete_task(claim.task.id, name, claim.claim_token)

    threads = [threading.Thread(target=work, args=(f"t{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_SECONDS)
    assert sorted(c.task.id for c in taken) == sorted(t.id for t in store.list_tasks())
    assert all(t.status == TaskStatus.COMPLETED for t in store.list_tasks())


def test_times_are_aware_utc_whatever_offset_the_clock_uses(board: Board) -> None:
    tokyo = datetime(2026, 1, 1, 18, 0, tzinfo=UTC).astimezone(
        __import__("zoneinfo").ZoneInfo("Asia/Tokyo")
    )
    store = board.store(clock=lambda: tokyo)
    store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None
    assert claim.lease_expires_at_utc == datetime(2026, 1, 1, 18, 5, tzinfo=UTC)
    assert claim.lease_expires_at_utc.utcoffset() == timedelta(0)
    assert all(e.at_utc.utcoffset() == timedelta(0) for e in store.events())


# -- the store against a tiny in-memory model: random operations, same answers, same errors --

LEASE_SECONDS = 10.0
OWNERS = ("alice", "bob", "carol")
MISSING_ID = task_id(99_999)
NOT_CANONICAL = ("not-a-uuid", "{" + task_id(1) + "}", task_id(1).replace("-", ""))


@dataclass(frozen=True)
class ModelTask:
    id: str
    subject: str
    blocked_by: tuple[str, ...]
    status: TaskStatus = TaskStatus.PENDING
    owner: str | None = None
    token: str | None = None
    expires: datetime | None = None


class StoreModel:
    """The rules of the board in plain Python, with no persistence and no concurrency."""

    def __init__(self) -> None:
        self.tasks: dict[str, ModelTask] = {}  # insertion order is creation order
        self.issued: dict[str, tuple[str, str, datetime]] = {}  # token -> task, owner, expiry
        self.ids_drawn = 0
        self.tokens_drawn = 0
        self.events: Counter[tuple[str, str, str | None, str | None]] = Counter()

    def release(self, now: datetime) -> None:
        for task in list(self.tasks.values()):
            # Half-open lease: at the expiry instant it is over.
            if task.expires is not None and task.expires <= now:
                self.events[("lease_expired", task.id, task.owner, task.token)] += 1
                self.tasks[task.id] = replace(
                    task, status=TaskStatus.PENDING, owner=None, token=None, expires=None
                )

    def ready(self, task: ModelTask) -> bool:
        return task.status == TaskStatus.PENDING and all(
            self.tasks[dep].status == TaskStatus.COMPLETED for dep in task.blocked_by
        )

    def create(self, subject: str, deps: list[str], now: datetime) -> ModelTask | str:
        # Argument checks happen before the transaction: no id drawn, no release.
        if not subject.strip():
            return "invalid_task_input"
        if any(dep in NOT_CANONICAL for dep in deps) or len(set(deps)) != len(deps):
            return "invalid_task_input"
        self.release(now)
        self.ids_drawn += 1
        new_id = task_id(self.ids_drawn)
        if new_id in deps:
            return "invalid_task_input"
        if any(dep not in self.tasks for dep in deps):
            return "dependency_not_found"
        task = ModelTask(new_id, subject, tuple(deps))
        self.tasks[new_id] = task
        self.events[("created", new_id, None, None)] += 1
        return task

    def claim(self, target: ModelTask, owner: str, now: datetime) -> ModelTask:
        self.tokens_drawn += 1
        new_token = token(self.tokens_drawn)
        expires = now + timedelta(seconds=LEASE_SECONDS)
        claimed = replace(
            target, status=TaskStatus.IN_PROGRESS, owner=owner, token=new_token, expires=expires
        )
        self.tasks[target.id] = claimed
        self.issued[new_token] = (target.id, owner, expires)
        self.events[("claimed", target.id, owner, new_token)] += 1
        return claimed

    def claim_task(self, wanted: str, owner: str, now: datetime) -> ModelTask | str:
        if wanted in NOT_CANONICAL:
            return "invalid_task_input"
        self.release(now)
        target = self.tasks.get(wanted)
        if target is None:
            return "task_not_found"
        if target.status != TaskStatus.PENDING:
            return "task_not_claimable"
        if not self.ready(target):
            return "task_blocked"
        return self.claim(target, owner, now)

    def claim_next(self, owner: str, now: datetime) -> ModelTask | None:
        self.release(now)
        for task in self.tasks.values():
            if self.ready(task):
                return self.claim(task, owner, now)
        return None

    def complete(
        self, wanted: str, owner: str, claim_token: str, now: datetime
    ) -> tuple[ModelTask, tuple[str, ...]] | str:
        self.release(now)
        target = self.tasks.get(wanted)
        if target is None:
            return "task_not_found"
        if (
            target.status == TaskStatus.IN_PROGRESS
            and target.owner == owner
            and target.token == claim_token
        ):
            done = replace(target, status=TaskStatus.COMPLETED, token=None, expires=None)
            self.tasks[wanted] = done
            self.events[("completed", wanted, owner, claim_token)] += 1
            unblocked = tuple(
                t.id for t in self.tasks.values() if wanted in t.blocked_by and self.ready(t)
            )
            return done, unblocked
        if target.status == TaskStatus.COMPLETED:
            return "claim_mismatch"
        issued = self.issued.get(claim_token)
        if issued is not None and issued[:2] == (wanted, owner) and issued[2] <= now:
            return "lease_expired"
        return "claim_mismatch"


def _error_code(action: object) -> str:
    assert callable(action)
    try:
        action()
    except TaskError as error:
        return error.code
    raise AssertionError("expected a TaskError")


class StoreMatchesModel(RuleBasedStateMachine):
    """Random create / claim / complete / clock moves; the store must agree with the model."""

    new_board: Callable[[], Board]  # set per backend before the machine runs

    def __init__(self) -> None:
        super().__init__()
        self.board = self.new_board()
        self.clock = ManualClock()
        self.store = self.board.store(clock=self.clock, lease_seconds=LEASE_SECONDS)
        self.model = StoreModel()

    def teardown(self) -> None:
        self.board.close_all()

    # -- choosing arguments ------------------------------------------------------

    def _some_id(self, data: st.DataObject) -> str:
        known = list(self.model.tasks)
        choices = [*known, MISSING_ID, NOT_CANONICAL[0]] if known else [MISSING_ID]
        return data.draw(st.sampled_from(choices), label="task_id")

    def _some_token(self, data: st.DataObject, wanted: str) -> str:
        current = self.model.tasks.get(wanted)
        choices = [token(99_999), *self.model.issued]
        if current is not None and current.token is not None:
            choices = [current.token, current.token, *choices]
        return data.draw(st.sampled_from(choices), label="claim_token")

    # -- rules ---------------------------------------------------------------------

    @rule(
        data=st.data(),
        subject=st.sampled_from(["T", "write docs", "", "   "]),
        twist=st.sampled_from(["none", "none", "none", "missing", "duplicate", "odd", "self"]),
    )
    def create(self, data: st.DataObject, subject: str, twist: str) -> None:
        known = list(self.model.tasks)
        deps: list[str] = []
        if known:
            deps = data.draw(
                st.lists(st.sampled_from(known), unique=True, max_size=3), label="deps"
            )
        if twist == "missing":
            deps.append(MISSING_ID)
        elif twist == "duplicate" and deps:
            deps.append(deps[0])
        elif twist == "odd":
            deps.append(data.draw(st.sampled_from(NOT_CANONICAL), label="odd id"))
        elif twist == "self":
            deps.append(task_id(self.model.ids_drawn + 1))  # the id this task would get
        expected = self.model.create(subject, deps, self.clock())
        if isinstance(expected, str):
            assert _error_code(lambda: self.store.create_task(subject, blocked_by=deps)) == expected
        else:
            created = self.store.create_task(subject, blocked_by=deps)
            assert (created.id, created.blocked_by, created.status) == (
                expected.id,
                expected.blocked_by,
                TaskStatus.PENDING,
            )

    @rule(data=st.data(), owner=st.sampled_from(OWNERS))
    def claim_task(self, data: st.DataObject, owner: str) -> None:
        wanted = self._some_id(data)
        expected = self.model.claim_task(wanted, owner, self.clock())
        if isinstance(expected, str):
            assert _error_code(lambda: self.store.claim_task(wanted, owner)) == expected
        else:
            self._check_claim(self.store.claim_task(wanted, owner), expected)

    @rule(owner=st.sampled_from(OWNERS))
    def claim_next(self, owner: str) -> None:
        expected = self.model.claim_next(owner, self.clock())
        claim = self.store.claim_next(owner)
        if expected is None:
            assert claim is None
        else:
            assert claim is not None
            self._check_claim(claim, expected)

    @rule(data=st.data(), owner=st.sampled_from(OWNERS))
    def complete(self, data: st.DataObject, owner: str) -> None:
        wanted = self._some_id(data)
        if wanted in NOT_CANONICAL:
            return  # covered above; here the model tracks valid calls
        holder = self.model.tasks.get(wanted)
        # Mostly the right owner, so that successes are common.
        if holder is not None and holder.owner is not None and data.draw(st.booleans()):
            owner = holder.owner
        claim_token = self._some_token(data, wanted)
        expected = self.model.complete(wanted, owner, claim_token, self.clock())
        if isinstance(expected, str):
            assert (
                _error_code(lambda: self.store.complete_task(wanted, owner, claim_token))
                == expected
            )
        else:
            done = self.store.complete_task(wanted, owner, claim_token)
            assert (done.task.status, done.task.owner) == (TaskStatus.COMPLETED, owner)
            assert done.unblocked == expected[1]

    @rule(data=st.data())
    def advance_clock(self, data: st.DataObject) -> None:
        expiries = sorted(
            t.expires
            for t in self.model.tasks.values()
            if t.expires is not None and t.expires > self.clock()
        )
        how = data.draw(st.sampled_from(["small", "lease", "exact", "just_before"]))
        if how in ("exact", "just_before") and expiries:
            target = data.draw(st.sampled_from(expiries), label="expiry")
            if how == "just_before":
                target -= ONE_MICROSECOND
            if target >= self.clock():
                self.clock.set(target)
        elif how == "lease":
            self.clock.advance(LEASE_SECONDS)
        else:
            self.clock.advance(data.draw(st.sampled_from([0.001, 1.0, 4.5])))

    # -- checks ---------------------------------------------------------------------

    def _check_claim(self, claim: TaskClaim, expected: ModelTask) -> None:
        assert claim.task.id == expected.id
        assert claim.task.owner == expected.owner
        assert claim.task.status == TaskStatus.IN_PROGRESS
        assert claim.claim_token == expected.token
        assert claim.lease_expires_at_utc == expected.expires

    @invariant()
    def board_matches_the_model(self) -> None:
        self.model.release(self.clock())
        board = self.store.list_tasks()
        assert [(t.id, t.subject, t.status, t.owner, t.blocked_by) for t in board] == [
            (t.id, t.subject, t.status, t.owner, t.blocked_by) for t in self.model.tasks.values()
        ]

    @invariant()
    def event_log_matches_the_model(self) -> None:
        logged = Counter(
            (e.kind.value, e.task_id, e.owner, e.claim_token) for e in self.store.events()
        )
        assert logged == self.model.events
        assert sorted(self.store.issued_claim_tokens()) == sorted(self.model.issued)


def test_the_store_agrees_with_a_small_model_under_random_operations(
    board: Board, tmp_path: Path
) -> None:
    boards = iter(range(10**6))

    class OnThisBackend(StoreMatchesModel):
        def new_board(self) -> Board:
            return make_board(board.name, tmp_path / f"example-{next(boards)}")

    run_state_machine_as_test(
        OnThisBackend,
        settings=settings(
            max_examples=120,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )


# == hardening: bad paths every backend must refuse the same way ============================
# (Backend-neutral: each test uses only the `board` fixture and the public store API.)

TESTS_FOLDER = str(Path(__file__).parent)

# A child that is inside a write transaction (holding the write lock) when SIGINT and
# SIGTERM arrive together: both are blocked until the parent has sent them, then
# unblocked at once, so Python raises the first inside the operation and the second at
# its next check, in the rollback path. The order comes from the signal mask, not time.
TWO_SIGNALS_CHILD = r"""
import signal, sys
BOTH = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, BOTH)  # first, so any later thread inherits it
backend, where, tests, second = sys.argv[1:5]


def terminate(signum, frame):
    # As `agent17 teammate` turns SIGTERM into KeyboardInterrupt; or a plain exit.
    raise KeyboardInterrupt if second == "KeyboardInterrupt" else SystemExit("terminated")


signal.signal(signal.SIGTERM, terminate)
sys.path.insert(0, tests)
from store_backends import open_spec
from agent17.deterministic import ManualClock

base, armed = ManualClock(), []


def clock():
    # The store reads its clock inside the transaction, once it holds the write lock.
    if armed:
        armed.clear()
        print("inside", flush=True)
        sys.stdin.readline()  # the parent has sent both signals: they are pending
        signal.pthread_sigmask(signal.SIG_UNBLOCK, BOTH)  # both are delivered here
    return base()


store = open_spec((backend, where), clock=clock)
armed.append(True)
try:
    store.claim_next("interrupted")
    print("not interrupted", flush=True)
except BaseException as error:
    print("interrupted", type(error).__name__, flush=True)
sys.stdin.readline()  # the parent has checked the lock
claim = store.claim_next("interrupted")  # the very same object
print("claimed", None if claim is None else claim.task.id, flush=True)
store.close()
"""


def _child_line(child: subprocess.Popen[bytes]) -> str:
    """The child's next line of output, within a deadline (it never waits on us for long)."""
    assert child.stdout is not None
    line = b""
    deadline = time.monotonic() + RESULT_TIMEOUT_SECONDS
    while not line.endswith(b"\n"):
        readable, _, _ = select.select([child.stdout], [], [], deadline - time.monotonic())
        assert readable, f"the child said nothing in time (so far {line!r})"
        byte = os.read(child.stdout.fileno(), 1)
        assert byte, f"the child ended early (so far {line!r})"
        line += byte
    return line.decode().strip()


def _tell_child(child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None
    child.stdin.write(b"go\n")
    child.stdin.flush()


def _end_child(child: subprocess.Popen[bytes]) -> None:
    # A closed stdin lets a child that still waits on us run to its end.
    assert child.stdin is not None
    child.stdin.close()
    try:
        child.wait(JOIN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


@pytest.mark.processes
@pytest.mark.parametrize("second", ["KeyboardInterrupt", "SystemExit"])
def test_two_signals_at_once_inside_an_operation_leave_no_transaction_open(
    board: Board, second: str
) -> None:
    """SIGINT and SIGTERM together to a real process mid-claim: the lock is free at once."""
    seed = board.store()
    a = seed.create_task("A")
    child = subprocess.Popen(
        [sys.executable, "-c", TWO_SIGNALS_CHILD, *board.spec, TESTS_FOLDER, second],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    try:
        assert _child_line(child) == "inside"
        os.kill(child.pid, signal.SIGINT)
        os.kill(child.pid, signal.SIGTERM)
        _tell_child(child)
        # The caller sees the first interrupt, whatever the second was.
        assert _child_line(child) == "interrupted KeyboardInterrupt"
        # The child is alive and waiting on us: its transaction is gone, its lock free.
        assert board.write_lock_free()
        assert seed.get_task(a.id).status == TaskStatus.PENDING
        _tell_child(child)
        assert _child_line(child) == f"claimed {a.id}"
    finally:
        _end_child(child)
    assert child.returncode == 0
    assert [e.owner for e in seed.events() if e.kind == "claimed"] == ["interrupted"]


@pytest.mark.parametrize("seconds", [10**400, -(10**400)], ids=["huge", "-huge"])
def test_a_lease_too_large_for_a_float_is_refused_with_value_error(
    board: Board, seconds: int
) -> None:
    with pytest.raises(ValueError, match="lease_seconds"):
        board.raw_store(lease_seconds=seconds)


@pytest.mark.parametrize("after", ["abc", "1", 1.5, True, None, [1], -1, 2**63, "\ud800"], ids=repr)
def test_a_bad_after_sequence_is_invalid_task_input(store: Any, after: Any) -> None:
    store.create_task("A")
    raises_code("invalid_task_input", lambda: store.events(after))
    assert [e.kind for e in store.events(2**63 - 1)] == []
    assert [e.kind for e in store.events(0)] == ["created"]


@pytest.mark.parametrize(
    "drafts",
    [5, None, "abc", {"A": ""}, [("A", "")], [("A",)], [("A", "", (), "x")], ["A"], [5]],
    ids=repr,
)
def test_create_tasks_with_drafts_that_are_not_triples_is_invalid_task_input(
    store: Any, drafts: Any
) -> None:
    raises_code("invalid_task_input", lambda: store.create_tasks(drafts))
    assert store.list_tasks() == []


def test_create_tasks_takes_any_iterable_of_triples_lists_included(store: Any) -> None:
    made = store.create_tasks(draft for draft in [["A", "a", []], ("B", "", ())])
    assert [(t.subject, t.description) for t in made] == [("A", "a"), ("B", "")]


def test_an_owner_too_large_to_print_is_still_invalid_task_input(store: Any) -> None:
    raises_code("invalid_task_input", lambda: store.claim_next(10**5000))


@pytest.mark.parametrize("reading", [None, "2026-01-01T09:00:00Z", 0], ids=repr)
def test_a_clock_that_returns_no_datetime_is_refused_and_changes_nothing(
    board: Board, reading: Any
) -> None:
    store = board.raw_store(clock=lambda: reading)
    with pytest.raises(TypeError, match="aware datetime"):
        store.create_task("A")
    assert board.store().list_tasks() == []


def test_a_clock_too_late_for_a_lease_to_end_refuses_the_claim_and_spends_no_token(
    board: Board,
) -> None:
    drawn: list[str] = []

    def new_token() -> str:
        drawn.append(token(len(drawn) + 1))
        return drawn[-1]

    readings = [COURSE_START]
    store = board.store(clock=lambda: readings[0], new_claim_token=new_token)
    a = store.create_task("A")
    readings[0] = datetime.max.replace(tzinfo=UTC)
    with pytest.raises(ValueError, match="lease"):
        store.claim_next("alice")
    with pytest.raises(ValueError, match="lease"):
        store.claim_task(a.id, "alice")
    later = board.store()
    assert later.get_task(a.id).status == TaskStatus.PENDING
    assert kinds(later) == ["created"] and later.issued_claim_tokens() == []
    # The clock mended, the next claim gets the first token: none was spent.
    readings[0] = at(1)
    claim = store.claim_next("alice")
    assert claim is not None and claim.claim_token == token(1)
    assert set(drawn) == {token(1)}


def test_a_clock_reading_with_no_utc_datetime_is_refused_and_changes_nothing(
    board: Board,
) -> None:
    early = datetime.min.replace(tzinfo=timezone(timedelta(hours=14)))
    store = board.raw_store(clock=lambda: early)
    with pytest.raises(ValueError, match="no UTC datetime"):
        store.create_task("A")
    assert board.store().list_tasks() == []
