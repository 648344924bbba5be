"""The five task tools: strict inputs, the caller as owner, stable error results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import ManualClock, new_store, task_id, token

from agent17 import (
    DirectTaskClaimService,
    SqliteTaskStore,
    Task,
    TaskClaim,
    TaskCompletion,
    TaskError,
    ToolContext,
    leased_task_tool_definitions,
)
from agent17.tools.base import AnyTool

ALICE = ToolContext(identity="alice")
BOB = ToolContext(identity="bob")


@pytest.fixture
def store(tmp_path: Path) -> SqliteTaskStore:
    return new_store(tmp_path, clock=ManualClock())


@pytest.fixture
def tools(store: SqliteTaskStore) -> dict[str, AnyTool]:
    return {
        tool.name: tool
        for tool in leased_task_tool_definitions(store, DirectTaskClaimService(store))
    }


def _run(tools: dict[str, AnyTool], name: str, context: ToolContext, **arguments: Any) -> Any:
    result = tools[name].run(arguments, context)
    json.dumps(result)  # every result must be JSON-serialisable as it is
    return result


def test_there_are_five_tools_in_the_order_create_get_list_claim_complete(
    store: SqliteTaskStore,
) -> None:
    definitions = leased_task_tool_definitions(store, DirectTaskClaimService(store))
    assert [tool.name for tool in definitions] == [
        "create_task",
        "get_task",
        "list_tasks",
        "claim_task",
        "complete_task",
    ]
    for tool in definitions:
        assert tool.description
        assert tool.input_model.model_config.get("extra") == "forbid"


def test_the_happy_path_returns_wire_payloads(tools: dict[str, AnyTool]) -> None:
    created = _run(tools, "create_task", ALICE, subject="A", description="first")
    assert created == {
        "task": {
            "id": task_id(1),
            "subject": "A",
            "description": "first",
            "status": "pending",
            "owner": None,
            "blocked_by": [],
        }
    }
    _run(tools, "create_task", ALICE, subject="B", blocked_by=[task_id(1)])
    assert _run(tools, "get_task", ALICE, task_id=task_id(2))["task"]["blocked_by"] == [task_id(1)]
    listed = _run(tools, "list_tasks", ALICE)
    assert [task["subject"] for task in listed["tasks"]] == ["A", "B"]

    claimed = _run(tools, "claim_task", ALICE, task_id=task_id(1))
    assert claimed["claim_token"] == token(1)
    assert claimed["lease_expires_at_utc"] == "2026-01-01T09:05:00Z"
    assert claimed["task"]["owner"] == "alice"
    done = _run(tools, "complete_task", ALICE, task_id=task_id(1), claim_token=token(1))
    assert done["task"]["status"] == "completed" and done["task"]["owner"] == "alice"


def test_an_owner_argument_is_refused_and_never_used(
    tools: dict[str, AnyTool], store: SqliteTaskStore
) -> None:
    _run(tools, "create_task", ALICE, subject="A")
    result = _run(tools, "claim_task", ALICE, task_id=task_id(1), owner="mallory")
    assert result["error"]["code"] == "invalid_arguments"
    assert "owner" in result["error"]["message"]
    assert store.get_task(task_id(1)).owner is None
    assert store.issued_claim_tokens() == []

    _run(tools, "claim_task", ALICE, task_id=task_id(1))
    refused = _run(
        tools, "complete_task", ALICE, task_id=task_id(1), claim_token=token(1), owner="bob"
    )
    assert refused["error"]["code"] == "invalid_arguments"
    assert store.get_task(task_id(1)).status == "in_progress"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("create_task", {"subject": "A", "owner": "alice"}),
        ("create_task", {"subject": "A", "blocked_by": "not-a-list"}),
        ("create_task", {"subject": ""}),
        ("create_task", {}),
        ("create_task", {"subject": "A", "blocked_by": [task_id(1).upper() + "X"]}),
        ("get_task", {"task_id": "ABCDEF01-2345-4678-89AB-CDEF01234567"}),
        ("get_task", {"task_id": 17}),
        ("get_task", {}),
        ("list_tasks", {"status": "pending"}),
        ("claim_task", {"task_id": "not-a-uuid"}),
        ("complete_task", {"task_id": task_id(1)}),
        ("complete_task", {"task_id": task_id(1), "claim_token": "ABC"}),
    ],
)
def test_bad_arguments_are_invalid_arguments_with_no_effect(
    tools: dict[str, AnyTool], store: SqliteTaskStore, name: str, arguments: dict[str, Any]
) -> None:
    before = store.total_changes
    result = tools[name].run(arguments, ALICE)
    assert set(result) == {"error"}
    assert set(result["error"]) == {"code", "message"}
    assert result["error"]["code"] == "invalid_arguments"
    assert store.total_changes == before
    assert store.list_tasks() == []


def test_ids_must_be_canonical_uuids_in_the_schema(tools: dict[str, AnyTool]) -> None:
    schema = tools["get_task"].parameters_schema()
    pattern = schema["properties"]["task_id"]["pattern"]
    assert pattern.startswith("^[0-9a-f]")
    upper = "ABCDEF01-2345-4678-89AB-CDEF01234567"
    assert _run(tools, "get_task", ALICE, task_id=upper)["error"]["code"] == "invalid_arguments"
    # The same id in lowercase passes validation and reaches the store.
    assert _run(tools, "get_task", ALICE, task_id=upper.lower())["error"]["code"] == (
        "task_not_found"
    )


def test_complete_task_schema_requires_task_id_and_claim_token(
    tools: dict[str, AnyTool],
) -> None:
    schema = tools["complete_task"].parameters_schema()
    assert sorted(schema["required"]) == ["claim_token", "task_id"]
    assert set(schema["properties"]) == {"task_id", "claim_token"}
    assert schema.get("additionalProperties") is False
    for name in ("create_task", "get_task", "list_tasks", "claim_task"):
        assert "owner" not in tools[name].parameters_schema().get("properties", {})


@pytest.mark.parametrize(
    ("setup", "name", "arguments", "code"),
    [
        ("none", "get_task", {"task_id": task_id(5)}, "task_not_found"),
        (
            "none",
            "create_task",
            {"subject": "B", "blocked_by": [task_id(1), task_id(1)]},
            "invalid_task_input",
        ),
        (
            "none",
            "create_task",
            {"subject": "B", "blocked_by": [task_id(5)]},
            "dependency_not_found",
        ),
        ("claimed", "claim_task", {"task_id": task_id(1)}, "task_not_claimable"),
        ("blocked", "claim_task", {"task_id": task_id(2)}, "task_blocked"),
        (
            "claimed",
            "complete_task",
            {"task_id": task_id(1), "claim_token": token(9)},
            "claim_mismatch",
        ),
    ],
)
def test_known_task_errors_become_error_results(
    tools: dict[str, AnyTool],
    store: SqliteTaskStore,
    setup: str,
    name: str,
    arguments: dict[str, Any],
    code: str,
) -> None:
    if setup in ("claimed", "blocked"):
        a = store.create_task("A")
        store.create_task("B", blocked_by=[a.id])
    if setup == "claimed":
        store.claim_task(task_id(1), "bob")
    result = _run(tools, name, ALICE, **arguments)
    assert set(result) == {"error"}
    assert result["error"]["code"] == code
    assert isinstance(result["error"]["message"], str) and result["error"]["message"]


def test_the_owner_is_always_the_context_identity(
    tools: dict[str, AnyTool], store: SqliteTaskStore
) -> None:
    _run(tools, "create_task", ALICE, subject="A")
    claim = _run(tools, "claim_task", BOB, task_id=task_id(1))
    assert claim["task"]["owner"] == "bob"
    # alice knows bob's token but is still not bob.
    stolen = _run(tools, "complete_task", ALICE, task_id=task_id(1), claim_token=token(1))
    assert stolen["error"]["code"] == "claim_mismatch"
    assert store.get_task(task_id(1)).owner == "bob"
    done = _run(tools, "complete_task", BOB, task_id=task_id(1), claim_token=token(1))
    assert done["task"]["owner"] == "bob"


class ExplodingStore:
    """A store double whose every method fails with a bug, not a TaskError."""

    def create_task(
        self, subject: str, description: str = "", blocked_by: tuple[str, ...] | list[str] = ()
    ) -> Task:
        raise RuntimeError("disk on fire")

    def get_task(self, task_id: str) -> Task:
        raise RuntimeError("disk on fire")

    def list_tasks(self) -> list[Task]:
        raise RuntimeError("disk on fire")

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        raise RuntimeError("disk on fire")

    def claim_next(self, owner: str) -> TaskClaim | None:
        raise RuntimeError("disk on fire")

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        raise RuntimeError("disk on fire")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("create_task", {"subject": "A"}),
        ("get_task", {"task_id": task_id(1)}),
        ("list_tasks", {}),
        ("claim_task", {"task_id": task_id(1)}),
        ("complete_task", {"task_id": task_id(1), "claim_token": token(1)}),
    ],
)
def test_an_unknown_exception_propagates_instead_of_becoming_an_error_result(
    name: str, arguments: dict[str, Any]
) -> None:
    store = ExplodingStore()
    tools = {t.name: t for t in leased_task_tool_definitions(store, DirectTaskClaimService(store))}
    with pytest.raises(RuntimeError, match="disk on fire"):
        tools[name].run(arguments, ALICE)


class RecordingStore(ExplodingStore):
    """Remembers the owner each call was made for."""

    def __init__(self) -> None:
        self.owners: list[str] = []

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        self.owners.append(owner)
        raise TaskError("task_not_found", "recorded")

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        self.owners.append(owner)
        raise TaskError("claim_mismatch", "recorded")


def test_the_claim_service_passes_only_the_identity_to_the_store() -> None:
    store = RecordingStore()
    tools = {t.name: t for t in leased_task_tool_definitions(store, DirectTaskClaimService(store))}
    tools["claim_task"].run({"task_id": task_id(1)}, ToolContext(identity="carol"))
    tools["complete_task"].run(
        {"task_id": task_id(1), "claim_token": token(1)}, ToolContext("dave", idempotency_key="k")
    )
    assert store.owners == ["carol", "dave"]
