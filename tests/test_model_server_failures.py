"""A model server that fails, met by real `agent17 teammate` and `agent17 run` processes.

The server is a real HTTP server on 127.0.0.1 (chat_server.py) that answers
with the status codes a test scripts, or closes the connection; the client is
the real `openai` SDK inside the process. A refusal (401) stops at once; a
server that keeps failing is asked a bounded number of times; both end in one
line that never shows the API key, and leave the task the worker held in
progress under its lease, neither completed nor given back. A server that
recovers within the retries lets the work finish normally. An answer of any
size reaches the teammate's log and the Lead's mailbox cut, saying so.

The failing answers carry `Retry-After: 0`, as an overloaded server may send:
the process honours it, so no test waits out a real backoff.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chat_server import (
    ChatServer,
    ScriptedResponse,
    always,
    answer_with,
    dropped_connection,
    error_response,
    first,
    long_text_completion,
    running_chat_server,
)
from team_processes import Teammate, teammates

from agent17 import EventKind, Mailbox, SqliteTaskStore, TaskStatus
from agent17.agent.model_failures import DEFAULT_RETRIES
from agent17.agent.models import ScriptedModel, minimal_scenario_lead_script, teammate_script
from agent17.agent.reply_reader import ANSWER_LIMIT
from agent17.bootstrap import LEAD_SYSTEM_PROMPT
from agent17.team.protocol import TextMessage, decode_message

pytestmark = pytest.mark.processes

__all__ = ["teammates"]  # a fixture (team_processes.py)

SECRET_KEY = "sk-proc-9fT2mQ7vLx1Rk4ZsW8"
TRIES = DEFAULT_RETRIES + 1


def _refused() -> ScriptedResponse:
    # A real server quotes the wrong key back in its message.
    return error_response(401, f"Incorrect API key provided: {SECRET_KEY}")


def _overloaded() -> ScriptedResponse:
    return error_response(500, f"overloaded (key {SECRET_KEY})", retry_after="0")


def _the_model_is(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes started after this reach `server` with SECRET_KEY."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT17_MODEL", "OPENAI_ORG_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def board(workspace: Path) -> Iterator[SqliteTaskStore]:
    """A board made by a plain script, with one task for the teammate."""
    with SqliteTaskStore(workspace) as store:
        store.create_task("A", "Do A.")
        yield store


def _openai_teammate(
    start: Callable[..., Teammate], workspace: Path, *options: str, name: str = "alice"
) -> Teammate:
    return start(
        workspace, name, "--model", "openai", "--poll-interval", "0.2", "--max-idle-polls", "1",
        *options,
    )  # fmt: skip


def _assert_held_by_the_failed_worker(store: SqliteTaskStore, owner: str = "alice") -> None:
    """In progress, under a lease that has not run out, and never completed."""
    (task,) = store.list_tasks()
    assert (task.status, task.owner) == (TaskStatus.IN_PROGRESS, owner)
    events = store.events()
    assert [(e.kind, e.owner) for e in events] == [
        (EventKind.CREATED, None),
        (EventKind.CLAIMED, owner),
    ]
    lease = events[-1].lease_expires_at_utc
    assert lease is not None and lease > datetime.now(UTC)


def _assert_one_line_without_the_key(process: Teammate, code: str) -> str:
    assert len(process.errors) == 1, process.errors
    line = process.errors[0]
    assert f"agent17 teammate alice: {code}: " in line
    assert "Traceback" not in line
    assert SECRET_KEY not in "\n".join(process.seen + process.errors)
    return line


# -- agent17 teammate --model openai ------------------------------------------------------


def test_a_refused_api_key_stops_the_teammate_at_once_in_one_line_and_keeps_its_claim(
    board: SqliteTaskStore,
    workspace: Path,
    teammates: Callable[..., Teammate],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_chat_server(always(_refused())) as server:
        _the_model_is(server, monkeypatch)
        alice = _openai_teammate(teammates, workspace, "--lease-seconds", "600")
        assert alice.finish() == 1
    line = _assert_one_line_without_the_key(alice, "model_auth_failed")
    assert "HTTP 401" in line and "OPENAI_API_KEY" in line
    assert len(server.requests) == 1  # a refusal is not asked again
    assert server.headers[0]["authorization"] == f"Bearer {SECRET_KEY}"
    _assert_held_by_the_failed_worker(board)


def test_a_server_failing_for_good_is_asked_a_bounded_number_of_times_then_one_line(
    board: SqliteTaskStore,
    workspace: Path,
    teammates: Callable[..., Teammate],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_chat_server(always(_overloaded())) as server:
        _the_model_is(server, monkeypatch)
        alice = _openai_teammate(teammates, workspace, "--lease-seconds", "600")
        assert alice.finish() == 1
    line = _assert_one_line_without_the_key(alice, "model_unavailable")
    assert "HTTP 500" in line and f"gave up after {TRIES} tries" in line
    assert len(server.requests) == TRIES
    assert server.requests[0]["messages"] == server.requests[-1]["messages"]  # the same call
    _assert_held_by_the_failed_worker(board)


@pytest.mark.parametrize(
    "failures",
    [[_overloaded(), _overloaded()], [dropped_connection()]],
    ids=["two 500s", "a dropped connection"],
)
def test_a_server_that_recovers_within_the_retries_lets_the_task_be_completed(
    board: SqliteTaskStore,
    workspace: Path,
    teammates: Callable[..., Teammate],
    monkeypatch: pytest.MonkeyPatch,
    failures: list[ScriptedResponse],
) -> None:
    model = teammate_script()
    with running_chat_server(
        first(*failures, then=lambda body: answer_with(model, body))
    ) as server:
        _the_model_is(server, monkeypatch)
        alice = _openai_teammate(teammates, workspace)
        assert alice.finish() == 0, alice.errors
    assert alice.errors == []
    assert any("claimed A" in line and "Completed A." in line for line in alice.seen), alice.seen
    (task,) = board.list_tasks()
    assert (task.status, task.owner) == (TaskStatus.COMPLETED, "alice")
    assert [e.kind for e in board.events()] == [
        EventKind.CREATED,
        EventKind.CLAIMED,
        EventKind.COMPLETED,
    ]
    assert len(server.requests) == len(failures) + 2  # the call that completes it, the answer


def test_the_task_a_stopped_teammate_held_goes_to_another_when_its_lease_runs_out(
    board: SqliteTaskStore,
    workspace: Path,
    teammates: Callable[..., Teammate],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_chat_server(always(_refused())) as server:
        _the_model_is(server, monkeypatch)
        alice = _openai_teammate(teammates, workspace, "--lease-seconds", "2")
        assert alice.finish() == 1
    # bob (offline, scripted) waits with a 30 s poll; the lease's end wakes him.
    bob = teammates(workspace, "bob", "--poll-interval", "30", "--max-idle-polls", "1")
    bob.wait_for_line("claimed A", timeout=30)
    bob.process.send_signal(signal.SIGINT)
    bob.finish()
    assert [(e.kind, e.owner) for e in board.events()] == [
        (EventKind.CREATED, None),
        (EventKind.CLAIMED, "alice"),
        (EventKind.LEASE_EXPIRED, "alice"),
        (EventKind.CLAIMED, "bob"),
        (EventKind.COMPLETED, "bob"),
    ]


def test_a_huge_answer_reaches_the_log_and_the_lead_cut_to_the_limit_saying_by_how_much(
    board: SqliteTaskStore,
    workspace: Path,
    teammates: Callable[..., Teammate],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    characters = 5_000_000
    with running_chat_server(always(long_text_completion(characters))) as server:
        _the_model_is(server, monkeypatch)
        alice = _openai_teammate(teammates, workspace)
        assert alice.finish() == 0, alice.errors
    kept = "x" * ANSWER_LIMIT + f" [... cut: {characters - ANSWER_LIMIT:,} more characters]"
    (line,) = [line for line in alice.seen if "claimed A" in line]
    assert line.endswith(f"-> {kept!r}")
    assert len(line) < len(kept) + 200  # the time, the name, the task and its lease
    with Mailbox(workspace) as mailbox:
        (report,) = mailbox.messages("lead")
    assert decode_message(report.kind, report.body) == TextMessage(content=kept)
    assert len(server.requests) == 1


# -- agent17 run ----------------------------------------------------------------------------


def _run(workspace: Path, server: ChatServer) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "AGENT17_MODEL"))},
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": SECRET_KEY,
    }
    return subprocess.run(
        [sys.executable, "-m", "agent17", "run", "--prompt", "Build A, B and C; start alice"
         " and bob.", "--workspace", str(workspace)],
        capture_output=True, text=True, env=environment, stdin=subprocess.DEVNULL,
        timeout=240, check=False,
    )  # fmt: skip


def _is_lead(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"] == LEAD_SYSTEM_PROMPT)


def _lead_fine_teammates(
    teammates_answer: Callable[[dict[str, Any]], ScriptedResponse],
) -> Callable[[dict[str, Any]], ScriptedResponse]:
    lead: ScriptedModel = minimal_scenario_lead_script()
    return lambda body: answer_with(lead, body) if _is_lead(body) else teammates_answer(body)


def test_run_whose_lead_is_refused_stops_in_one_line_without_the_key(workspace: Path) -> None:
    with running_chat_server(always(_refused())) as server:
        result = _run(workspace, server)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agent17 run: the Lead stopped: model_auth_failed: ")
    assert SECRET_KEY not in result.stdout + result.stderr
    assert len(server.requests) == 1
    with SqliteTaskStore(workspace) as store:
        assert store.list_tasks() == []


def test_run_whose_teammates_model_keeps_failing_leaves_their_tasks_held_and_stops(
    workspace: Path,
) -> None:
    with running_chat_server(_lead_fine_teammates(always(_overloaded()))) as server:
        result = _run(workspace, server)
    assert result.returncode == 1, result.stdout + result.stderr
    stops = result.stderr.splitlines()
    assert len(stops) == 2, result.stderr
    assert sorted(line.split(": ")[1] for line in stops) == ["alice stopped", "bob stopped"]
    assert all(line.startswith("agent17 run: ") for line in stops)
    assert all("model_unavailable" in line and f"gave up after {TRIES}" in line for line in stops)
    assert SECRET_KEY not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    teammate_requests = [body for body in server.requests if not _is_lead(body)]
    assert len(teammate_requests) == 2 * TRIES  # each teammate: its one task, bounded
    with SqliteTaskStore(workspace) as store:
        tasks = {task.subject: task for task in store.list_tasks()}
        events = store.events()
    assert {(t.subject, t.status) for t in tasks.values()} == {
        ("A", TaskStatus.IN_PROGRESS),
        ("B", TaskStatus.IN_PROGRESS),
        ("C", TaskStatus.PENDING),
    }
    assert {tasks["A"].owner, tasks["B"].owner} == {"alice", "bob"}
    assert EventKind.COMPLETED not in {e.kind for e in events}
    claims = [e for e in events if e.kind is EventKind.CLAIMED]
    assert all(
        e.lease_expires_at_utc and e.lease_expires_at_utc > datetime.now(UTC) for e in claims
    )


@pytest.mark.parametrize(
    "failures",
    [[_overloaded(), _overloaded()], [dropped_connection()]],
    ids=["two 500s", "a dropped connection"],
)
def test_run_whose_server_recovers_within_the_retries_finishes_the_board(
    workspace: Path, failures: list[ScriptedResponse]
) -> None:
    model = teammate_script()
    answer = first(*failures, then=lambda body: answer_with(model, body))
    with running_chat_server(_lead_fine_teammates(answer)) as server:
        result = _run(workspace, server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shut down: alice, bob" in result.stdout
    assert SECRET_KEY not in result.stdout + result.stderr
    with SqliteTaskStore(workspace) as store:
        assert {t.status for t in store.list_tasks()} == {TaskStatus.COMPLETED}
    assert len(server.requests) > len(failures)
