"""OpenAIModel through the real `openai` SDK against a real local Chat Completions server."""

from __future__ import annotations

import builtins
import json
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from chat_server import (
    ChatServer,
    ScriptedResponse,
    always,
    dropped_connection,
    error_response,
    long_text_completion,
    running_chat_server,
    text_completion,
    tool_call_completion,
    trickled,
)

from agent17.agent.model_failures import (
    DEFAULT_RETRIES,
    LONGEST_PAUSE_SECONDS,
    LONGEST_RETRY_AFTER_SECONDS,
    ModelError,
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
from agent17.agent.reply_reader import ANSWER_LIMIT, STRING_LIMIT
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


WITHOUT_THE_SDK = r"""
import sys
sys.modules["openai"] = None  # as in the browser edition, which ships no openai
import agent17
from agent17.agent.openai_model import OpenAIConfig, OpenAIModel, validate_openai_environment
print(validate_openai_environment({"OPENAI_API_KEY": "k"}).model)
try:
    OpenAIModel.from_config(OpenAIConfig("m", "k"))
except ImportError:
    print("making a model needs the SDK")
"""


def test_reading_the_settings_needs_no_sdk_only_making_a_model_does() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_SDK],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout.splitlines() == [DEFAULT_MODEL, "making a model needs the SDK"], done.stderr


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


def test_a_server_that_keeps_failing_is_retried_then_stops_the_run_with_a_coded_error(
    server: ChatServer,
) -> None:
    pauses: list[float] = []
    server.respond_with(*[error_response(500, "boom")] * (DEFAULT_RETRIES + 1))
    model = OpenAIModel("m", sdk_model(server).client, sleep=pauses.append)
    runner = AgentRunner("alice", model, echo_registry([]), system_prompt="S")
    with pytest.raises(ModelError) as raised:
        runner.run("go")
    assert raised.value.code == "model_unavailable"
    assert raised.value.message.endswith(
        f"(HTTP 500: boom); gave up after {DEFAULT_RETRIES + 1} tries"
    )
    assert len(server.requests) == DEFAULT_RETRIES + 1
    # Backoff that grows (each pause cut by at most a quarter), never past its cap.
    assert len(pauses) == DEFAULT_RETRIES
    assert all(0.75 * 0.5 * 2**n <= pause <= min(0.5 * 2**n, LONGEST_PAUSE_SECONDS)
               for n, pause in enumerate(pauses))  # fmt: skip
    assert runner.messages == [{"role": "system", "content": "S"}]  # the run left no trace


SECRET_KEY = "sk-test-7Hq2VbN9xLp4RtYw0Zc3"


def keyed_model(server: ChatServer, pauses: list[float]) -> OpenAIModel:
    config = OpenAIConfig("test-model", SECRET_KEY, server.url)
    return OpenAIModel.from_config(config, sleep=pauses.append)


@pytest.mark.parametrize(
    ("status", "body_code", "code"),
    [
        (401, None, "model_auth_failed"),
        (403, None, "model_auth_failed"),
        (404, "model_not_found", "model_not_found"),
        (400, None, "model_bad_request"),
        (422, None, "model_bad_request"),
        (429, "insufficient_quota", "model_quota_exceeded"),
    ],
)
def test_a_refusal_stops_at_once_in_one_line_that_never_shows_the_key(
    server: ChatServer, status: int, body_code: str | None, code: str
) -> None:
    pauses: list[float] = []
    # Real servers quote a wrong key back; the line must not.
    said = f"Incorrect API key provided: {SECRET_KEY}.\nYou can find your key at ..."
    server.respond_with(error_response(status, said, code=body_code))
    with pytest.raises(ModelError) as raised:
        keyed_model(server, pauses).complete([{"role": "user", "content": "hi"}], ())
    assert raised.value.code == code
    message = raised.value.message
    assert SECRET_KEY not in message and SECRET_KEY not in repr(raised.value)
    assert f"HTTP {status}" in message and "\n" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert len(server.requests) == 1 and pauses == []  # refused: not asked again
    assert server.headers[0]["authorization"] == f"Bearer {SECRET_KEY}"  # the key was sent


@pytest.mark.parametrize(
    ("failure", "pause"),
    [
        (error_response(500, "boom"), None),
        (error_response(503, "restarting", retry_after="0"), 0.0),
        (error_response(429, "slow down", retry_after="7"), 7.0),
        (error_response(429, "slow down", retry_after="3600"), LONGEST_RETRY_AFTER_SECONDS),
        (error_response(408, "too slow"), None),
        (dropped_connection(), None),
    ],
)
def test_a_transient_failure_is_retried_and_the_next_good_answer_is_the_reply(
    server: ChatServer, failure: ScriptedResponse, pause: float | None
) -> None:
    pauses: list[float] = []
    server.respond_with(failure, failure, text_completion("made it"))
    reply = keyed_model(server, pauses).complete([{"role": "user", "content": "hi"}], ())
    assert reply.text == "made it"
    assert len(server.requests) == 3
    assert server.requests[0] == server.requests[2]  # the same request, asked again
    if pause is not None:
        assert pauses == [pause, pause]  # the server's Retry-After, capped
    else:
        assert len(pauses) == 2 and 0 < pauses[0] < pauses[1] <= LONGEST_PAUSE_SECONDS


def test_a_server_that_never_answers_times_out_and_is_retried() -> None:
    released = threading.Event()

    def hang(body: dict[str, Any]) -> ScriptedResponse:
        released.wait(30)
        return text_completion("too late")

    with running_chat_server(hang) as server:
        try:
            config = OpenAIConfig("m", None, server.url)
            model = OpenAIModel.from_config(
                config, max_retries=1, timeout_seconds=0.3, sleep=lambda seconds: None
            )
            with pytest.raises(ModelError) as raised:
                model.complete([{"role": "user", "content": "hi"}], ())
        finally:
            released.set()
    assert raised.value.code == "model_unavailable"
    assert "did not answer in time; gave up after 2 tries" in raised.value.message
    assert len(server.requests) == 2


def _completion_body(message: Any) -> ScriptedResponse:
    return ScriptedResponse(
        200, {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (ScriptedResponse(200, None, raw=b"<html>502 Bad Gateway</html>"), "Expecting value"),
        (ScriptedResponse(200, [1, 2]), "the completion has no 'choices'"),
        (ScriptedResponse(200, {"choices": None}), "'choices' is NoneType"),
        (ScriptedResponse(200, {"choices": []}), "it has no choices"),
        (ScriptedResponse(200, {"choices": [{"index": 0}]}), "the first choice has no 'message'"),
        (_completion_body({"role": "assistant", "content": 5}), "content is int, not text"),
        (
            _completion_body({"tool_calls": [{"id": "c", "type": "function"}]}),
            "a tool call has no 'function'",
        ),
        (
            _completion_body(
                {"tool_calls": [{"id": "c", "function": {"name": None, "arguments": "{}"}}]}
            ),
            "'name' is NoneType, not str",
        ),
        (
            _completion_body({"tool_calls": [{"type": "function", "function": {"name": "e"}}]}),
            "a tool call has no 'id'",
        ),
        (_completion_body({"tool_calls": "echo"}), "'tool_calls' is str, not list"),
    ],
)
def test_an_answer_that_is_no_chat_completion_is_a_coded_error_not_a_crash(
    server: ChatServer, answer: ScriptedResponse, problem: str
) -> None:
    server.respond_with(answer)
    runner = AgentRunner("alice", sdk_model(server), echo_registry([]), system_prompt="S")
    with pytest.raises(ModelError) as raised:
        runner.run("go")
    assert raised.value.code == "model_bad_response"
    assert problem in raised.value.message
    assert len(server.requests) == 1


def test_arguments_sent_as_an_object_or_a_non_string_reach_the_runner_checked(
    server: ChatServer,
) -> None:
    ran: list[str] = []
    server.respond_with(
        _completion_body(
            {"content": None, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "echo",
                                                             "arguments": {"text": "hi"}}},
                {"id": "b", "type": "function", "function": {"name": "echo", "arguments": 7}},
                {"id": "c", "type": "custom", "custom": {"name": "echo", "input": "x"}},
            ]}
        ),
        text_completion("done"),
    )  # fmt: skip
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")
    result = runner.run("go")
    assert ran == ["hi"]
    assert [call.outcome for call in result.tool_calls] == [
        "ok", "invalid_arguments", "invalid_arguments",
    ]  # fmt: skip
    echoed = server.requests[1]["messages"][2]["tool_calls"]
    assert [call["function"]["arguments"] for call in echoed] == ['{"text": "hi"}', "", ""]


def test_retries_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="retries"):
        OpenAIModel("m", openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), retries=-1)


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf")])
def test_the_timeout_is_a_number_of_seconds_more_than_0(seconds: float) -> None:
    client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="timeout_seconds"):
        OpenAIModel("m", client, timeout_seconds=seconds)


def test_a_server_down_for_good_is_asked_a_bounded_number_of_times() -> None:
    with running_chat_server(always(error_response(502, "bad gateway"))) as server:
        model = OpenAIModel.from_config(
            OpenAIConfig("m", None, server.url), max_retries=2, sleep=lambda seconds: None
        )
        with pytest.raises(ModelError, match="gave up after 3 tries"):
            model.complete([{"role": "user", "content": "hi"}], ())
    assert len(server.requests) == 3


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


# --- a reply is bounded: in time, in size, and one bad call is that call's alone ------------


def test_a_reply_that_trickles_after_its_headers_is_cut_off_at_the_deadline() -> None:
    # Every read gets a byte within 0.02 s, so no read ever times out: only a deadline
    # on the whole reply can end it. The whole body would take about 6 s.
    slow = trickled(text_completion("too slow"), every=0.02)
    with running_chat_server(always(slow)) as server:
        config = OpenAIConfig("m", None, server.url)
        model = OpenAIModel.from_config(
            config, max_retries=1, timeout_seconds=1.0, sleep=lambda seconds: None
        )
        with pytest.raises(ModelError) as raised:
            model.complete([{"role": "user", "content": "hi"}], ())
        deadline = time.monotonic() + 30  # the server notices the hang-up at its next byte
        while len(server.sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert raised.value.code == "model_unavailable"
    assert "did not answer in time; gave up after 2 tries" in raised.value.message
    assert len(server.requests) == 2
    assert [sent < length for sent, length in server.sent] == [True, True], server.sent


def test_a_huge_answer_is_cut_with_a_note_and_read_in_memory_that_does_not_grow_with_it(
    server: ChatServer,
) -> None:
    characters = 50_000_000
    server.respond_with(text_completion("warm"), long_text_completion(characters))
    model = sdk_model(server)
    model.complete([{"role": "user", "content": "hi"}], ())  # the SDK's first-call imports
    tracemalloc.start()
    try:
        reply = model.complete([{"role": "user", "content": "hi"}], ())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        reply.text
        == "x" * ANSWER_LIMIT + f" [... cut: {characters - ANSWER_LIMIT:,} more characters]"
    )
    # What is kept of one string (ASCII: a byte a character), a few times over: the
    # pieces, their join, the parse. Read whole, the reply alone was 50 MB.
    assert peak < 5 * STRING_LIMIT, f"{peak:,} bytes at the peak"


def test_arguments_the_json_parser_cannot_read_are_that_calls_invalid_arguments_alone(
    server: ChatServer,
) -> None:
    ran: list[str] = []
    server.respond_with(
        tool_call_completion(
            [
                ("call_long", "echo", '{"text": ' + "9" * 5_000 + "}"),  # past int()'s 4,300 digits
                ("call_deep", "echo", '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}"),
                ("call_fine", "echo", '{"text": "still here"}'),
            ]
        ),
        text_completion("done"),
    )
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")

    result = runner.run("go")

    assert ran == ["still here"]
    assert [(call.call_id, call.outcome) for call in result.tool_calls] == [
        ("call_long", "invalid_arguments"),
        ("call_deep", "invalid_arguments"),
        ("call_fine", "ok"),
    ]
    answers = {
        message["tool_call_id"]: json.loads(message["content"])
        for message in server.requests[1]["messages"]
        if message["role"] == "tool"
    }
    assert "5000 digits" in answers["call_long"]["error"]["message"]
    assert "nested too deeply" in answers["call_deep"]["error"]["message"]
    assert answers["call_fine"] == {"by": "alice", "echo": "still here"}
    assert result.final_text == "done"


@pytest.mark.parametrize("as_object", [False, True], ids=["a JSON string", "an object"])
def test_arguments_cut_for_length_are_refused_saying_so(
    server: ChatServer, as_object: bool
) -> None:
    ran: list[str] = []
    text = "y" * (STRING_LIMIT + 1)
    call: dict[str, Any] = {"id": "call_a", "type": "function", "function": {"name": "echo"}}
    call["function"]["arguments"] = {"text": text} if as_object else json.dumps({"text": text})
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    server.respond_with(_completion_body(message), text_completion("ok"))
    runner = AgentRunner("alice", sdk_model(server), echo_registry(ran), system_prompt="S")

    result = runner.run("go")

    assert ran == []
    assert result.tool_calls[0].outcome == "invalid_arguments"
    answer = json.loads(server.requests[1]["messages"][-1]["content"])
    assert f"{STRING_LIMIT:,} characters" in answer["error"]["message"]
    assert "cut" in answer["error"]["message"]
