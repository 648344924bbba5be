"""Hostile JSON into every tool: the answer is always a JSON result or a coded error.

A model's arguments are arbitrary JSON: lone surrogates (which no UTF-8 body
can carry), NUL, huge strings, deep nesting, wrong types, unknown keys. Each
tool's `run` must answer with something that encodes as UTF-8 JSON, whose
error, if any, has a string code and message; it must never raise and never
store something half-written.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent17 import TaskStatus, ToolContext
from agent17.agent.models import lead_script, teammate_script
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.tools.base import AnyTool, result_error

# Every character, lone surrogates and NUL included, and some that matter here.
ANY_CHARACTER = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)
TRICKY = st.sampled_from(
    ["", " ", "\x00", "\ud800", "a\udfffb", "\u202e", "../../etc/passwd", ".agent_tutorial/x"]
)
TEXT = st.one_of(st.text(ANY_CHARACTER, max_size=40), TRICKY, st.just("x" * 200_000))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
DEEP = st.integers(min_value=1, max_value=60).map(
    lambda depth: json.loads("[" * depth + "]" * depth)
)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Any:
    workspace = tmp_path_factory.mktemp("hostile")
    built = build_team(
        TeamSettings(
            workspace=workspace,
            lead_model=lead_script((), ("alice",)),
            teammate_model=lambda name: teammate_script(),
            clock=ManualClock(),
            new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71),
            new_request_id=uuid_sequence(99),
            persistent_audit=False,
        )
    )
    built.teammates.spawn("alice")
    a = built.store.create_task("A")
    built.store.create_task("B", blocked_by=[a.id])
    yield built
    built.close()


def _all_tools(team: Team) -> dict[str, tuple[AnyTool, str]]:
    """Every tool any role is offered, with the identity that calls it."""
    tools: dict[str, tuple[AnyTool, str]] = {}
    for tool in team.lead.tools:
        tools[f"lead.{tool.name}"] = (tool, "lead")
    alice = team.teammates.teammate("alice").agent
    for tool in alice.tools:  # type: ignore[attr-defined]
        if tool.name == "shell":
            # Validation is what is under test; never run generated commands as root.
            tool = dataclasses.replace(
                tool, handler=lambda args, ctx: {"would_run": len(args.command)}
            )
        tools[f"alice.{tool.name}"] = (tool, "alice")
    return tools


def _arguments(tool: AnyTool) -> st.SearchStrategy[Any]:
    properties = list(tool.parameters_schema().get("properties", {}))
    known = st.fixed_dictionaries({}, optional={name: st.one_of(JSON, DEEP) for name in properties})
    return st.one_of(
        known,
        st.builds(
            lambda base, extra: {**base, **extra}, known, st.dictionaries(TEXT, JSON, max_size=2)
        ),
        JSON,
    )


def _check(result: Any) -> None:
    assert isinstance(result, dict)
    # Must travel as a UTF-8 JSON body to a real model: no surrogate may survive.
    json.dumps(result, ensure_ascii=False, allow_nan=False).encode("utf-8")
    error = result_error(result)
    if "error" in result:
        assert error is not None and set(result) == {"error"}
        code, message = error
        assert code and code.replace("_", "").isalpha() and code == code.lower()
        assert isinstance(message, str) and len(message) < 5_000


TOOL_NAMES = [
    "lead.create_task",
    "lead.get_task",
    "lead.list_tasks",
    "lead.claim_task",
    "lead.complete_task",
    "lead.spawn_teammate",
    "lead.send_message",
    "lead.request_shutdown",
    "lead.review_plan",
    "alice.shell",
    "alice.read_file",
    "alice.write_file",
    "alice.send_message",
    "alice.submit_plan",
    "alice.get_task",
    "alice.list_tasks",
    "alice.claim_task",
    "alice.complete_task",
]


def test_the_hostile_input_test_covers_every_tool_of_every_role(team: Team) -> None:
    assert sorted(_all_tools(team)) == sorted(TOOL_NAMES)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_any_json_into_a_tool_gives_a_json_result_or_a_coded_error(team: Team, name: str) -> None:
    tool, identity = _all_tools(team)[name]
    context = ToolContext(identity=identity)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(arguments=_arguments(tool))
    def run_it(arguments: Any) -> None:
        mapping = arguments if isinstance(arguments, dict) else {"value": arguments}
        _check(tool.run(mapping, context))

    run_it()
    # Whatever was thrown at it, the board is still whole and readable.
    assert all(task.status in set(TaskStatus) for task in team.store.list_tasks())


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        ("lead.create_task", {"subject": "A\ud800"}, "invalid_arguments"),
        ("lead.create_task", {"subject": "A", "description": "nul\x00"}, "invalid_arguments"),
        ("lead.create_task", {"subject": "A", "owner": "mallory"}, "invalid_arguments"),
        ("lead.send_message", {"to": "\x00alice", "content": "hi"}, "invalid_arguments"),
        ("lead.send_message", {"to": "alice", "content": "half \udc00"}, "invalid_arguments"),
        (
            "lead.review_plan",
            {"request_id": "x", "approve": True, "feedback": "\ud800"},
            "invalid_arguments",
        ),
        ("alice.write_file", {"path": "notes.md", "content": "\ud83d"}, "invalid_arguments"),
        ("alice.write_file", {"path": "a\x00b", "content": ""}, "invalid_arguments"),
        ("alice.shell", {"command": "echo \x00"}, "invalid_arguments"),
        ("alice.submit_plan", {"plan": "step \udfff"}, "invalid_arguments"),
        ("alice.read_file", {"path": ".agent_tutorial/tasks.sqlite3"}, "protected_path"),
    ],
    ids=repr,
)
def test_each_bad_input_is_refused_with_its_code(
    team: Team, name: str, arguments: dict[str, Any], code: str
) -> None:
    tool, identity = _all_tools(team)[name]
    before = team.store.events()
    result = tool.run(arguments, ToolContext(identity=identity))
    _check(result)
    assert result_error(result) is not None and result_error(result)[0] == code  # type: ignore[index]
    assert team.store.events() == before


def test_a_refused_write_leaves_no_file_behind(team: Team, tmp_path: Path) -> None:
    tool, _ = _all_tools(team)["alice.write_file"]
    workspace = team.store.workspace
    before = sorted(
        str(path) for path in workspace.rglob("*") if ".agent_tutorial" not in str(path)
    )
    result = tool.run({"path": "new/notes.md", "content": "half \ud800"}, ToolContext("alice"))
    assert result_error(result) is not None
    after = sorted(str(path) for path in workspace.rglob("*") if ".agent_tutorial" not in str(path))
    assert after == before


@pytest.mark.parametrize("arguments", [None, [], [("path", "x")], "abc", 5, 1.5, True], ids=repr)
def test_arguments_that_are_not_a_json_object_are_invalid_arguments_for_every_tool(
    team: Team, arguments: Any
) -> None:
    before = team.store.events()
    for name, (tool, identity) in _all_tools(team).items():
        result = tool.run(arguments, ToolContext(identity=identity))
        _check(result)
        assert result_error(result) == (
            "invalid_arguments",
            f"arguments must be a JSON object, not {type(arguments).__name__}",
        ), name
    assert team.store.events() == before
