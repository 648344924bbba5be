"""The five leased task tools (create, get, list, claim, complete) and who gets which.

Lead and one-shot subagent get all five; a teammate gets four: it reads,
claims and completes, but never grows the graph (no create_task).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent17.claims import DirectTaskClaimService, ToolContext, WorkStealingRuntime
from agent17.inputs import RequiredText, StrictInput, Text
from agent17.inputs import Uuid as TaskId
from agent17.store.board import TaskBoard
from agent17.tools.base import AnyTool, ToolDefinition, ToolRegistry
from agent17.wire import claim_payload, task_payload


class CreateTaskInput(StrictInput):
    """Arguments of create_task."""

    subject: RequiredText = Field(description="A short title for the task.")
    description: Text = Field(default="", description="What done looks like.")
    blocked_by: list[TaskId] = Field(
        default_factory=list, description="Ids of existing tasks that must complete first."
    )


class GetTaskInput(StrictInput):
    """Arguments of get_task."""

    task_id: TaskId


class ListTasksInput(StrictInput):
    """list_tasks takes no arguments."""


class ClaimTaskInput(StrictInput):
    """Arguments of claim_task; the owner is the caller, never an argument."""

    task_id: TaskId


class CompleteTaskInput(StrictInput):
    """Arguments of complete_task: the claim token proves the caller holds the lease."""

    task_id: TaskId
    claim_token: TaskId


def leased_task_tool_definitions(
    store: TaskBoard, claim_service: DirectTaskClaimService
) -> tuple[AnyTool, AnyTool, AnyTool, AnyTool, AnyTool]:
    """The five task tools, in the order create, get, list, claim, complete."""

    def create(args: CreateTaskInput, context: ToolContext) -> dict[str, Any]:
        task = store.create_task(args.subject, args.description, tuple(args.blocked_by))
        return {"task": task_payload(task)}

    def get(args: GetTaskInput, context: ToolContext) -> dict[str, Any]:
        return {"task": task_payload(store.get_task(args.task_id))}

    def list_all(args: ListTasksInput, context: ToolContext) -> dict[str, Any]:
        return {"tasks": [task_payload(task) for task in store.list_tasks()]}

    def claim(args: ClaimTaskInput, context: ToolContext) -> dict[str, Any]:
        return claim_payload(claim_service.claim_task(args.task_id, context))

    def complete(args: CompleteTaskInput, context: ToolContext) -> dict[str, Any]:
        completion = claim_service.complete_task(args.task_id, args.claim_token, context)
        return {"task": task_payload(completion.task)}

    return (
        ToolDefinition(
            "create_task",
            "Create a task on the shared board, optionally blocked by existing tasks.",
            CreateTaskInput,
            create,
        ),
        ToolDefinition("get_task", "Read one task by id.", GetTaskInput, get),
        ToolDefinition(
            "list_tasks", "List every task in creation order.", ListTasksInput, list_all
        ),
        ToolDefinition(
            "claim_task",
            "Claim a ready pending task for yourself; returns its claim_token and lease.",
            ClaimTaskInput,
            claim,
        ),
        ToolDefinition(
            "complete_task",
            "Complete a task you hold, before its lease expires, with its claim_token.",
            CompleteTaskInput,
            complete,
        ),
    )


def register_leased_task_tools(registry: ToolRegistry, runtime: WorkStealingRuntime) -> None:
    """Give the Lead or a one-shot subagent all five task tools."""
    for tool in leased_task_tool_definitions(runtime.store, runtime.claim_service):
        registry.register(tool)


def register_teammate_leased_task_tools(
    registry: ToolRegistry, runtime: WorkStealingRuntime
) -> None:
    """Give a teammate the four worker tools: everything but create_task."""
    for tool in leased_task_tool_definitions(runtime.store, runtime.claim_service):
        if tool.name != "create_task":
            registry.register(tool)
