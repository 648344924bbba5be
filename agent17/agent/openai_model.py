"""OpenAIModel: the real model, through the `openai` SDK's Chat Completions tool calling.

Any OpenAI-compatible server works: set OPENAI_BASE_URL (a local server needs
no key). The model's arguments are never trusted: a string that is not a JSON
object, or that the JSON parser cannot read (a number of thousands of digits,
nesting thousands deep), becomes an `invalid_arguments` tool result for that
call alone, and the tool's own strict input model validates everything else.
A server that fails is retried or refused as model_failures.py decides: every
failure ends as a ModelError.

A reply is bounded. Each try has `timeout_seconds` (120 s unless told) from the
request to the reply's last byte: a server that sends its headers and then
trickles the body is cut off at that deadline, a timeout like any other
(retried, then `model_unavailable`). Its body is read a chunk at a time by
reply_reader.py, every long text in it cut, and the answer is cut to
ANSWER_LIMIT characters: what a teammate keeps, logs and reports to the Lead,
whatever the server sends.

The SDK is imported only where a model is made or called: reading the settings
(and the browser edition, which has no SDK and reaches no server) never loads it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agent17.agent.model_failures import (
    DEFAULT_RETRIES,
    ModelCode,
    ModelError,
    gave_up,
    is_transient,
    model_error,
    pause_before_retry,
)
from agent17.agent.models import Message, ModelReply, ToolCall
from agent17.agent.reply_reader import (
    STRING_LIMIT,
    ReplyReader,
    ReplyTooLarge,
    cut_text,
    was_cut,
)
from agent17.tools.base import AnyTool

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_SECONDS = 120.0
"""How long one try may take, from the request to the reply's last byte."""
T = TypeVar("T")

# The SDK insists on some key; local OpenAI-compatible servers ignore it.
PLACEHOLDER_API_KEY = "not-needed-for-local-server"


class ConfigurationError(ValueError):
    """The real model cannot be configured; the message is one line for the terminal."""


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Validated settings for the real model."""

    model: str
    api_key: str | None = field(repr=False)  # a repr is printed, logged, shown in a traceback
    base_url: str | None = None


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
    if was_cut(raw):
        return {}, f"arguments of over {STRING_LIMIT:,} characters were cut, so none were used"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        return {}, f"arguments are not valid JSON: {error.msg} at position {error.pos}"
    except ValueError as error:  # an integer past Python's limit of digits
        return {}, f"arguments cannot be read: {str(error).split(';')[0]}"
    except RecursionError:
        return {}, "arguments are nested too deeply to be read"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, not {type(value).__name__}"
    return value, None


class OpenAIModel:
    """A Model backed by an OpenAI-compatible Chat Completions endpoint.

    A transient failure is tried again up to `retries` times, after the pauses
    `pause_before_retry` gives, each waited out with `sleep` (tests inject one that
    does not wait). The client's own retries are better off at 0 (`from_config`
    does so): they would multiply with these and wait in a sleep nobody can inject.
    Each try has `timeout_seconds` for the whole reply, and each read of it at
    most as long, whatever timeout the client was built with.
    """

    def __init__(
        self,
        model: str,
        client: openai.OpenAI | None = None,
        *,
        retries: int = DEFAULT_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        if not (math.isfinite(timeout_seconds) and timeout_seconds > 0):
            raise ValueError("timeout_seconds must be a number of seconds more than 0")
        import openai

        self.model = model
        self.client = client if client is not None else openai.OpenAI(max_retries=0)
        self.retries = retries
        self.sleep = sleep
        self.timeout_seconds = timeout_seconds

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str],
        *,
        max_retries: int = DEFAULT_RETRIES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> OpenAIModel:
        """Build the model from OPENAI_API_KEY, OPENAI_BASE_URL and AGENT17_MODEL."""
        return cls.from_config(
            validate_openai_environment(environ),
            max_retries=max_retries,
            timeout_seconds=timeout_seconds,
            sleep=sleep,
        )

    @classmethod
    def from_config(
        cls,
        config: OpenAIConfig,
        *,
        max_retries: int = DEFAULT_RETRIES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> OpenAIModel:
        """Build the model from an already validated configuration (`max_retries`: ours).

        `timeout_seconds`: the deadline of one try, from the request to the reply's last byte.
        """
        import openai

        client = openai.OpenAI(
            api_key=config.api_key or PLACEHOLDER_API_KEY,
            # Explicit, so the mapping given to from_environment is the only source of truth.
            base_url=config.base_url or DEFAULT_BASE_URL,
            max_retries=0,
            timeout=timeout_seconds,
        )
        return cls(
            config.model, client, retries=max_retries, sleep=sleep, timeout_seconds=timeout_seconds
        )

    @property
    def server(self) -> str:
        """The server as messages name it: host and port, never a password in the URL."""
        url = self.client.base_url
        return f"{url.host}:{url.port}" if url.port is not None else str(url.host)

    def complete(self, messages: Sequence[Message], tools: Sequence[AnyTool]) -> ModelReply:
        """One Chat Completions request (retried while it fails transiently); parsed tool calls.

        Raises ModelError when the server refuses the request, is still failing
        after every retry, or answers with something that is no chat completion:
        nothing else of the SDK's escapes.
        """
        tool_params = [
            cast("ChatCompletionToolParam", chat_completion_tool(tool)) for tool in tools
        ]
        text = self._create(list(messages), tool_params)
        try:
            return completion_reply(json.loads(text))
        except (ValueError, RecursionError) as problem:  # JSONDecodeError is a ValueError
            raise self._bad_response(problem) from None

    def _bad_response(self, problem: Exception) -> ModelError:
        said = str(problem)[:200]  # cut short: it may quote a (huge) name the server made up
        return ModelError(
            ModelCode.MODEL_BAD_RESPONSE,
            f"the model server at {self.server} sent no usable chat completion: {said}",
        )

    def _create(self, messages: list[Message], tool_params: list[ChatCompletionToolParam]) -> str:
        import openai

        retry = 0
        while True:
            try:
                return self._exchange(messages, tool_params)
            except openai.APIError as error:
                # `from None`: the SDK's own text may quote the key; ours never does.
                failure = model_error(error, server=self.server, api_key=self.client.api_key)
                if not is_transient(error):
                    raise failure from None
                if retry == self.retries:
                    raise gave_up(failure, retry + 1) from None
                self.sleep(pause_before_retry(retry, error))
                retry += 1

    def _exchange(self, messages: list[Message], tool_params: list[ChatCompletionToolParam]) -> str:
        """One request; the reply's JSON text as ReplyReader keeps it, within the deadline."""
        import httpx2
        import openai

        deadline = time.monotonic() + self.timeout_seconds
        # The body as it streams in: a compatible server's answer is read by our own
        # bounded reader and checks, not trusted to the shape the SDK's types assume.
        with self.client.chat.completions.with_streaming_response.create(
            model=self.model,
            messages=cast("Iterable[ChatCompletionMessageParam]", messages),
            tools=tool_params if tool_params else openai.omit,
            timeout=self.timeout_seconds,
            # A compressed body is inflated a whole network read at a time, whatever
            # its size: uncompressed, each chunk is at most one read.
            extra_headers={"Accept-Encoding": "identity"},
        ) as response:
            request = response.http_response.request
            reader = ReplyReader()
            try:
                for chunk in response.iter_bytes():
                    # Per read, the client's timeout never ends a reply that trickles.
                    if time.monotonic() > deadline:
                        raise openai.APITimeoutError(request=request)
                    reader.feed(chunk)
            except httpx2.TimeoutException:
                raise openai.APITimeoutError(request=request) from None
            except httpx2.TransportError:  # the connection dropped halfway through the body
                raise openai.APIConnectionError(request=request) from None
            except ReplyTooLarge as problem:
                raise self._bad_response(problem) from None
            return reader.text()


def completion_reply(completion: object) -> ModelReply:
    """The reply in a decoded chat completion; ValueError when its shape is unusable.

    Only what a reply needs is checked: the first choice's message, its text,
    and each tool call's id, name and arguments. Arguments that are not a JSON
    object are the model's mistake, not the server's: they become the call's
    `arguments_error`, which the runner answers with `invalid_arguments`.
    """
    choices = _field(completion, "choices", list, "the completion")
    if not choices:
        raise ValueError("it has no choices")
    message = _field(choices[0], "message", dict, "the first choice")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"the message content is {type(content).__name__}, not text")
    calls = [_tool_call(item) for item in _field(message, "tool_calls", list, "the message", [])]
    return ModelReply(None if content is None else cut_text(content), tuple(calls))


def _tool_call(item: object) -> ToolCall:
    call_id = _field(item, "id", str, "a tool call")
    kind = _field(item, "type", str, "a tool call", "function")
    if kind != "function":
        # We only offer function tools; anything else cannot be run.
        named = _field(item, kind, dict, "a tool call", {}).get("name")
        shown = named if isinstance(named, str) and named else kind
        return ToolCall(call_id, shown, {}, "", f"unsupported tool call type {kind!r}")
    function = _field(item, "function", dict, "a tool call")
    name = _field(function, "name", str, "a function call")
    raw = function.get("arguments", "")
    if isinstance(raw, dict):  # some compatible servers send the object itself
        dumped = json.dumps(raw)
        if was_cut(dumped):
            cut = f"a text in the arguments was over {STRING_LIMIT:,} characters and was cut"
            return ToolCall(call_id, name, {}, dumped, cut)
        return ToolCall(call_id, name, raw, dumped)
    if not isinstance(raw, str):
        kind_error = f"arguments must be a JSON string, not {type(raw).__name__}"
        return ToolCall(call_id, name, {}, "", kind_error)
    arguments, problem = parse_tool_arguments(raw)
    return ToolCall(call_id, name, arguments, raw, problem)


_MISSING = object()


def _field(holder: object, key: str, kind: type[T], where: str, default: Any = _MISSING) -> T:
    value = holder.get(key, default) if isinstance(holder, dict) else _MISSING
    if value is None and default is not _MISSING:
        value = default  # an explicit null counts as absent
    if value is _MISSING:
        raise ValueError(f"{where} has no {key!r}")
    if not isinstance(value, kind):
        raise ValueError(f"{where}'s {key!r} is {type(value).__name__}, not {kind.__name__}")
    return value
