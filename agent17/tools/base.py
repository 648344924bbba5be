"""What a tool is: a name, a strict pydantic input model and a `run` that returns JSON.

`run` is the single boundary between a model's arguments and our code:
arguments are validated here, known errors become `{"error": {code, message}}`
and anything unexpected propagates, because a bug must not look like a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agent17.claims import ToolContext
from agent17.domain import Refusal, ToolCode
from agent17.inputs import describe_validation_error


def error_result(code: str, message: str) -> dict[str, Any]:
    """The one shape of a refused tool call."""
    return {"error": {"code": code, "message": message}}


def result_error(result: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (code, message) of a refused call's result, or None for a success: the one reader."""
    error = result.get("error")
    if not isinstance(error, Mapping):
        return None
    return str(error.get("code")), str(error.get("message", ""))


def describe_result(tool: str, result: Mapping[str, Any]) -> str:
    """One line for people: `tool -> ok`, or `tool -> code: message`."""
    error = result_error(result)
    return f"{tool} -> ok" if error is None else f"{tool} -> {error[0]}: {error[1]}"


InputT = TypeVar("InputT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolDefinition(Generic[InputT]):
    """One tool as a model sees it (`name`, `description`, input schema) plus its handler.

    `effectful` marks tools whose calls pass the permission policy (shell, write_file).
    """

    name: str
    description: str
    input_model: type[InputT]
    handler: Callable[[InputT, ToolContext], dict[str, Any]]
    effectful: bool = False

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the input model, as sent to the model."""
        return self.input_model.model_json_schema()

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        """Validate `arguments`, run the tool as `context.identity`, return a JSON-ready dict."""
        if not isinstance(arguments, Mapping):
            # A model's arguments that are JSON but not an object ([], "x", 5, null).
            kind = type(arguments).__name__
            return error_result(
                ToolCode.INVALID_ARGUMENTS, f"arguments must be a JSON object, not {kind}"
            )
        try:
            parsed = self.input_model.model_validate(dict(arguments))
        except ValidationError as error:
            return error_result(ToolCode.INVALID_ARGUMENTS, describe_validation_error(error))
        try:
            return self.handler(parsed, context)
        except Refusal as error:
            return error_result(error.code, error.message)


AnyTool = ToolDefinition[Any]


class ToolRegistry:
    """The tools one agent may call, in registration order; a name is registered once."""

    def __init__(self, tools: tuple[AnyTool, ...] | list[AnyTool] = ()) -> None:
        self._tools: dict[str, AnyTool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: AnyTool) -> None:
        """Add a tool; a second tool with the same name is a wiring bug and is refused."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> AnyTool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in registration order."""
        return tuple(self._tools)

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
