"""OpenAIModel through the real `openai` SDK against a real local Chat Completions server."""

from __future__ import annotations

import builtins
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from chat_server import (
    ChatServer,
    error_response,
    running_chat_server,
    text_completion,
    tool_call_completion,
)

from agent17.agent.openai_model import (
    DEFAULT_MODEL,
    PLACEHOLDER_API_KEY,
    ConfigurationError,
    OpenAIConfig,
    OpenAIModel,
    object_schema,
    validate_openai_environment,
)
from agent17.agent.runner import AgentRunner
from agent17.claims import DirectTaskClaimService, ToolContext
from agent17.inputs import StrictInput
from agent17.store.sqlite import SqliteTaskStore
from agent17.tools.base import ToolDefinition, ToolRegistry
from agent17.tools.task_tools import leased_task_tool_definitions


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with running_chat_server() as running:
        yield running
        assert running.pending == 0, "a scripted response was never requested"


def sdk_model(server: ChatServer, model: str = "test-model") -> OpenAIModel:
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
    return OpenAIModel(model, client)


class EchoInput(StrictInput):
    text: str


def echo_registry(ran: list[str]) -> ToolRegistry:
    def echo(args: EchoInput, context: ToolContext) -> dict[str, Any]:
        ran.append(args.text)
        return {"echo": args.text, "by": context.identity}

    return ToolRegistry([ToolDefinition("echo", "Echo text back.", EchoInput, echo)])


# --- configuration ---------------------------------------------------------------------


def test_no_key_and_no_base_url_is_a_one_line_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as raised:
        validate_openai_environment({"AGENT17_MODEL": "m", "OPENAI_API_KEY": "  "})
    message = str(raised.value)
    assert "OPENAI_API_KEY" in message and "OPENAI_BASE_URL" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"OPENAI_API_KEY": "sk-1"}, OpenAIConfig(DEFAULT_MODEL, "sk-1", None)),
        (
            {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "AGENT17_MODEL": "qwen"},
            OpenAIConfig("qwen", None, "http://127.0.0.1:8000/v1"),
        ),
        (
            {"OPENAI_API_KEY": "sk-1", "OPENAI_BASE_URL": "http://x/v1", "AGENT17_MODEL": ""},
            OpenAIConfig(DEFAULT_MODEL, "sk-1", "http://x/v1"),
        ),
    ],
)
def test_the_environment_becomes_a_config(environ: dict[str, str], expected: OpenAIConfig) -> None:
    assert validate_openai_environment(environ) == expected


def test_validation_touches_neither_files_nor_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("validation must not do I/O")

    monkeypatch.setattr(builtins, "open", forbidden)
    monkeypatch.setattr(socket, "socket", forbidden)
    with pytest.raises(ConfigurationError):
        validate_openai_environment({})
    assert validate_openai_environment({"OPENAI_API_KEY": "k"}).api_key == "k"


def test_a_base_url_alone_reaches_a_local_server_with_a_placeholder_key(
    server: ChatServer,
) -> None:
    model = OpenAIModel.from_environment(
        {"OPENAI_BASE_URL": server.url, "AGENT17_MODEL": "local-model"}, max_retries=0
    )
    server.respond_with(text_completion("hello"))
    reply = model.complete([{"role": "user", "content": "hi"}], ())
    assert reply.text == "hello" and reply.tool_calls == ()
    assert server.requests[0]["model"] == "local-model"
    assert server.headers[0]["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    # No tools offered: the request carries no tools field at all.
    assert "tools" not in server.requests[0]


# --- tool calling ----------------------------------------------------------------------


def test_a_tool_call_round_trip_through_the_runner(server: ChatServer) -> None:
    ran: list[str] = []
    server.respond_with(
        tool_call_completion([("call_a", "echo", '{"text": "hi"}')], text="Echoing."),
        text_completion("All done."),
    )
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")

    result = runner.run("please echo hi")

    assert (result.final_text, result.stopped, ran) == ("All done.", "answered", ["hi"])
    first, second = server.requests
    assert first["messages"] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "please echo hi"},
    ]
    assert first["tools"][0]["function"]["name"] == "echo"
    assistant, tool_message = second["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": "Echoing.",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "hi"}'},
            }
        ],
    }
    assert tool_message == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": json.dumps({"by": "alice", "echo": "hi"}, sort_keys=True),
    }


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"text"', "null"])
def test_malformed_arguments_become_an_invalid_arguments_result(
    server: ChatServer, raw: str
) -> None:
    ran: list[str] = []
    server.respond_with(
        tool_call_completion([("call_a", "echo", raw)]), text_completion("I will stop.")
    )
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")

    result = runner.run("go")

    assert ran == []
    assert result.tool_calls[0].outcome == "invalid_arguments"
    tool_message = server.requests[1]["messages"][-1]
    assert json.loads(tool_message["content"])["error"]["code"] == "invalid_arguments"
    assert result.final_text == "I will stop."


def test_arguments_of_the_wrong_type_are_caught_by_the_input_model(server: ChatServer) -> None:
    ran: list[str] = []
    server.respond_with(
        tool_call_completion([("call_a", "echo", '{"text": 5, "owner": "mallory"}')]),
        text_completion("ok"),
    )
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")
    assert runner.run("go").tool_calls[0].outcome == "invalid_arguments"
    assert ran == []


def test_an_empty_arguments_string_means_no_arguments(server: ChatServer, tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path) as store:
        tools = ToolRegistry(
            list(leased_task_tool_definitions(store, DirectTaskClaimService(store)))
        )
        server.respond_with(
            tool_call_completion([("call_a", "list_tasks", "")]), text_completion("empty board")
        )
        result = AgentRunner("lead", sdk_model(server), tools, system_prompt="S").run("list")
    assert result.tool_calls[0].result == {"tasks": []}


def test_a_server_error_surfaces_as_an_sdk_exception(server: ChatServer) -> None:
    server.respond_with(error_response(500, "boom"))
    runner = AgentRunner("alice", sdk_model(server), echo_registry([]), system_prompt="S")
    with pytest.raises(openai.InternalServerError):
        runner.run("go")
    assert len(server.requests) == 1


def test_task_tool_schemas_are_closed_objects_with_required_fields(
    server: ChatServer, tmp_path: Path
) -> None:
    with SqliteTaskStore(tmp_path) as store:
        tools = leased_task_tool_definitions(store, DirectTaskClaimService(store))
        server.respond_with(text_completion("nothing to do"))
        sdk_model(server).complete([{"role": "user", "content": "hi"}], tools)
    sent = {tool["function"]["name"]: tool for tool in server.requests[0]["tools"]}
    assert list(sent) == ["create_task", "get_task", "list_tasks", "claim_task", "complete_task"]
    for tool in sent.values():
        assert tool["type"] == "function"
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object"
        assert parameters["additionalProperties"] is False
        assert isinstance(parameters["properties"], dict)
        assert isinstance(parameters["required"], list)
    complete = sent["complete_task"]["function"]["parameters"]
    assert sorted(complete["required"]) == ["claim_token", "task_id"]
    assert "owner" not in complete["properties"]
    assert sent["list_tasks"]["function"]["parameters"]["properties"] == {}
    assert sent["list_tasks"]["function"]["parameters"]["required"] == []


def test_object_schema_closes_an_open_schema_without_changing_the_input() -> None:
    original: dict[str, Any] = {"title": "X", "properties": {"a": {"type": "string"}}}
    closed = object_schema(original)
    assert closed == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": [],
        "additionalProperties": False,
    }
    assert original == {"title": "X", "properties": {"a": {"type": "string"}}}


def test_the_chat_server_stops_listening_after_the_fixture() -> None:
    with running_chat_server() as running:
        host, port = running.url.split("//")[1].split("/")[0].split(":")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()
