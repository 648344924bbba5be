"""OpenAIModel: the real model, through the `openai` SDK's Chat Completions tool calling.

Any OpenAI-compatible server works: set OPENAI_BASE_URL (a local server needs
no key). The model's arguments are never trusted: a string that is not a JSON
object becomes an `invalid_arguments` tool result, and the tool's own strict
input model validates everything else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from agent17.agent.models import Message, ModelReply, ToolCall
from agent17.tools.base import AnyTool

DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The SDK insists on some key; local OpenAI-compatible servers ignore it.
PLACEHOLDER_API_KEY = "not-needed-for-local-server"


class ConfigurationError(ValueError):
    """The real model cannot be configured; the message is one line for the terminal."""


class ModelResponseError(RuntimeError):
    """The server answered with something that is not a usable chat completion."""


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Validated settings for the real model."""

    model: str
    api_key: str | None
    base_url: str | None


def validate_openai_environment(environ: Mapping[str, str]) -> OpenAIConfig:
    """Read OPENAI_API_KEY, OPENAI_BASE_URL and AGENT17_MODEL; touches no file and no network."""
    api_key = environ.get("OPENAI_API_KEY", "").strip() or None
    base_url = environ.get("OPENAI_BASE_URL", "").strip() or None
    if api_key is None and base_url is None:
        raise ConfigurationError(
            "no model configured: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local "
            "OpenAI-compatible server (AGENT17_MODEL picks the model)"
        )
    model = environ.get("AGENT17_MODEL", "").strip() or DEFAULT_MODEL
    return OpenAIConfig(model=model, api_key=api_key, base_url=base_url)


def chat_completion_tool(tool: AnyTool) -> dict[str, Any]:
    """A tool as Chat Completions expects it: a function with an object parameters schema."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": object_schema(tool.parameters_schema()),
        },
    }


def object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Make a pydantic JSON schema an explicit, closed object schema.

    Chat Completions wants `type: object` with `properties`, and we also send
    `required` and `additionalProperties: false` so that a model sees the same
    strictness the input model enforces (an `owner` argument is never valid).
    """
    result = {key: value for key, value in schema.items() if key != "title"}
    result["type"] = "object"
    result["properties"] = dict(result.get("properties", {}))
    result["required"] = list(result.get("required", []))
    result["additionalProperties"] = False
    return result


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parsed arguments and None, or an empty dict and why the string was unusable.

    An empty string counts as no arguments: some compatible servers send it for
    tools without parameters.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return {}, f"arguments are not valid JSON: {error.msg} at position {error.pos}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, not {type(value).__name__}"
    return value, None


class OpenAIModel:
    """A Model backed by an OpenAI-compatible Chat Completions endpoint."""

    def __init__(self, model: str, client: openai.OpenAI | None = None) -> None:
        self.model = model
        self.client = client if client is not None else openai.OpenAI()

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str], *, max_retries: int = 2, timeout_seconds: float = 120.0
    ) -> OpenAIModel:
        """Build the model from OPENAI_API_KEY, OPENAI_BASE_URL and AGENT17_MODEL."""
        return cls.from_config(
            validate_openai_environment(environ),
            max_retries=max_retries,
            timeout_seconds=timeout_seconds,
        )

    @classmethod
    def from_config(
        cls, config: OpenAIConfig, *, max_retries: int = 2, timeout_seconds: float = 120.0
    ) -> OpenAIModel:
        """Build the model from an already validated configuration."""
        client = openai.OpenAI(
            api_key=config.api_key or PLACEHOLDER_API_KEY,
            # Explicit, so the mapping given to from_environment is the only source of truth.
            base_url=config.base_url or DEFAULT_BASE_URL,
            max_retries=max_retries,
            timeout=timeout_seconds,
        )
        return cls(config.model, client)

    def complete(self, messages: Sequence[Message], tools: Sequence[AnyTool]) -> ModelReply:
        """One Chat Completions request; tool calls come back with parsed arguments."""
        tool_params = [cast(ChatCompletionToolParam, chat_completion_tool(tool)) for tool in tools]
        response = self.client.chat.completions.create(
            model=self.model,
            messages=cast(Iterable[ChatCompletionMessageParam], list(messages)),
            tools=tool_params if tool_params else openai.omit,
        )
        if not response.choices:
            raise ModelResponseError("the chat completion has no choices")
        message = response.choices[0].message
        calls = []
        for tool_call in message.tool_calls or ():
            if tool_call.type == "function":
                name, raw = tool_call.function.name, tool_call.function.arguments
                arguments, problem = parse_tool_arguments(raw)
            else:
                # We only offer function tools; anything else cannot be run.
                name, raw = tool_call.custom.name, tool_call.custom.input
                arguments, problem = {}, f"unsupported tool call type {tool_call.type!r}"
            calls.append(ToolCall(tool_call.id, name, arguments, raw, problem))
        return ModelReply(message.content, tuple(calls))
