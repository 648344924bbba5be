"""What an agent talks to: the Model protocol, its reply, and the offline scripted model.

A model reads the whole conversation (Chat Completions shaped dicts) and the
tools on offer, and answers with text, tool calls, or both. `ScriptedModel`
is a real, deterministic model for the demo and the notebooks: each reply is
computed from the conversation by small rules, and a conversation no rule
expects raises `UnexpectedModelCall` instead of improvising.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent17.tools.base import AnyTool, result_error

Message = dict[str, Any]
"""One Chat Completions message: {"role": "system"|"user"|"assistant"|"tool", ...}."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model wants to run, with its parsed arguments.

    `raw_arguments` is the JSON string the model actually sent (None when the
    call was built in Python); `arguments_error` is set when that string was not
    a JSON object, and the runner then answers `invalid_arguments` without
    running anything.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    arguments_error: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON string that goes back into the conversation."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, sort_keys=True)


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One model answer: optional text and zero or more tool calls."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()


class Model(Protocol):
    """Anything that can answer a conversation: ScriptedModel, OpenAIModel, a test double."""

    def complete(self, messages: Sequence[Message], tools: Sequence[AnyTool]) -> ModelReply:
        """Answer the conversation `messages`, optionally calling some of `tools`."""
        ...


class UnexpectedModelCall(AssertionError):
    """The scripted model met a conversation none of its rules covers (a wiring bug)."""


# ---------------------------------------------------------------------------
# Reading a conversation. The scripts below decide only from what these return.
# ---------------------------------------------------------------------------

AUTO_CLAIMED_TASK = re.compile(r"<auto-claimed-task>(.*?)</auto-claimed-task>", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call made since the last user message, with the result the tool returned."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]

    @property
    def error_code(self) -> str | None:
        """The error code of a refused call, or None when it succeeded."""
        error = result_error(self.result)
        return None if error is None else error[0]


@dataclass(frozen=True, slots=True)
class CurrentTurn:
    """The last user message and every tool outcome that followed it."""

    user_text: str
    is_first_user_message: bool
    outcomes: tuple[ToolOutcome, ...]

    def outcomes_of(self, tool_name: str) -> tuple[ToolOutcome, ...]:
        """The outcomes of calls to `tool_name`, in call order."""
        return tuple(outcome for outcome in self.outcomes if outcome.name == tool_name)


def current_turn(messages: Sequence[Message]) -> CurrentTurn:
    """Split off the part of the conversation the model is answering right now."""
    user_indexes = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    if not user_indexes:
        raise UnexpectedModelCall("the conversation has no user message to answer")
    start = user_indexes[-1]
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    outcomes: list[ToolOutcome] = []
    for message in messages[start + 1 :]:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                function = call["function"]
                calls[call["id"]] = (function["name"], _json_object(function["arguments"]))
        elif message.get("role") == "tool":
            if message.get("tool_call_id") not in calls:
                raise UnexpectedModelCall(f"tool result without a matching call: {message!r}")
            name, arguments = calls[message["tool_call_id"]]
            outcomes.append(ToolOutcome(name, arguments, _json_object(message["content"])))
    return CurrentTurn(
        user_text=str(messages[start].get("content") or ""),
        is_first_user_message=len(user_indexes) == 1,
        outcomes=tuple(outcomes),
    )


def auto_claimed_task(user_text: str) -> dict[str, Any] | None:
    """The claim payload inside `<auto-claimed-task>...</auto-claimed-task>`, or None."""
    match = AUTO_CLAIMED_TASK.search(user_text)
    return _json_object(match.group(1)) if match else None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _last_call_number(messages: Sequence[Message]) -> int:
    # The highest `call_<n>` so far, not a count: after a runner forgets old runs,
    # new ids must still differ from the ones it kept.
    numbers = [0]
    for message in messages:
        for call in message.get("tool_calls") or ():
            prefix, _, number = str(call.get("id", "")).partition("_")
            if prefix == "call" and number.isdigit():
                numbers.append(int(number))
    return max(numbers)


# ---------------------------------------------------------------------------
# The scripted model
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a script wants to make (the model gives it a deterministic id)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a rule answers: text, or tool calls made in parallel in one reply."""

    text: str | None = None
    calls: tuple[Call, ...] = ()


ScriptRule = Callable[[CurrentTurn], Reply | None]
"""Looks at the current turn and returns the next reply, or None if it does not apply."""


class ScriptedModel:
    """A deterministic model: the first rule that recognises the current turn answers it.

    Tool call ids are `call_1`, `call_2`, ... counted over the conversation, so
    the same conversation always gets the same reply, ids included.
    """

    def __init__(self, rules: Sequence[ScriptRule], *, name: str = "scripted") -> None:
        self.rules = tuple(rules)
        self.name = name
        self.calls = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[AnyTool]) -> ModelReply:
        """Answer from the first matching rule; fail loudly when none matches."""
        self.calls += 1
        turn = current_turn(messages)
        for rule in self.rules:
            reply = rule(turn)
            if reply is not None:
                return self._to_model_reply(reply, messages, tools)
        raise UnexpectedModelCall(
            f"{self.name} model has no rule for this turn: user said {turn.user_text[:200]!r}, "
            f"then tools {[outcome.name for outcome in turn.outcomes]} ran"
        )

    def _to_model_reply(
        self, reply: Reply, messages: Sequence[Message], tools: Sequence[AnyTool]
    ) -> ModelReply:
        offered = {tool.name for tool in tools}
        first_id = _last_call_number(messages) + 1
        tool_calls = []
        for offset, call in enumerate(reply.calls):
            # A script calling a tool the agent was not given means the wiring is wrong.
            if call.name not in offered:
                raise UnexpectedModelCall(
                    f"{self.name} model wants {call.name!r} but was offered {sorted(offered)}"
                )
            tool_calls.append(
                ToolCall(f"call_{first_id + offset}", call.name, dict(call.arguments))
            )
        return ModelReply(reply.text, tuple(tool_calls))


# ---------------------------------------------------------------------------
# The teammate's script
# ---------------------------------------------------------------------------


def teammate_script(
    *, write_notes: bool = False, work: Callable[[Mapping[str, Any]], None] | None = None
) -> ScriptedModel:
    """A teammate that completes each auto-claimed task (optionally writing a note first).

    `work(task)` runs once per task just before it calls complete_task: the time
    the task takes (a real sleep in a teammate process, simulated time in the demo).
    """

    def work_on_auto_claimed_task(turn: CurrentTurn) -> Reply | None:
        claim = auto_claimed_task(turn.user_text)
        if claim is None:
            return None
        if not isinstance(claim.get("task"), dict) or "claim_token" not in claim:
            raise UnexpectedModelCall(f"malformed auto-claimed task payload: {claim!r}")
        task = claim["task"]
        if write_notes:
            notes = turn.outcomes_of("write_file")
            if not notes:
                content = f"# {task['subject']}\n\n{task['description']}\n"
                return Reply(
                    calls=(Call("write_file", {"path": notes_path(task), "content": content}),)
                )
            if notes[-1].error_code is not None:
                # No retry loop: say what went wrong; the lease will run out.
                return Reply(
                    f"Could not write notes for {task['subject']}: {notes[-1].error_code}."
                )
        completions = turn.outcomes_of("complete_task")
        if not completions:
            if work is not None:
                work(task)
            arguments = {"task_id": task["id"], "claim_token": claim["claim_token"]}
            return Reply(calls=(Call("complete_task", arguments),))
        if completions[-1].error_code is not None:
            return Reply(f"Could not complete {task['subject']}: {completions[-1].error_code}.")
        return Reply(f"Completed {task['subject']}.")

    def acknowledge_note(turn: CurrentTurn) -> Reply | None:
        return Reply("Acknowledged.") if not turn.outcomes else None

    return ScriptedModel([work_on_auto_claimed_task, acknowledge_note], name="teammate")


def notes_path(task: Mapping[str, Any]) -> str:
    """Where the scripted teammate writes its note about a task (relative to the workspace)."""
    return f"notes/{task['id']}.md"


# ---------------------------------------------------------------------------
# The Lead's script
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScriptedTask:
    """A task the scripted Lead creates; `blocked_by_names` name other ScriptedTasks."""

    name: str
    subject: str
    description: str = ""
    blocked_by_names: tuple[str, ...] = ()


def lead_script(tasks: Sequence[ScriptedTask], teammates: Sequence[str]) -> ScriptedModel:
    """A Lead that creates the task graph layer by layer, spawns the teammates, then reports."""
    _check_graph(tasks)
    by_name = {task.name: task for task in tasks}

    def build_the_team(turn: CurrentTurn) -> Reply | None:
        if not turn.is_first_user_message:
            return None
        failed = [outcome for outcome in turn.outcomes if outcome.error_code is not None]
        if failed:
            return Reply(f"Stopped: {failed[0].name} failed with {failed[0].error_code}.")
        # Ids come from the create_task results already in the conversation.
        ids = {
            outcome.result["task"]["subject"]: outcome.result["task"]["id"]
            for outcome in turn.outcomes_of("create_task")
        }
        ready = [
            task
            for task in tasks
            if task.subject not in ids
            and all(by_name[name].subject in ids for name in task.blocked_by_names)
        ]
        if ready:
            return Reply(calls=tuple(_create_call(task, by_name, ids) for task in ready))
        if not turn.outcomes_of("spawn_teammate"):
            return Reply(calls=tuple(Call("spawn_teammate", {"name": name}) for name in teammates))
        return Reply(_board_summary(tasks, teammates))

    def acknowledge_report(turn: CurrentTurn) -> Reply | None:
        return Reply("Noted.") if not turn.outcomes else None

    return ScriptedModel([build_the_team, acknowledge_report], name="lead")


def minimal_scenario_lead_script() -> ScriptedModel:
    """The chapter's Lead: A and B, then C blocked by both; teammates alice and bob."""
    return lead_script(MINIMAL_SCENARIO_TASKS, ("alice", "bob"))


MINIMAL_SCENARIO_TASKS = (
    ScriptedTask("A", "A", "Independent task A."),
    ScriptedTask("B", "B", "Independent task B."),
    ScriptedTask("C", "C", "Needs both A and B.", ("A", "B")),
)


def _create_call(
    task: ScriptedTask, by_name: Mapping[str, ScriptedTask], ids: Mapping[str, str]
) -> Call:
    blocked_by = [ids[by_name[name].subject] for name in task.blocked_by_names]
    arguments: dict[str, Any] = {"subject": task.subject, "description": task.description}
    if blocked_by:
        arguments["blocked_by"] = blocked_by
    return Call("create_task", arguments)


def _board_summary(tasks: Sequence[ScriptedTask], teammates: Sequence[str]) -> str:
    parts = []
    for task in tasks:
        if task.blocked_by_names:
            parts.append(f"{task.subject} (blocked by {', '.join(task.blocked_by_names)})")
        else:
            parts.append(task.subject)
    return (
        f"Created {len(tasks)} tasks: {', '.join(parts)}. "
        f"Started {', '.join(teammates)}; they claim ready work from the board themselves."
    )


def _check_graph(tasks: Sequence[ScriptedTask]) -> None:
    names = [task.name for task in tasks]
    subjects = [task.subject for task in tasks]
    # Ids are looked up by subject, so subjects must be unique too.
    if len(set(names)) != len(names) or len(set(subjects)) != len(subjects):
        raise ValueError("scripted task names and subjects must be unique")
    for task in tasks:
        unknown = set(task.blocked_by_names) - set(names)
        if unknown:
            raise ValueError(f"{task.name} is blocked by unknown tasks {sorted(unknown)}")
    # A cycle would leave tasks that never become creatable: peel layers until stuck.
    remaining = {task.name: set(task.blocked_by_names) for task in tasks}
    while remaining:
        layer = {name for name, deps in remaining.items() if not deps & remaining.keys()}
        if not layer:
            raise ValueError(f"scripted tasks form a cycle among {sorted(remaining)}")
        for name in layer:
            del remaining[name]
