"""A real HTTP server on 127.0.0.1 speaking just enough Chat Completions for our tests.

It answers POST /v1/chat/completions from a queue of scripted responses, shaped
like OpenAI's (tool_calls with JSON-string arguments, finish_reason), and keeps
every request body it received so tests can check what the SDK really sent.
A scripted answer can also be a failure: any status code with OpenAI's error
body (and headers such as Retry-After), or a connection the server closes
without answering. And a body can be sent piece by piece: one far too large to
hold (made as it is sent), or one that trickles, a byte at a time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ScriptedResponse:
    """One HTTP answer: a status code, a JSON body and extra headers; or a dropped connection."""

    status: int
    body: Any
    """Sent as JSON (any JSON value: a broken server's answer need not be an object)."""
    headers: tuple[tuple[str, str], ...] = ()
    drop: bool = False
    """Close the socket without sending anything (the SDK sees a dropped connection)."""
    raw: bytes | None = None
    """Sent as it is instead of `body` (a body that is not JSON at all)."""
    pieces: Callable[[], Iterable[bytes]] | None = None
    """Sent one after another instead of `body`, `length` bytes in all."""
    length: int = 0


def dropped_connection() -> ScriptedResponse:
    """The server reads the request, then closes the connection without answering."""
    return ScriptedResponse(0, {}, drop=True)


def first(
    *responses: ScriptedResponse, then: Callable[[dict[str, Any]], ScriptedResponse]
) -> Callable[[dict[str, Any]], ScriptedResponse]:
    """A responder: `responses` for the first requests, in order, then `then` for the rest."""
    queue = list(responses)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        with lock:
            if queue:
                return queue.pop(0)
        return then(body)

    return respond


def always(response: ScriptedResponse) -> Callable[[dict[str, Any]], ScriptedResponse]:
    """A responder that gives every request the same answer (a server down for good)."""
    return lambda body: response


def text_completion(text: str, model: str = "test-model") -> ScriptedResponse:
    """A completion whose message is plain text (finish_reason "stop")."""
    return _completion({"role": "assistant", "content": text}, "stop", model)


def tool_call_completion(
    calls: Sequence[tuple[str, str, str]], text: str | None = None, model: str = "test-model"
) -> ScriptedResponse:
    """A completion calling tools: each call is (id, name, arguments as a raw string)."""
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        ],
    }
    return _completion(message, "tool_calls", model)


def long_text_completion(characters: int, letter: str = "x") -> ScriptedResponse:
    """A text completion whose answer is `characters` ASCII letters, made as it is sent."""
    body = json.dumps(_completion_body({"role": "assistant", "content": "\0"}, "stop"))
    opening, closing = (part.encode() for part in body.split("\\u0000"))
    piece = letter.encode() * 65_536

    def pieces() -> Iterator[bytes]:
        yield opening
        whole, rest = divmod(characters, len(piece))
        for _ in range(whole):
            yield piece
        yield piece[:rest]
        yield closing

    return ScriptedResponse(
        200, None, pieces=pieces, length=len(opening) + characters + len(closing)
    )


def trickled(response: ScriptedResponse, every: float) -> ScriptedResponse:
    """`response` with its headers at once, then its body one byte every `every` seconds."""
    payload = json.dumps(response.body).encode()

    def pieces() -> Iterator[bytes]:
        for index in range(len(payload)):
            if index:
                time.sleep(every)  # the server's pace, not an order of events
            yield payload[index : index + 1]

    return ScriptedResponse(response.status, None, pieces=pieces, length=len(payload))


def error_response(
    status: int, message: str, *, code: str | None = None, retry_after: str | None = None
) -> ScriptedResponse:
    """An OpenAI-style error body with the given HTTP status (and a Retry-After header)."""
    return ScriptedResponse(
        status,
        {"error": {"message": message, "type": "server_error", "param": None, "code": code}},
        headers=(("Retry-After", retry_after),) if retry_after is not None else (),
    )


def _completion(message: dict[str, Any], finish_reason: str, model: str) -> ScriptedResponse:
    return ScriptedResponse(200, _completion_body(message, finish_reason, model))


def _completion_body(
    message: dict[str, Any], finish_reason: str, model: str = "test-model"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class ChatServer:
    """The running server: `url` for the SDK, `respond_with()` to queue, `requests` to inspect.

    `requests` holds each JSON body received and `headers` its headers (lower-case names);
    `sent` how much of each answer's body went out.
    """

    def __init__(
        self, responder: Callable[[dict[str, Any]], ScriptedResponse] | None = None
    ) -> None:
        # With a responder, each request is answered by calling it (for concurrent agents,
        # whose request order is not fixed); otherwise from the queue, in order.
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.sent: list[tuple[int, int]] = []
        """Per answer, the body's bytes sent before the client left (or all), and its length."""
        self._queue: list[ScriptedResponse] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # A short poll interval keeps shutdown() (fixture teardown) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The base URL to give `openai.OpenAI(base_url=...)`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def respond_with(self, *responses: ScriptedResponse) -> None:
        """Queue responses, answered in order, one per request."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """How many queued responses were not asked for."""
        with self._lock:
            return len(self._queue)

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, close the socket and wait for the thread."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def _next(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> ScriptedResponse:
        with self._lock:
            self.paths.append(path)
            self.headers.append(headers)
            self.requests.append(body)
        if path != "/v1/chat/completions":
            return error_response(404, f"no such path {path}")
        if self.responder is not None:
            return self.responder(body)  # outside the lock: a responder may block
        with self._lock:
            if not self._queue:
                # A request nobody scripted must fail the test, not hang it.
                return error_response(500, "chat_server: no scripted response left")
            return self._queue.pop(0)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {key.lower(): value for key, value in self.headers.items()}
                response = server._next(self.path, headers, body)
                if response.drop:
                    self.close_connection = True  # the socket closes with nothing sent
                    return
                if response.pieces is not None:
                    pieces, length = response.pieces(), response.length
                else:
                    payload = (
                        response.raw
                        if response.raw is not None
                        else json.dumps(response.body).encode()
                    )
                    pieces, length = (payload,), len(payload)
                sent = 0
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(length))
                    for name, value in response.headers:
                        self.send_header(name, value)
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece)
                        sent += len(piece)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left: what a timeout test wants
                with server._lock:
                    server.sent.append((sent, length))

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

        return Handler


@contextmanager
def running_chat_server(
    responder: Callable[[dict[str, Any]], ScriptedResponse] | None = None,
) -> Iterator[ChatServer]:
    """Start a ChatServer on a free port and always shut it down afterwards."""
    server = ChatServer(responder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class _OfferedTool:
    name: str


def answer_with(model: Any, body: dict[str, Any]) -> ScriptedResponse:
    """Answer one chat-completions request body with a scripted model (ScriptedModel).

    The model sees the messages the SDK sent and the names of the tools offered,
    and its reply goes back shaped like OpenAI's, tool calls included.
    """
    offered = [_OfferedTool(tool["function"]["name"]) for tool in body.get("tools", [])]
    reply = model.complete(body["messages"], offered)
    model_name = body.get("model", "test-model")
    if reply.tool_calls:
        calls = [(call.id, call.name, json.dumps(call.arguments)) for call in reply.tool_calls]
        return tool_call_completion(calls, reply.text, model=model_name)
    return text_completion(reply.text or "", model=model_name)
