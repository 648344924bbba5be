"""When the model server fails: which failures are worth another try, and one clear line.

A chat completion can fail in two ways that call for opposite answers. A
server that refuses the request (a wrong API key, no such model, a request
it cannot read) will refuse it again: the caller stops at once, with one line
that names the problem. A server that is overloaded, restarting or briefly
unreachable (HTTP 408, 409, 429, 5xx, a dropped connection, a timeout) may
answer the same request a moment later: the caller tries again after a
growing pause, a bounded number of times, then stops with one line too.

Either way the stop is a `ModelError`, a coded Refusal, so a teammate ends
with a line instead of the SDK's traceback; the task it held is left in
progress, to come back to the board when its lease runs out. The API key is
never part of any message, even when the server quotes it back.

Each function here is handed an error the SDK raised, so the SDK is loaded by
then: it is imported there, and importing this module never loads it.
"""

from __future__ import annotations

import math
import random
from enum import StrEnum
from typing import TYPE_CHECKING

from agent17.domain import Refusal

if TYPE_CHECKING:
    import openai

DEFAULT_RETRIES = 4
"""Tries after the first one: with the pauses below about 7.5 s in all before giving up."""
FIRST_PAUSE_SECONDS = 0.5
LONGEST_PAUSE_SECONDS = 8.0
LONGEST_RETRY_AFTER_SECONDS = 60.0
"""A server's Retry-After is obeyed up to this; a longer one would outlive the claim's lease."""
SERVER_TEXT_LIMIT = 300

RETRIED_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx: a timeout, a conflict and rate limiting are worth another try."""


class ModelCode(StrEnum):
    """Why the model server refused a call, or how it kept failing it."""

    MODEL_AUTH_FAILED = "model_auth_failed"  # 401, 403
    MODEL_NOT_FOUND = "model_not_found"  # 404
    MODEL_QUOTA_EXCEEDED = "model_quota_exceeded"  # 429 insufficient_quota: waiting will not help
    MODEL_BAD_REQUEST = "model_bad_request"  # any other 4xx
    MODEL_UNAVAILABLE = "model_unavailable"  # still failing after every retry
    MODEL_BAD_RESPONSE = "model_bad_response"  # an answer that is no usable chat completion


class ModelError(Refusal):
    """The model server refused a call, or kept failing it; `code` (a ModelCode) says which.

    The message is one line and never holds the API key.
    """

    def __init__(self, code: ModelCode, message: str) -> None:
        super().__init__(code, message)


def is_transient(error: openai.APIError) -> bool:
    """True for a failure that the same request may not meet again a moment later."""
    import openai

    if isinstance(error, openai.APIConnectionError):  # timeouts are connection errors too
        return True
    if isinstance(error, openai.APIStatusError):
        if error.status_code == 429 and error.code == "insufficient_quota":
            return False  # OpenAI's "you have no credit left" is a 429 as well
        return error.status_code in RETRIED_STATUSES or error.status_code >= 500
    return False


def model_error(error: openai.APIError, *, server: str, api_key: str | None) -> ModelError:
    """The one-line ModelError that says what `error` means to the person running agent17."""
    import openai

    said = _server_text(error, api_key)
    if isinstance(error, openai.APITimeoutError):
        return ModelError(
            ModelCode.MODEL_UNAVAILABLE, f"the model server at {server} did not answer in time"
        )
    if isinstance(error, openai.APIConnectionError):
        return ModelError(
            ModelCode.MODEL_UNAVAILABLE, f"could not reach the model server at {server}"
        )
    if not isinstance(error, openai.APIStatusError):
        return ModelError(
            ModelCode.MODEL_BAD_RESPONSE,
            f"the model server at {server} sent an answer that is no chat completion{said}",
        )
    status = error.status_code
    http = f"HTTP {status}{said}"
    if status in (401, 403):
        return ModelError(
            ModelCode.MODEL_AUTH_FAILED,
            f"the model server at {server} refused the API key ({http}); check OPENAI_API_KEY"
            " and that the key may use this model",
        )
    if status == 404:
        return ModelError(
            ModelCode.MODEL_NOT_FOUND,
            f"the model server at {server} has no such model or endpoint ({http}); check"
            " AGENT17_MODEL and OPENAI_BASE_URL",
        )
    if status == 429 and not is_transient(error):
        return ModelError(
            ModelCode.MODEL_QUOTA_EXCEEDED,
            f"the model server at {server} says the quota is used up ({http})",
        )
    if is_transient(error):
        return ModelError(
            ModelCode.MODEL_UNAVAILABLE, f"the model server at {server} failed ({http})"
        )
    return ModelError(
        ModelCode.MODEL_BAD_REQUEST, f"the model server at {server} rejected the request ({http})"
    )


def gave_up(last: ModelError, attempts: int) -> ModelError:
    """The stop after `attempts` tries that all failed: how often, and the last failure."""
    return ModelError(ModelCode(last.code), f"{last.message}; gave up after {attempts} tries")


def pause_before_retry(retry: int, error: openai.APIError) -> float:
    """Seconds to wait before retry number `retry` (from 0): the server's word, else backoff.

    Backoff doubles from FIRST_PAUSE_SECONDS up to LONGEST_PAUSE_SECONDS, each pause
    cut by a random quarter at most, so teammates that failed together do not all
    come back at the same instant.
    """
    asked = _retry_after(error)
    if asked is not None:
        return asked
    pause = min(LONGEST_PAUSE_SECONDS, FIRST_PAUSE_SECONDS * 2.0**retry)
    return pause * random.uniform(0.75, 1.0)


def _retry_after(error: openai.APIError) -> float | None:
    import openai

    if not isinstance(error, openai.APIStatusError):
        return None
    headers = error.response.headers
    for header, per_second in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(header, "")) / per_second
        except ValueError:
            continue  # absent, or an HTTP date: then our own backoff
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, LONGEST_RETRY_AFTER_SECONDS)
    return None


def _server_text(error: openai.APIError, api_key: str | None) -> str:
    """What the server said, as ': text' on one line, or ''; the API key is cut out of it."""
    body = error.body
    said = body.get("message") if isinstance(body, dict) else body
    if not isinstance(said, str) or not said.strip():
        return ""
    if api_key:
        # A real server quotes a wrong key back ("Incorrect API key provided: sk-...").
        said = said.replace(api_key, "[the API key]")
    said = " ".join("".join(c if c.isprintable() else " " for c in said).split())
    if len(said) > SERVER_TEXT_LIMIT:  # a server may send a whole HTML error page
        said = said[: SERVER_TEXT_LIMIT - 3] + "..."
    return f": {said}"
