"""The input rules as pydantic types, for every boundary that parses untrusted JSON.

A model's tool arguments and a message body read back from disk are parsed
with these, so a lone surrogate, a NUL in a name, a non-canonical id or an
unknown field is refused the same way everywhere, with a short reason a
model can read (`describe_validation_error`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from agent17.domain import CANONICAL_UUID, name_problem, preview, text_problem


def _valid_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"a name {problem}")
    return value


def _valid_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"text {problem}")
    return value


def _valid_required_text(value: str) -> str:
    problem = text_problem(value, required=True)
    if problem is not None:
        raise ValueError(f"text {problem}")
    return value


Name = Annotated[str, AfterValidator(_valid_name)]
"""An agent name: 1-200 characters, a non-space, no control characters, valid Unicode."""

Text = Annotated[str, AfterValidator(_valid_text)]
"""Any valid Unicode text without NUL (may be empty)."""

RequiredText = Annotated[str, AfterValidator(_valid_required_text)]
"""Text with at least one character that is not a space (a subject, a message, a plan)."""

Uuid = Annotated[
    str,
    Field(
        pattern=CANONICAL_UUID.pattern,
        description="A canonical UUID: lowercase, hyphenated, 36 characters.",
    ),
]
"""A task id, claim token or request id: a canonical UUID string."""


class StrictInput(BaseModel):
    """Base of every input model: unknown fields (such as `owner`) are refused, types exact."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def describe_validation_error(error: ValidationError, limit: int = 5) -> str:
    """A short, model-readable account of what was wrong (never echoing the raw input)."""
    parts = []
    for item in error.errors(include_url=False, include_input=False)[:limit]:
        where = ".".join(_location(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    extra = error.error_count() - limit
    if extra > 0:
        parts.append(f"and {extra} more")
    return "; ".join(parts)


def _location(part: str | int) -> str:
    # A key is the model's own text: print it only if it is a plain short name.
    if isinstance(part, int) or (part.isascii() and part.isidentifier() and len(part) <= 40):
        return str(part)
    return preview(part, 40)
