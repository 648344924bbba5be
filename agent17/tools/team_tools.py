"""The team tools: messages, plans, spawning and shutdown, as the Lead and teammates see them.

Lead: spawn_teammate, send_message, request_shutdown, review_plan.
Teammate: send_message, submit_plan.
The sender is always the caller's identity (`ToolContext.identity`), never an argument.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field

from agent17.claims import ToolContext
from agent17.inputs import Name, RequiredText, StrictInput, Text
from agent17.team.protocol import RequestId, TeamProtocol
from agent17.team.registry import TeamCode, TeamError, TeamRegistry
from agent17.team.teammate import Teammate
from agent17.tools.base import AnyTool, ToolDefinition


class TeamView(Protocol):
    """What the team tools need to know of a team: its Lead, its protocol, its members."""

    @property
    def lead_name(self) -> str: ...

    @property
    def protocol(self) -> TeamProtocol: ...

    @property
    def registry(self) -> TeamRegistry: ...


class LeadTeamView(TeamView, Protocol):
    """The Lead's view of a team: it can also spawn teammates."""

    def spawn(self, name: str) -> Teammate: ...


class SpawnTeammateInput(StrictInput):
    """Arguments of spawn_teammate."""

    name: Name = Field(
        description="The new teammate's name: lowercase letters, digits, _ or -, unique."
    )


class SendMessageInput(StrictInput):
    """Arguments of send_message."""

    to: Name = Field(description="The recipient: the Lead or a teammate's name.")
    content: RequiredText = Field(description="The message text.")


class RequestShutdownInput(StrictInput):
    """Arguments of request_shutdown."""

    name: Name = Field(description="The teammate to ask to shut down.")


class ReviewPlanInput(StrictInput):
    """Arguments of review_plan."""

    request_id: RequestId = Field(description="The request_id of the submitted plan.")
    approve: bool = Field(description="True to approve the plan, false to reject it.")
    feedback: Text = Field(default="", description="Why, or what to change.")


class SubmitPlanInput(StrictInput):
    """Arguments of submit_plan."""

    plan: RequiredText = Field(description="What you intend to do, step by step.")


def _recipient_check(team: TeamView, sender: str, to: str) -> None:
    if to == sender:
        raise TeamError(TeamCode.INVALID_RECIPIENT, "you cannot send a message to yourself")
    if to == team.lead_name:
        return
    member = team.registry.member(to)
    if member is None:
        known = ", ".join((team.lead_name, *(m.name for m in team.registry.members())))
        raise TeamError(TeamCode.UNKNOWN_RECIPIENT, f"no agent called {to!r}; known: {known}")
    if member.state == "closed":
        raise TeamError(TeamCode.TEAMMATE_CLOSED, f"teammate {to!r} has shut down")


def _send_message_tool(runtime: TeamView) -> AnyTool:
    def send(args: SendMessageInput, context: ToolContext) -> dict[str, Any]:
        _recipient_check(runtime, context.identity, args.to)
        envelope = runtime.protocol.send_text(args.to, args.content, sender=context.identity)
        return {"sent": {"to": envelope.recipient, "sequence": envelope.sequence}}

    return ToolDefinition(
        "send_message",
        "Send a text message to the Lead or to a teammate by name.",
        SendMessageInput,
        send,
    )


def lead_team_tool_definitions(
    runtime: LeadTeamView,
) -> tuple[AnyTool, AnyTool, AnyTool, AnyTool]:
    """The Lead's team tools: spawn_teammate, send_message, request_shutdown, review_plan."""

    def spawn(args: SpawnTeammateInput, context: ToolContext) -> dict[str, Any]:
        teammate = runtime.spawn(args.name)
        return {"teammate": {"name": teammate.name}}

    def request_shutdown(args: RequestShutdownInput, context: ToolContext) -> dict[str, Any]:
        member = runtime.registry.member(args.name)
        if member is None:
            raise TeamError(TeamCode.UNKNOWN_TEAMMATE, f"there is no teammate {args.name!r}")
        if member.state == "closed":
            raise TeamError(
                TeamCode.TEAMMATE_CLOSED, f"teammate {args.name!r} has already shut down"
            )
        request = runtime.protocol.request_shutdown(args.name)
        return {"shutdown_request": {"to": args.name, "request_id": request.request_id}}

    def review_plan(args: ReviewPlanInput, context: ToolContext) -> dict[str, Any]:
        response = runtime.protocol.review_plan(
            args.request_id, approve=args.approve, feedback=args.feedback
        )
        return {"plan_response": response.model_dump()}

    return (
        ToolDefinition(
            "spawn_teammate",
            "Start a new teammate; it finds ready tasks on the board by itself.",
            SpawnTeammateInput,
            spawn,
        ),
        _send_message_tool(runtime),
        ToolDefinition(
            "request_shutdown",
            "Ask a teammate to shut down; it answers before taking any new task.",
            RequestShutdownInput,
            request_shutdown,
        ),
        ToolDefinition(
            "review_plan",
            "Approve or reject a teammate's submitted plan by its request_id.",
            ReviewPlanInput,
            review_plan,
        ),
    )


def teammate_team_tool_definitions(runtime: TeamView) -> tuple[AnyTool, AnyTool]:
    """A teammate's team tools: send_message, submit_plan."""

    def submit_plan(args: SubmitPlanInput, context: ToolContext) -> dict[str, Any]:
        submission = runtime.protocol.submit_plan(context.identity, args.plan)
        return {"plan": {"request_id": submission.request_id, "status": "pending"}}

    return (
        _send_message_tool(runtime),
        ToolDefinition(
            "submit_plan",
            "Submit your plan to the Lead; you take no new task until it is approved.",
            SubmitPlanInput,
            submit_plan,
        ),
    )
