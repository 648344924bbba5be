"""AgentRunner: the loop that lets a model call tools until it answers.

One run: append the user message; ask the model; if it called tools, run each
one (permission policy first for effectful tools, every call audited) and feed
the results back as `tool` messages; repeat until the model answers without
tool calls, or `max_turns` model calls have been made.

The runner never decides that work is done. It runs only the tools the model
calls; a task becomes completed only through an explicit `complete_task` call.
If the model never makes that call, the task's lease simply runs out.

Idempotency. A teammate's run on an auto-claimed task gets that claim's
token as `idempotency_key`. With an `IdempotencyLedger`, the result of every
effectful call (shell, write_file) that actually ran and succeeded is recorded
under (idempotency_key, ordinal, tool name, canonical JSON arguments), where
`ordinal` counts the effectful calls of this run from 0. When a run with the
same key is retried and its n-th effectful call is the same tool with the same
arguments, the recorded result is returned and the tool is not executed again
(audited as "replayed", without asking for approval: nothing will happen).
Not recorded, so always executed: non-effectful tools, calls in runs without a
key, and calls that ended in an error result (a refusal changed nothing, so a
retry may try again). This makes retries of one claim safe for our own tools;
it is not exactly-once for the world: a command that half-ran before a crash
was never recorded and will run again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from agent17.agent.ledger import IdempotencyLedger, LedgerKey
from agent17.agent.models import Message, Model, ModelReply, ToolCall
from agent17.agent.permissions import (
    ApprovalRequest,
    AuditDecision,
    AuditTrail,
    PermissionPolicy,
    teammate_policy,
)
from agent17.claims import ToolContext
from agent17.domain import TaskClaim, TaskError, ToolCode
from agent17.inputs import describe_validation_error
from agent17.tools.base import AnyTool, ToolRegistry, error_result, result_error

DEFAULT_MAX_TURNS = 12

Fence = Callable[[TaskClaim, str], None]
"""Raises a TaskError unless the claim is still live for that identity (owner, token, lease)."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a run: what was asked, what was decided, and what came back."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    decision: AuditDecision
    outcome: str
    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: the final text, model calls used, and every tool call made."""

    final_text: str
    turns: int
    tool_calls: tuple[ToolCallRecord, ...]
    stopped: Literal["answered", "turn_limit"]


# ---------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------


class AgentRunner:
    """Runs one agent's conversation with its model and tools; `.messages` carries over.

    Without a policy, effectful tools are denied (the teammate policy with no approver).
    One runner serves one agent and one run at a time. `history_runs`: keep only
    the system prompt and the last that many runs (None: keep everything).
    """

    def __init__(
        self,
        identity: str,
        model: Model,
        tools: ToolRegistry,
        *,
        system_prompt: str,
        policy: PermissionPolicy | None = None,
        audit: AuditTrail | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        ledger: IdempotencyLedger | None = None,
        fence: Fence | None = None,
        history_runs: int | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if history_runs is not None and history_runs < 1:
            raise ValueError("history_runs must be at least 1")
        self.identity = identity
        self.model = model
        self.tools = tools
        self.policy = policy if policy is not None else teammate_policy()
        self.audit = audit
        self.max_turns = max_turns
        self.ledger = ledger
        self.fence = fence
        self.messages: list[Message] = [{"role": "system", "content": system_prompt}]
        self.history_runs = history_runs
        self._claim: TaskClaim | None = None

    def run(
        self,
        user_text: str,
        *,
        idempotency_key: str | None = None,
        claim: TaskClaim | None = None,
    ) -> RunResult:
        """Give the model `user_text` and run the tools it calls until it answers.

        `claim`: the auto-claimed task this run works on; with a `fence`, every
        effectful call is refused once that claim is no longer live.
        If the model or a tool raises, the conversation is put back as it was
        before this run (no dangling tool calls) and the exception propagates.
        """
        self._forget_old_runs()
        before = len(self.messages)
        self._claim = claim
        try:
            return self._run(user_text, idempotency_key)
        except BaseException:
            del self.messages[before:]
            raise
        finally:
            self._claim = None

    def _forget_old_runs(self) -> None:
        # A teammate process lives for hundreds of tasks, and each task is whole on
        # the board: the board and the mailbox are the team's memory, not the
        # conversation. Unbounded, every task would resend all earlier ones (the
        # prompt grows to the context limit and each call gets slower), so keep the
        # system prompt and the last `history_runs` runs, each one whole.
        if self.history_runs is None:
            return
        starts = [i for i, message in enumerate(self.messages) if message["role"] == "user"]
        keep = self.history_runs - 1  # the run about to start is the last one kept
        if len(starts) > keep:
            cut = starts[len(starts) - keep] if keep else len(self.messages)
            del self.messages[1:cut]

    def _run(self, user_text: str, idempotency_key: str | None) -> RunResult:
        self.messages.append({"role": "user", "content": user_text})
        records: list[ToolCallRecord] = []
        effectful_calls = 0
        for turn in range(1, self.max_turns + 1):
            reply = self.model.complete(self.messages, tuple(self.tools))
            if not reply.tool_calls:
                final_text = reply.text or ""
                self.messages.append({"role": "assistant", "content": final_text})
                return RunResult(final_text, turn, tuple(records), "answered")
            self.messages.append(assistant_message(reply))
            for call in reply.tool_calls:
                tool = self.tools.get(call.name)
                ordinal = None
                if tool is not None and tool.effectful:
                    ordinal, effectful_calls = effectful_calls, effectful_calls + 1
                record = self._run_tool(call, tool, idempotency_key, ordinal)
                records.append(record)
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": json.dumps(record.result, sort_keys=True),
                    }
                )
        final_text = f"Stopped after {self.max_turns} model calls without a final answer."
        return RunResult(final_text, self.max_turns, tuple(records), "turn_limit")

    def _run_tool(
        self,
        call: ToolCall,
        tool: AnyTool | None,
        idempotency_key: str | None,
        ordinal: int | None,
    ) -> ToolCallRecord:
        decision: AuditDecision
        if tool is None:
            decision, result = (
                "refused",
                error_result(ToolCode.UNKNOWN_TOOL, f"no tool {call.name!r}"),
            )
        elif call.arguments_error is not None:
            decision, result = (
                "refused",
                error_result(ToolCode.INVALID_ARGUMENTS, call.arguments_error),
            )
        else:
            decision, result = self._decide_and_run(call, tool, idempotency_key, ordinal)
        outcome = _outcome(result)
        if self.audit is not None:
            self.audit.append(
                identity=self.identity,
                tool=call.name,
                arguments=call.arguments,
                decision=decision,
                outcome=outcome,
                idempotency_key=idempotency_key,
            )
        return ToolCallRecord(call.id, call.name, call.arguments, decision, outcome, result)

    def _decide_and_run(
        self, call: ToolCall, tool: AnyTool, idempotency_key: str | None, ordinal: int | None
    ) -> tuple[AuditDecision, dict[str, Any]]:
        # Validate before asking: a human should never be asked to approve garbage.
        try:
            tool.input_model.model_validate(call.arguments)
        except ValidationError as error:
            return "refused", error_result(
                ToolCode.INVALID_ARGUMENTS, describe_validation_error(error)
            )
        key = None
        if self.ledger is not None and idempotency_key is not None and ordinal is not None:
            key = LedgerKey.of(idempotency_key, ordinal, call.name, call.arguments)
            recorded = self.ledger.lookup(key)
            if recorded is not None:
                return "replayed", recorded
        request = ApprovalRequest(self.identity, call.name, dict(call.arguments))
        if self.policy.decide(request, effectful=tool.effectful) == "deny":
            return "deny", error_result(
                ToolCode.PERMISSION_DENIED, f"{self.identity} may not run {call.name} now"
            )
        if tool.effectful and self._claim is not None and self.fence is not None:
            # The fence, as late as possible: after the approval (which may take a
            # human minutes), just before the effect. What it cannot close is the
            # effect itself outliving the lease: hence the idempotency key.
            try:
                self.fence(self._claim, self.identity)
            except TaskError as lost:
                return "fenced", error_result(lost.code, f"{call.name} was not run: {lost.message}")
        context = ToolContext(identity=self.identity, idempotency_key=idempotency_key)
        try:
            result = tool.run(call.arguments, context)
        except Exception:
            # A bug in a tool propagates, but the trail still shows the call was made.
            if self.audit is not None:
                self.audit.append(
                    identity=self.identity,
                    tool=call.name,
                    arguments=call.arguments,
                    decision="allow",
                    outcome="raised",
                    idempotency_key=idempotency_key,
                )
            raise
        if key is not None and self.ledger is not None and _outcome(result) == "ok":
            self.ledger.record(key, result)
        return "allow", result


def assistant_message(reply: ModelReply) -> Message:
    """A reply with tool calls, as the Chat Completions assistant message that records it."""
    return {
        "role": "assistant",
        "content": reply.text,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.tool_calls
        ],
    }


def _outcome(result: Mapping[str, Any]) -> str:
    error = result_error(result)
    return "ok" if error is None else error[0]
