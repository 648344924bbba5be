"""Wiring: one store for everyone, the right tools for each role, each registered once."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_fixtures import new_store

from agent17 import (
    DirectTaskClaimService,
    SqliteTaskStore,
    ToolContext,
    ToolRegistry,
    WorkStealingRuntime,
    register_leased_task_tools,
    register_teammate_leased_task_tools,
)
from agent17.claims import WiringError


@pytest.fixture
def store(tmp_path: Path) -> SqliteTaskStore:
    return new_store(tmp_path)


def test_a_claim_service_on_another_store_object_is_a_wiring_error(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    # Same file, different object: still refused, the check is identity.
    other = new_store(tmp_path)
    with pytest.raises(WiringError, match="same store"):
        WorkStealingRuntime(store=store, claim_service=DirectTaskClaimService(other))


def test_the_runtime_builds_its_own_claim_service_on_the_same_store(
    store: SqliteTaskStore,
) -> None:
    runtime = WorkStealingRuntime(store=store)
    assert runtime.claim_service.store is store
    assert runtime.store is store
    service = DirectTaskClaimService(store)
    assert WorkStealingRuntime(store=store, claim_service=service).claim_service is service


def test_a_teammate_gets_exactly_the_four_worker_tools(store: SqliteTaskStore) -> None:
    registry = ToolRegistry()
    register_teammate_leased_task_tools(registry, WorkStealingRuntime(store=store))
    assert registry.names == ("get_task", "list_tasks", "claim_task", "complete_task")
    assert "create_task" not in registry


def test_the_lead_and_a_subagent_get_all_five_tools(store: SqliteTaskStore) -> None:
    runtime = WorkStealingRuntime(store=store)
    for _role in ("lead", "subagent"):
        registry = ToolRegistry()
        register_leased_task_tools(registry, runtime)
        assert registry.names == (
            "create_task",
            "get_task",
            "list_tasks",
            "claim_task",
            "complete_task",
        )


def test_registering_the_task_tools_twice_is_refused(store: SqliteTaskStore) -> None:
    runtime = WorkStealingRuntime(store=store)
    registry = ToolRegistry()
    register_leased_task_tools(registry, runtime)
    with pytest.raises(ValueError, match="already registered"):
        register_leased_task_tools(registry, runtime)
    teammate = ToolRegistry()
    register_teammate_leased_task_tools(teammate, runtime)
    with pytest.raises(ValueError, match="already registered"):
        register_teammate_leased_task_tools(teammate, runtime)


def test_tools_from_the_runtime_write_the_runtime_store(store: SqliteTaskStore) -> None:
    runtime = WorkStealingRuntime(store=store)
    registry = ToolRegistry()
    register_leased_task_tools(registry, runtime)
    create = registry.get("create_task")
    assert create is not None
    created = create.run({"subject": "A"}, ToolContext("lead"))
    assert [t.id for t in store.list_tasks()] == [created["task"]["id"]]


@pytest.mark.parametrize(("poll", "polls"), [(0.0, 12), (-1.0, 12), (5.0, 0)])
def test_nonsense_poll_settings_are_wiring_errors(
    store: SqliteTaskStore, poll: float, polls: int
) -> None:
    with pytest.raises(WiringError):
        WorkStealingRuntime(store=store, poll_interval_seconds=poll, max_idle_polls=polls)


def test_the_default_poll_settings_are_five_seconds_and_twelve_polls(
    store: SqliteTaskStore,
) -> None:
    runtime = WorkStealingRuntime(store=store)
    assert (runtime.poll_interval_seconds, runtime.max_idle_polls) == (5.0, 12)
