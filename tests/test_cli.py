"""The `agent17` command: demo, board and run, as a user runs them (with `--store` too)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_cluster
import pytest
from chat_server import ScriptedResponse, answer_with, running_chat_server
from team_backends import PostgresTeamPlace

import agent17.bootstrap
from agent17 import PostgresTaskStore, SqliteTaskStore, TaskStatus
from agent17.agent.models import (
    ScriptedModel,
    minimal_scenario_lead_script,
    teammate_script,
)
from agent17.bootstrap import LEAD_SYSTEM_PROMPT
from agent17.cli import main
from agent17.demo import run_demo
from agent17.team.registry import TeamRegistry


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent17", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=180,
        check=False,
    )


def _story(output: str) -> str:
    # Everything but the lines that name the (fresh) workspace directory.
    return "\n".join(
        line
        for line in output.splitlines()
        if not line.startswith(("workspace:", "board and mailbox:", "See the board again:"))
    )


def test_demo_finishes_the_scenario_and_prints_the_same_story_every_time(tmp_path: Path) -> None:
    first = _cli("demo", "--workspace", str(tmp_path / "one"))
    second = _cli("demo", "--workspace", str(tmp_path / "two"))
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert _story(first.stdout) == _story(second.stdout)
    assert "[FAILED]" not in first.stdout
    with SqliteTaskStore(tmp_path / "one") as store:
        tasks = {task.subject: task for task in store.list_tasks()}
    assert sorted(tasks) == ["A", "B", "C"]
    assert all(task.status is TaskStatus.COMPLETED for task in tasks.values())
    assert tasks["A"].owner != tasks["B"].owner
    assert tasks["C"].blocked_by == (tasks["A"].id, tasks["B"].id)


def test_demo_without_a_workspace_uses_a_fresh_directory_and_prints_it() -> None:
    result = _cli("demo")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("workspace:"))
    workspace = Path(line.removeprefix("workspace:").strip())
    assert (workspace / ".agent_tutorial" / "tasks.sqlite3").is_file()


def test_board_prints_json_table_and_dot_of_an_existing_board(tmp_path: Path) -> None:
    assert run_demo(tmp_path, io.StringIO()) == 0
    as_json = _cli("board", "--workspace", str(tmp_path), "--format", "json")
    payloads = json.loads(as_json.stdout)
    assert [task["subject"] for task in payloads] == ["A", "B", "C"]
    assert set(payloads[0]) == {"id", "subject", "description", "status", "owner", "blocked_by"}
    assert payloads[2]["blocked_by"] == [payloads[0]["id"], payloads[1]["id"]]
    table = _cli("board", "--workspace", str(tmp_path))
    assert table.returncode == 0 and "completed" in table.stdout
    dot = _cli("board", "--workspace", str(tmp_path), "--format", "dot")
    assert dot.stdout.startswith("digraph") and "t1 -> t3" in dot.stdout


def test_board_of_a_workspace_without_a_board_creates_nothing(tmp_path: Path) -> None:
    result = _cli("board", "--workspace", str(tmp_path))
    assert result.returncode == 2
    assert "no task board" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_board_refuses_an_unsafe_database_with_its_error_code(tmp_path: Path) -> None:
    outside = tmp_path / "outside.sqlite3"
    outside.write_bytes(b"")
    workspace = tmp_path / "ws"
    (workspace / ".agent_tutorial").mkdir(parents=True)
    (workspace / ".agent_tutorial" / "tasks.sqlite3").symlink_to(outside)
    result = _cli("board", "--workspace", str(workspace))
    assert result.returncode == 1
    assert "unsafe_store_path" in result.stderr
    assert outside.read_bytes() == b""


def _environment_without_openai() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT17_MODEL")
    }


def test_run_without_model_configuration_exits_before_creating_any_state(tmp_path: Path) -> None:
    result = _cli(
        "run",
        "--prompt",
        "anything",
        "--workspace",
        str(tmp_path),
        env=_environment_without_openai(),
    )
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1
    assert "OPENAI_API_KEY" in result.stderr
    assert not (tmp_path / ".agent_tutorial").exists()
    assert list(tmp_path.iterdir()) == []


def test_run_without_configuration_does_not_even_create_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "never-made"
    result = _cli(
        "run", "--prompt", "x", "--workspace", str(workspace), env=_environment_without_openai()
    )
    assert result.returncode != 0
    assert not workspace.exists()


def test_the_cli_builds_exactly_one_store_that_every_role_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[SqliteTaskStore] = []
    original = SqliteTaskStore.__init__

    def counting_init(self: SqliteTaskStore, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(SqliteTaskStore, "__init__", counting_init)
    seen: list[agent17.bootstrap.Team] = []
    real_build = agent17.bootstrap.build_team

    def spying_build(settings: agent17.bootstrap.TeamSettings) -> agent17.bootstrap.Team:
        team = real_build(settings)
        seen.append(team)
        return team

    monkeypatch.setattr("agent17.demo.build_team", spying_build)
    assert main(["demo", "--workspace", str(tmp_path)]) == 0
    assert len(built) == 1
    team = seen[0]
    assert team.store is built[0]
    assert team.work_stealing.store is team.store
    assert team.teammates.work_stealing is team.work_stealing
    assert team.work_stealing.claim_service.store is team.store


def _by_role(lead: ScriptedModel, teammate: ScriptedModel) -> Any:
    """A loopback responder: the Lead's model for the Lead's requests, else the teammate's."""

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        is_lead = body["messages"][0]["content"] == LEAD_SYSTEM_PROMPT
        return answer_with(lead if is_lead else teammate, body)

    return respond


def _scripted_server_responder() -> Any:
    """Answer chat-completion requests with our scripted models: Lead or teammate by prompt."""
    return _by_role(minimal_scenario_lead_script(), teammate_script())


def test_run_drives_a_real_team_through_the_openai_sdk_and_ends_by_itself(tmp_path: Path) -> None:
    with running_chat_server(_scripted_server_responder()) as server:
        env = _environment_without_openai() | {
            "OPENAI_BASE_URL": server.url,
            "AGENT17_MODEL": "loopback-model",
        }
        result = _cli(
            "run",
            "--prompt",
            "Build A, B and C; start alice and bob.",
            "--workspace",
            str(tmp_path),
            env=env,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shut down: alice, bob" in result.stdout
    assert {request["model"] for request in server.requests} == {"loopback-model"}
    lead_requests = [
        r for r in server.requests if r["messages"][0]["content"] == LEAD_SYSTEM_PROMPT
    ]
    offered = {tool["function"]["name"] for tool in lead_requests[0]["tools"]}
    assert {"create_task", "spawn_teammate", "send_message"} <= offered
    with SqliteTaskStore(tmp_path) as store:
        tasks = {task.subject: task for task in store.list_tasks()}
        events = store.events()
    assert all(task.status is TaskStatus.COMPLETED for task in tasks.values())
    assert {task.owner for task in tasks.values()} <= {"alice", "bob"}
    order = [(event.kind.value, event.task_id) for event in events]
    c_claimed = order.index(("claimed", tasks["C"].id))
    assert order.index(("completed", tasks["A"].id)) < c_claimed
    assert order.index(("completed", tasks["B"].id)) < c_claimed
    assert sum(1 for kind, _ in order if kind == "claimed") == 3


def test_demo_refuses_a_workspace_that_already_has_a_board(tmp_path: Path) -> None:
    assert run_demo(tmp_path, io.StringIO()) == 0
    before = (tmp_path / ".agent_tutorial" / "tasks.sqlite3").read_bytes()
    again = _cli("demo", "--workspace", str(tmp_path))
    assert again.returncode == 2
    assert "already has a task board" in again.stderr
    assert (tmp_path / ".agent_tutorial" / "tasks.sqlite3").read_bytes() == before


def test_the_demo_checks_fail_when_one_teammate_took_a_and_b() -> None:
    from datetime import UTC, datetime

    from agent17.demo import scenario_checks
    from agent17.domain import EventKind, TaskEvent

    at = datetime(2026, 1, 1, tzinfo=UTC)
    ids = {"a": "A", "b": "B", "c": "C"}
    story = [
        ("claimed", "a", "alice"),
        ("completed", "a", "alice"),
        ("claimed", "b", "alice"),
        ("claimed", "c", "bob"),  # before B was completed
        ("completed", "b", "alice"),
        ("completed", "c", "bob"),
    ]
    events = [
        TaskEvent(number, EventKind(kind), task, at, owner)
        for number, (kind, task, owner) in enumerate(story, start=1)
    ]
    verdicts = dict(scenario_checks(events, ids))
    assert verdicts["A and B went to different teammates"] is False
    assert verdicts["A and B were both claimed before either was completed (held at once)"] is False
    assert (
        verdicts["with one of A and B done, C was not claimable; C was claimed after both"] is False
    )
    assert verdicts["C was claimed by exactly one teammate"] is True


def _planning_team_responder() -> Any:
    """Teammates submit a plan with every task; the Lead approves each plan it is shown."""
    import re

    from agent17.agent.models import Call, CurrentTurn, Reply, auto_claimed_task

    def approve_plans(turn: CurrentTurn) -> Reply | None:
        request_ids = re.findall(r"submitted a plan \(request_id ([0-9a-f-]{36})\)", turn.user_text)
        if not request_ids:
            return None
        if turn.outcomes:
            return Reply(text=f"Approved {len(request_ids)} plan(s).")
        return Reply(
            calls=tuple(
                Call("review_plan", {"request_id": r, "approve": True}) for r in request_ids
            )
        )

    def plan_then_complete(turn: CurrentTurn) -> Reply | None:
        claim = auto_claimed_task(turn.user_text)
        if claim is None:
            return None
        if turn.outcomes:
            return Reply(text=f"Planned and completed {claim['task']['subject']}.")
        complete = {"task_id": claim["task"]["id"], "claim_token": claim["claim_token"]}
        return Reply(
            calls=(
                Call("submit_plan", {"plan": f"Do {claim['task']['subject']} carefully."}),
                Call("complete_task", complete),
            )
        )

    lead = ScriptedModel([approve_plans, *minimal_scenario_lead_script().rules], name="lead")
    teammate = ScriptedModel([plan_then_complete, *teammate_script().rules], name="teammate")
    return _by_role(lead, teammate)


def test_run_shows_submitted_plans_to_the_lead_whose_approval_opens_the_gate(
    tmp_path: Path,
) -> None:
    from agent17.team.mailbox import Mailbox
    from agent17.team.plans import PlanStatus
    from agent17.team.protocol import TeamProtocol

    with running_chat_server(_planning_team_responder()) as server:
        env = _environment_without_openai() | {"OPENAI_BASE_URL": server.url}
        result = _cli("run", "--prompt", "A, B, C please", "--workspace", str(tmp_path), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Approved" in result.stdout
    with SqliteTaskStore(tmp_path) as store:
        assert all(task.status is TaskStatus.COMPLETED for task in store.list_tasks())
    with Mailbox(tmp_path) as mailbox:
        plans = TeamProtocol(mailbox).plans()
    assert len(plans) == 3  # one per task
    assert {plan.status for plan in plans} == {PlanStatus.APPROVED}


def test_the_demos_event_log_shows_a_and_b_held_at_once_and_c_after_both(tmp_path: Path) -> None:
    assert run_demo(tmp_path, io.StringIO()) == 0
    with SqliteTaskStore(tmp_path) as store:
        subjects = {task.id: task.subject for task in store.list_tasks()}
        story = [(e.kind.value, subjects[e.task_id], e.owner) for e in store.events()]
        times = [e.at_utc for e in store.events()]
    assert story[3:] == [
        ("claimed", "A", "alice"),
        ("claimed", "B", "bob"),  # both claimed before either completed
        ("completed", "A", "alice"),  # one done: C still waits for B
        ("completed", "B", "bob"),
        ("claimed", "C", "alice"),  # bob handled his shutdown first
        ("completed", "C", "alice"),
    ]
    assert times == sorted(times) and times[-1] > times[0]  # time moved on the clock


def test_demo_with_processes_holds_its_checks_whatever_the_interleaving(tmp_path: Path) -> None:
    result = _cli("demo", "--processes", "--workspace", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[FAILED]" not in result.stdout
    with SqliteTaskStore(tmp_path) as store:
        events = store.events()
        tasks = store.list_tasks()
    owners = {e.owner for e in events if e.kind.value == "claimed"}
    assert owners == {"alice", "bob"}
    assert all(task.status is TaskStatus.COMPLETED for task in tasks)
    pids = {
        line.split("[")[1].split("]")[0]
        for line in result.stdout.splitlines()
        if "] joined" in line
    }
    assert len(pids) == 2 and str(os.getpid()) not in pids  # two other processes did the work


def test_board_shows_who_holds_what_until_when(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path, lease_seconds=600)
    a = store.create_task("A")
    store.create_task("B")
    claim = store.claim_task(a.id, "alice")
    store.close()
    table = _cli("board", "--workspace", str(tmp_path))
    header, _, first, second = table.stdout.splitlines()[:4]
    assert "lease until" in header
    assert "alice" in first and claim.lease_expires_at_utc.strftime("%H:%M:%SZ") in first
    assert "pending (ready)" in second and "alice" not in second
    plain = json.loads(_cli("board", "--workspace", str(tmp_path), "--format", "json").stdout)
    assert set(plain[0]) == {"id", "subject", "description", "status", "owner", "blocked_by"}
    leased = json.loads(
        _cli("board", "--workspace", str(tmp_path), "--format", "json", "--leases").stdout
    )
    assert leased[0]["task"] == plain[0]
    assert leased[0]["lease_expires_at_utc"] == claim_payload_time(claim)
    assert leased[1]["lease_expires_at_utc"] is None


def claim_payload_time(claim: Any) -> str:
    from agent17 import claim_payload

    return str(claim_payload(claim)["lease_expires_at_utc"])


def test_version_and_every_help_says_what_it_does_and_its_defaults() -> None:
    version = _cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("agent17 ")
    for command, must_say in {
        "demo": ["--processes", "simulated clock", "--store URL", "postgresql://"],
        "board": ["default: table", "--leases", "--store URL", "postgresql://"],
        "run": ["OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT17_MODEL", "--store URL"],
        "teammate": [
            "default: 5.0",
            "default: 12",
            "default: scripted",
            "OPENAI_BASE_URL",
            "130",
            "--store URL",
            "other hosts",
        ],
    }.items():
        text = " ".join(_cli(command, "--help").stdout.split())
        for phrase in must_say:
            assert phrase in text, (command, phrase)


# -- --store: the board and the mailbox on PostgreSQL ------------------------------------


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[PostgresTeamPlace]:
    """A fresh PostgreSQL database for the team; the workspace is `tmp_path / "ws"`."""
    made = PostgresTeamPlace(tmp_path / "ws", pg_cluster.server())
    yield made
    made.close()


def _schemas(place: PostgresTeamPlace) -> list[Any]:
    with place.board.connection() as connection:
        return connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = 'agent17'"
        ).fetchall()


def test_demo_on_postgresql_tells_the_same_story_and_passes_the_same_checks(
    tmp_path: Path, postgres: PostgresTeamPlace
) -> None:
    assert postgres.url is not None
    on_sqlite = _cli("demo", "--workspace", str(tmp_path / "sqlite"))
    on_postgres = _cli("demo", "--workspace", str(postgres.workspace), "--store", postgres.url)
    assert on_postgres.returncode == 0, on_postgres.stdout + on_postgres.stderr
    assert _story(on_postgres.stdout) == _story(on_sqlite.stdout)
    assert "[FAILED]" not in on_postgres.stdout
    assert "agent17 board --store" in on_postgres.stdout.splitlines()[-1]
    with PostgresTaskStore(postgres.dsn) as store:
        tasks = {task.subject: task for task in store.list_tasks()}
    assert all(task.status is TaskStatus.COMPLETED for task in tasks.values())
    assert tasks["A"].owner != tasks["B"].owner
    # Only this host's own records are in the workspace: no board, no mailbox there.
    state = postgres.workspace / ".agent_tutorial"
    assert not (state / "tasks.sqlite3").exists() and not (state / "mailbox.sqlite3").exists()
    assert (state / "audit.jsonl").exists()
    again = _cli("demo", "--store", postgres.url)
    assert again.returncode == 2 and "already has a task board" in again.stderr


def test_board_with_a_store_url_prints_that_board_and_never_creates_one(
    tmp_path: Path, postgres: PostgresTeamPlace
) -> None:
    assert postgres.url is not None
    none_yet = _cli("board", "--store", postgres.url, cwd=tmp_path)
    assert none_yet.returncode == 2 and "no task board" in none_yet.stderr
    assert _schemas(postgres) == []  # nothing was made in the database
    assert list(tmp_path.iterdir()) == []  # nor in the workspace
    store = postgres.raw_store(lease_seconds=600)
    a = store.create_task("A")
    store.create_task("B", blocked_by=[a.id])
    store.claim_task(a.id, "alice")
    table = _cli("board", "--store", postgres.url)
    assert table.returncode == 0, table.stderr
    assert "alice" in table.stdout.splitlines()[2] and "A" in table.stdout.splitlines()[3]
    payloads = json.loads(_cli("board", "--store", postgres.url, "--format", "json").stdout)
    assert [(p["subject"], p["status"]) for p in payloads] == [
        ("A", "in_progress"),
        ("B", "pending"),
    ]


def test_demo_with_processes_on_postgresql_holds_its_checks(postgres: PostgresTeamPlace) -> None:
    assert postgres.url is not None
    result = _cli(
        "demo", "--processes", "--workspace", str(postgres.workspace), "--store", postgres.url
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[FAILED]" not in result.stdout
    joined = [line for line in result.stdout.splitlines() if "] joined the team on" in line]
    assert len(joined) == 2 and all("PostgreSQL" in line for line in joined)
    with PostgresTaskStore(postgres.dsn) as store:
        owners = {e.owner for e in store.events() if e.kind.value == "claimed"}
    assert owners == {"alice", "bob"}


BAD_STORES = {
    "not postgres": "sqlite:///tmp/board.db",
    "unreadable": "postgresql://u@h/db?nonsense=1",
    "unreachable": "postgresql://postgres@%2Fnonexistent-agent17-socket-dir/agent17",
}


@pytest.mark.parametrize("command", ["demo", "board", "teammate", "run"])
@pytest.mark.parametrize("problem", list(BAD_STORES))
def test_a_bad_or_unreachable_store_is_one_line_a_failure_and_creates_nothing(
    tmp_path: Path, command: str, problem: str
) -> None:
    workspace = tmp_path / "never-made"
    options = {
        "demo": ["demo", "--workspace", str(workspace)],
        "board": ["board", "--workspace", str(workspace)],
        "teammate": ["teammate", "--name", "bob", "--workspace", str(workspace)],
        "run": ["run", "--prompt", "x", "--workspace", str(workspace)],
    }[command]
    # A configured model, so that only the store can be what stops `run`.
    environment = {**_environment_without_openai(), "OPENAI_API_KEY": "sk-never-used"}
    result = _cli(*options, "--store", BAD_STORES[problem], env=environment, cwd=tmp_path)
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    expected = "store_unavailable" if problem == "unreachable" else "--store"
    assert expected in result.stderr
    assert list(tmp_path.iterdir()) == []  # no workspace, no state folder, no file


def test_run_with_a_store_but_no_model_configuration_creates_nothing_anywhere(
    tmp_path: Path, postgres: PostgresTeamPlace
) -> None:
    assert postgres.url is not None
    result = _cli(
        "run", "--prompt", "x", "--workspace", str(postgres.workspace), "--store", postgres.url,
        env=_environment_without_openai(),
    )  # fmt: skip
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1 and "OPENAI_API_KEY" in result.stderr
    assert not postgres.workspace.exists()
    assert _schemas(postgres) == []


def test_run_with_a_store_url_drives_the_real_team_on_postgresql(
    postgres: PostgresTeamPlace,
) -> None:
    assert postgres.url is not None
    with running_chat_server(_scripted_server_responder()) as server:
        env = _environment_without_openai() | {
            "OPENAI_BASE_URL": server.url,
            "AGENT17_MODEL": "loopback-model",
        }
        result = _cli(
            "run", "--prompt", "Build A, B and C; start alice and bob.",
            "--workspace", str(postgres.workspace), "--store", postgres.url, env=env,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shut down: alice, bob" in result.stdout
    with PostgresTaskStore(postgres.dsn) as store:
        tasks = store.list_tasks()
    assert [task.subject for task in tasks] == ["A", "B", "C"]
    assert all(task.status is TaskStatus.COMPLETED for task in tasks)
    with postgres.mailbox() as mailbox:
        closed = {m.name: m.state for m in TeamRegistry(mailbox).members()}
    assert closed == {"alice": "closed", "bob": "closed"}
    assert not (postgres.workspace / ".agent_tutorial" / "tasks.sqlite3").exists()
