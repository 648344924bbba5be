"""AgentRunner runs only what the model calls, through policy, audit and the idempotency ledger."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent17.agent.ledger import IdempotencyLedger
from agent17.agent.models import (
    Call,
    CurrentTurn,
    Message,
    ModelReply,
    Reply,
    ScriptedModel,
    ScriptedTask,
    ToolCall,
    UnexpectedModelCall,
    lead_script,
    minimal_scenario_lead_script,
    notes_path,
    teammate_script,
)
from agent17.agent.permissions import (
    ApprovalRequest,
    AuditTrail,
    PermissionPolicy,
    teammate_policy,
)
from agent17.agent.runner import AgentRunner
from agent17.claims import DirectTaskClaimService, ToolContext
from agent17.domain import TaskClaim, TaskError, TaskStatus
from agent17.inputs import StrictInput
from agent17.store.sqlite import SqliteTaskStore
from agent17.tools.base import AnyTool, ToolDefinition, ToolRegistry
from agent17.tools.task_tools import leased_task_tool_definitions
from agent17.tools.workspace_tools import workspace_tool_definitions
from agent17.wire import claim_payload

KEY = "00000000-0000-4000-8000-000000001711"
OTHER_KEY = "00000000-0000-4000-8000-000000001712"


# --- doubles -----------------------------------------------------------------------


class ListModel:
    """Replies from a list, recording the conversation and tool names it was shown."""

    def __init__(self, replies: Sequence[ModelReply]) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []
        self.offered: list[list[str]] = []

    def complete(self, messages: Sequence[Message], tools: Sequence[AnyTool]) -> ModelReply:
        self.seen.append(json.loads(json.dumps(list(messages))))
        self.offered.append([tool.name for tool in tools])
        return self.replies.pop(0)


class EchoInput(StrictInput):
    text: str


class SpawnInput(StrictInput):
    name: str


def echo_tool(calls: list[ToolContext]) -> AnyTool:
    def echo(args: EchoInput, context: ToolContext) -> dict[str, Any]:
        calls.append(context)
        return {"echo": args.text}

    return ToolDefinition("echo", "Echo text.", EchoInput, echo)


def effect_tool(calls: list[str], name: str = "deploy") -> AnyTool:
    def effect(args: EchoInput, context: ToolContext) -> dict[str, Any]:
        calls.append(args.text)
        return {"deployed": args.text}

    return ToolDefinition(name, "A side effect.", EchoInput, effect, effectful=True)


def spawn_tool(spawned: list[str]) -> AnyTool:
    def spawn(args: SpawnInput, context: ToolContext) -> dict[str, Any]:
        spawned.append(args.name)
        return {"spawned": args.name}

    return ToolDefinition("spawn_teammate", "Start a teammate.", SpawnInput, spawn)


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments)


def approve_all(request: ApprovalRequest) -> bool:
    return True


def sequential_ids(prefix: int) -> Callable[[], str]:
    counter = iter(range(1, 10_000))
    return lambda: f"00000000-0000-4000-8000-{prefix:04d}{next(counter):08d}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(
        tmp_path, new_task_id=sequential_ids(17), new_claim_token=sequential_ids(71)
    ) as opened:
        yield opened


def task_tools(store: SqliteTaskStore) -> tuple[AnyTool, ...]:
    return leased_task_tool_definitions(store, DirectTaskClaimService(store))


def auto_claimed_message(claim: TaskClaim) -> str:
    payload = json.dumps(claim_payload(claim), sort_keys=True)
    return f"<auto-claimed-task>{payload}</auto-claimed-task>"


# --- the loop ---------------------------------------------------------------------


def test_a_tool_call_round_trip_records_chat_completions_messages() -> None:
    contexts: list[ToolContext] = []
    model = ListModel(
        [
            ModelReply("Let me echo.", (call("c1", "echo", text="hi"),)),
            ModelReply("Done: hi."),
        ]
    )
    runner = AgentRunner("alice", model, ToolRegistry([echo_tool(contexts)]), system_prompt="S")

    result = runner.run("say hi", idempotency_key=KEY)

    assert (result.final_text, result.turns, result.stopped) == ("Done: hi.", 2, "answered")
    assert [(r.tool, r.decision, r.outcome, r.result) for r in result.tool_calls] == [
        ("echo", "allow", "ok", {"echo": "hi"})
    ]
    assert contexts == [ToolContext(identity="alice", idempotency_key=KEY)]
    assert runner.messages == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "say hi"},
        {
            "role": "assistant",
            "content": "Let me echo.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"text": "hi"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"echo": "hi"}'},
        {"role": "assistant", "content": "Done: hi."},
    ]
    assert model.offered == [["echo"], ["echo"]]


def test_the_conversation_carries_over_between_runs() -> None:
    model = ListModel([ModelReply("first"), ModelReply("second")])
    runner = AgentRunner("lead", model, ToolRegistry(), system_prompt="S")
    runner.run("one")
    runner.run("two")
    assert [m["content"] for m in model.seen[1]] == ["S", "one", "first", "two"]


def test_an_unknown_tool_becomes_an_error_result_not_an_exception() -> None:
    audit = AuditTrail.in_memory()
    model = ListModel([ModelReply(None, (call("c1", "rm_rf", path="/"),)), ModelReply("ok")])
    runner = AgentRunner("alice", model, ToolRegistry(), system_prompt="S", audit=audit)
    result = runner.run("go")
    assert result.tool_calls[0].outcome == "unknown_tool"
    assert json.loads(runner.messages[3]["content"])["error"]["code"] == "unknown_tool"
    assert [(r["tool"], r["decision"], r["outcome"]) for r in audit.records()] == [
        ("rm_rf", "refused", "unknown_tool")
    ]


def test_unparsable_arguments_are_answered_invalid_arguments_without_running() -> None:
    ran: list[str] = []
    broken = ToolCall("c1", "deploy", {}, raw_arguments="{not json", arguments_error="bad JSON")
    model = ListModel([ModelReply(None, (broken,)), ModelReply("ok")])
    policy = PermissionPolicy({"deploy": "allow"})
    runner = AgentRunner(
        "alice", model, ToolRegistry([effect_tool(ran)]), system_prompt="S", policy=policy
    )
    result = runner.run("go")
    assert (result.tool_calls[0].decision, result.tool_calls[0].outcome) == (
        "refused",
        "invalid_arguments",
    )
    assert ran == []
    # The conversation keeps what the model really sent.
    assert runner.messages[2]["tool_calls"][0]["function"]["arguments"] == "{not json"


def test_invalid_arguments_are_refused_before_a_human_is_asked() -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    model = ListModel([ModelReply(None, (call("c1", "deploy", text=5),)), ModelReply("ok")])
    runner = AgentRunner(
        "alice",
        model,
        ToolRegistry([effect_tool([])]),
        system_prompt="S",
        policy=PermissionPolicy({"deploy": "ask"}, approver),
    )
    assert runner.run("go").tool_calls[0].outcome == "invalid_arguments"
    assert asked == []


def test_a_denied_effectful_call_is_not_run_and_is_audited() -> None:
    ran: list[str] = []
    audit = AuditTrail.in_memory()
    model = ListModel([ModelReply(None, (call("c1", "deploy", text="prod"),)), ModelReply("ok")])
    runner = AgentRunner(
        "bob",
        model,
        ToolRegistry([effect_tool(ran)]),
        system_prompt="S",
        policy=PermissionPolicy({"deploy": "deny"}),
        audit=audit,
    )
    result = runner.run("go", idempotency_key=KEY)
    assert ran == []
    assert result.tool_calls[0].result["error"]["code"] == "permission_denied"
    (record,) = audit.records()
    assert {k: record[k] for k in ("identity", "tool", "arguments", "decision", "outcome")} == {
        "identity": "bob",
        "tool": "deploy",
        "arguments": {"text": "prod"},
        "decision": "deny",
        "outcome": "permission_denied",
    }
    assert record["idempotency_key"] == KEY


def test_an_approved_effectful_call_runs_after_the_approver_saw_it() -> None:
    ran: list[str] = []
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    model = ListModel([ModelReply(None, (call("c1", "deploy", text="prod"),)), ModelReply("ok")])
    runner = AgentRunner(
        "bob",
        model,
        ToolRegistry([effect_tool(ran)]),
        system_prompt="S",
        policy=PermissionPolicy({"deploy": "ask"}, approver),
    )
    runner.run("go")
    assert asked == [ApprovalRequest("bob", "deploy", {"text": "prod"})]
    assert ran == ["prod"]


def test_without_a_policy_effectful_tools_are_denied_and_plain_tools_run() -> None:
    ran: list[str] = []
    contexts: list[ToolContext] = []
    model = ListModel(
        [
            ModelReply(None, (call("c1", "write_file", text="x"), call("c2", "echo", text="y"))),
            ModelReply("ok"),
        ]
    )
    tools = ToolRegistry([effect_tool(ran, "write_file"), echo_tool(contexts)])
    result = AgentRunner("alice", model, tools, system_prompt="S").run("go")
    assert [r.outcome for r in result.tool_calls] == ["permission_denied", "ok"]
    assert ran == []


def test_the_turn_limit_stops_a_model_that_never_answers() -> None:
    model = ListModel([ModelReply(None, (call(f"c{i}", "echo", text="again"),)) for i in range(3)])
    runner = AgentRunner(
        "alice", model, ToolRegistry([echo_tool([])]), system_prompt="S", max_turns=3
    )
    result = runner.run("loop")
    assert (result.stopped, result.turns, len(result.tool_calls)) == ("turn_limit", 3, 3)
    assert "3 model calls" in result.final_text
    assert model.replies == []


def test_max_turns_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        AgentRunner("a", ListModel([]), ToolRegistry(), system_prompt="S", max_turns=0)


def test_a_tool_bug_propagates_and_is_still_audited() -> None:
    def broken(args: EchoInput, context: ToolContext) -> dict[str, Any]:
        raise RuntimeError("bug")

    audit = AuditTrail.in_memory()
    model = ListModel([ModelReply(None, (call("c1", "echo", text="x"),))])
    tools = ToolRegistry([ToolDefinition("echo", "Echo.", EchoInput, broken)])
    runner = AgentRunner("alice", model, tools, system_prompt="S", audit=audit)
    with pytest.raises(RuntimeError, match="bug"):
        runner.run("go")
    assert [(r["tool"], r["outcome"]) for r in audit.records()] == [("echo", "raised")]
    # No assistant tool call is left without its tool message: the next run starts clean.
    assert runner.messages == [{"role": "system", "content": "S"}]


# --- idempotency -------------------------------------------------------------------


def effectful_replies() -> list[ModelReply]:
    return [
        ModelReply(
            None,
            (
                call("c1", "write_file", path="out.txt", content="result\n"),
                call("c2", "shell", command="echo ran >> shell.log"),
                call("c3", "read_file", path="out.txt"),
            ),
        ),
        ModelReply("done"),
    ]


def workspace_runner(
    workspace: Path, ledger: IdempotencyLedger, audit: AuditTrail | None = None
) -> AgentRunner:
    return AgentRunner(
        "alice",
        ListModel(effectful_replies()),
        ToolRegistry(list(workspace_tool_definitions(workspace))),
        system_prompt="S",
        policy=teammate_policy(approve_all),
        audit=audit,
        ledger=ledger,
    )


def test_a_retried_run_with_the_same_key_replays_effects_instead_of_repeating_them(
    tmp_path: Path,
) -> None:
    ledger = IdempotencyLedger.in_memory()
    audit = AuditTrail.in_memory()
    first = workspace_runner(tmp_path, ledger, audit).run("task", idempotency_key=KEY)
    (tmp_path / "out.txt").write_text("changed by someone else\n")

    retry = workspace_runner(tmp_path, ledger, audit).run("task", idempotency_key=KEY)

    assert (tmp_path / "shell.log").read_text() == "ran\n"
    assert (tmp_path / "out.txt").read_text() == "changed by someone else\n"
    assert [r.result for r in retry.tool_calls[:2]] == [r.result for r in first.tool_calls[:2]]
    assert [r.decision for r in retry.tool_calls] == ["replayed", "replayed", "allow"]
    # Non-effectful tools always run: read_file sees the current file.
    assert retry.tool_calls[2].result["content"] == "changed by someone else\n"
    assert [(r["tool"], r["decision"]) for r in audit.records()[3:]] == [
        ("write_file", "replayed"),
        ("shell", "replayed"),
        ("read_file", "allow"),
    ]


def test_a_different_key_runs_the_effects_again(tmp_path: Path) -> None:
    ledger = IdempotencyLedger.in_memory()
    workspace_runner(tmp_path, ledger).run("task", idempotency_key=KEY)
    result = workspace_runner(tmp_path, ledger).run("task", idempotency_key=OTHER_KEY)
    assert (tmp_path / "shell.log").read_text() == "ran\nran\n"
    assert [r.decision for r in result.tool_calls] == ["allow", "allow", "allow"]


def test_runs_without_a_key_are_never_recorded(tmp_path: Path) -> None:
    ledger = IdempotencyLedger.in_memory()
    workspace_runner(tmp_path, ledger).run("task")
    workspace_runner(tmp_path, ledger).run("task")
    assert (tmp_path / "shell.log").read_text() == "ran\nran\n"
    assert len(ledger) == 0


def test_the_same_call_twice_in_one_run_runs_twice_and_replays_twice(tmp_path: Path) -> None:
    def runner(ledger: IdempotencyLedger) -> AgentRunner:
        twice = (
            call("c1", "shell", command="echo ran >> shell.log"),
            call("c2", "shell", command="echo ran >> shell.log"),
        )
        return AgentRunner(
            "alice",
            ListModel([ModelReply(None, twice), ModelReply("done")]),
            ToolRegistry(list(workspace_tool_definitions(tmp_path))),
            system_prompt="S",
            policy=teammate_policy(approve_all),
            ledger=ledger,
        )

    ledger = IdempotencyLedger.in_memory()
    runner(ledger).run("task", idempotency_key=KEY)
    retry = runner(ledger).run("task", idempotency_key=KEY)
    assert (tmp_path / "shell.log").read_text() == "ran\nran\n"
    assert [r.decision for r in retry.tool_calls] == ["replayed", "replayed"]


def test_a_denied_call_is_not_recorded_so_an_approved_retry_runs_it(tmp_path: Path) -> None:
    ledger = IdempotencyLedger.in_memory()
    answers = iter([False, True])
    model = ListModel(
        [ModelReply(None, (call("c1", "shell", command="echo ran >> shell.log"),)), ModelReply("x")]
    )
    tools = ToolRegistry(list(workspace_tool_definitions(tmp_path)))

    def make_runner(model: ListModel) -> AgentRunner:
        policy = teammate_policy(lambda request: next(answers))
        return AgentRunner("alice", model, tools, system_prompt="S", policy=policy, ledger=ledger)

    assert make_runner(model).run("t", idempotency_key=KEY).tool_calls[0].decision == "deny"
    model_again = ListModel(
        [ModelReply(None, (call("c1", "shell", command="echo ran >> shell.log"),)), ModelReply("x")]
    )
    assert make_runner(model_again).run("t", idempotency_key=KEY).tool_calls[0].decision == "allow"
    assert (tmp_path / "shell.log").read_text() == "ran\n"


def test_the_workspace_ledger_survives_a_new_process(tmp_path: Path) -> None:
    first = IdempotencyLedger.for_workspace(tmp_path)
    workspace_runner(tmp_path, first).run("task", idempotency_key=KEY)
    first.close()
    reopened = IdempotencyLedger.for_workspace(tmp_path)
    result = workspace_runner(tmp_path, reopened).run("task", idempotency_key=KEY)
    reopened.close()
    assert (tmp_path / ".agent_tutorial" / "idempotency.sqlite3").is_file()
    assert [r.decision for r in result.tool_calls] == ["replayed", "replayed", "allow"]
    assert (tmp_path / "shell.log").read_text() == "ran\n"


def test_the_workspace_ledger_refuses_a_symlinked_file(tmp_path: Path) -> None:
    (tmp_path / ".agent_tutorial").mkdir()
    (tmp_path / "elsewhere.sqlite3").write_bytes(b"")
    (tmp_path / ".agent_tutorial" / "idempotency.sqlite3").symlink_to(
        tmp_path / "elsewhere.sqlite3"
    )
    with pytest.raises(TaskError, match="symbolic link") as raised:
        IdempotencyLedger.for_workspace(tmp_path)
    assert raised.value.code == "unsafe_store_path"


# --- the scripted teammate ------------------------------------------------------------


def teammate_runner(
    store: SqliteTaskStore,
    workspace: Path,
    *,
    write_notes: bool = False,
    policy: PermissionPolicy | None = None,
    name: str = "alice",
) -> AgentRunner:
    tools = ToolRegistry()
    for tool in workspace_tool_definitions(workspace):
        tools.register(tool)
    for tool in task_tools(store):
        if tool.name != "create_task":
            tools.register(tool)
    return AgentRunner(
        name,
        teammate_script(write_notes=write_notes),
        tools,
        system_prompt=f"You are {name}.",
        policy=policy,
    )


def test_the_scripted_teammate_completes_its_auto_claimed_task(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    task = store.create_task("A", "Independent task A.")
    claim = store.claim_next("alice")
    assert claim is not None
    runner = teammate_runner(store, tmp_path)

    result = runner.run(auto_claimed_message(claim), idempotency_key=claim.claim_token)

    assert result.final_text == "Completed A."
    assert [(r.tool, r.arguments) for r in result.tool_calls] == [
        ("complete_task", {"task_id": task.id, "claim_token": claim.claim_token})
    ]
    assert store.get_task(task.id).status is TaskStatus.COMPLETED


def test_the_scripted_teammate_reports_a_refused_completion_without_retrying(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None
    # bob runs alice's claim: the store refuses, the task stays with alice.
    runner = teammate_runner(store, tmp_path, name="bob")
    result = runner.run(auto_claimed_message(claim))
    assert result.final_text == "Could not complete A: claim_mismatch."
    assert (result.turns, len(result.tool_calls)) == (2, 1)
    assert store.get_task(claim.task.id).status is TaskStatus.IN_PROGRESS


def test_the_scripted_teammate_can_write_notes_before_completing(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    store.create_task("A", "Write the parser.")
    claim = store.claim_next("alice")
    assert claim is not None
    runner = teammate_runner(store, tmp_path, write_notes=True, policy=teammate_policy(approve_all))
    result = runner.run(auto_claimed_message(claim), idempotency_key=claim.claim_token)
    assert [r.tool for r in result.tool_calls] == ["write_file", "complete_task"]
    assert (tmp_path / notes_path({"id": claim.task.id})).read_text() == (
        "# A\n\nWrite the parser.\n"
    )
    assert result.final_text == "Completed A."


def test_a_teammate_whose_note_is_denied_does_not_complete_the_task(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None
    runner = teammate_runner(store, tmp_path, write_notes=True)
    result = runner.run(auto_claimed_message(claim))
    assert result.final_text == "Could not write notes for A: permission_denied."
    # Nobody completes on the model's behalf; the lease will simply run out.
    assert store.get_task(claim.task.id).status is TaskStatus.IN_PROGRESS


def test_the_scripted_teammate_acknowledges_a_plain_message(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    result = teammate_runner(store, tmp_path).run("Lead: please keep notes short.")
    assert (result.final_text, result.tool_calls) == ("Acknowledged.", ())


def test_a_teammate_that_only_says_done_leaves_the_task_in_progress(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    store.create_task("A")
    claim = store.claim_next("alice")
    assert claim is not None
    runner = AgentRunner(
        "alice",
        ListModel([ModelReply("I finished A, it is completed.")]),
        ToolRegistry(list(task_tools(store))),
        system_prompt="S",
    )
    runner.run(auto_claimed_message(claim), idempotency_key=claim.claim_token)
    assert store.get_task(claim.task.id).status is TaskStatus.IN_PROGRESS


def test_the_scripted_model_fails_loudly_on_a_conversation_it_does_not_expect() -> None:
    model = teammate_script()
    conversation: list[Message] = [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "list_tasks", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": '{"tasks": []}'},
    ]
    with pytest.raises(UnexpectedModelCall, match="no rule for this turn"):
        model.complete(conversation, ())
    with pytest.raises(UnexpectedModelCall, match="no user message"):
        model.complete([{"role": "system", "content": "S"}], ())
    with pytest.raises(UnexpectedModelCall, match="malformed auto-claimed"):
        model.complete(
            [{"role": "user", "content": "<auto-claimed-task>{}</auto-claimed-task>"}], ()
        )


def test_the_scripted_model_refuses_to_call_a_tool_it_was_not_offered() -> None:
    claim = {
        "task": {"id": "t", "subject": "A", "description": ""},
        "claim_token": "k",
        "lease_expires_at_utc": "2026-01-01T00:05:00Z",
    }
    message = f"<auto-claimed-task>{json.dumps(claim)}</auto-claimed-task>"
    with pytest.raises(UnexpectedModelCall, match="wants 'complete_task'"):
        teammate_script().complete([{"role": "user", "content": message}], ())


# --- the scripted Lead -----------------------------------------------------------------


def lead_runner(store: SqliteTaskStore, model: ScriptedModel, spawned: list[str]) -> AgentRunner:
    tools = ToolRegistry([*task_tools(store), spawn_tool(spawned)])
    return AgentRunner("lead", model, tools, system_prompt="You are the Lead.")


def test_the_scripted_lead_builds_the_minimal_scenario(store: SqliteTaskStore) -> None:
    spawned: list[str] = []
    model = minimal_scenario_lead_script()
    result = lead_runner(store, model, spawned).run("Create A, B and C; start alice and bob.")

    a, b, c = store.list_tasks()
    assert [(t.subject, t.blocked_by) for t in (a, b, c)] == [
        ("A", ()),
        ("B", ()),
        ("C", (a.id, b.id)),
    ]
    assert spawned == ["alice", "bob"]
    assert [r.tool for r in result.tool_calls] == [
        "create_task",
        "create_task",
        "create_task",
        "spawn_teammate",
        "spawn_teammate",
    ]
    assert [r.call_id for r in result.tool_calls] == [f"call_{i}" for i in range(1, 6)]
    assert (result.turns, model.calls, result.stopped) == (4, 4, "answered")
    assert result.final_text.startswith("Created 3 tasks: A, B, C (blocked by A, B).")


def test_the_scripted_lead_acknowledges_later_reports(store: SqliteTaskStore) -> None:
    runner = lead_runner(store, minimal_scenario_lead_script(), [])
    runner.run("Build the team.")
    result = runner.run("alice: Completed A.")
    assert (result.final_text, result.tool_calls) == ("Noted.", ())
    assert len(store.list_tasks()) == 3


def test_the_scripted_lead_creates_deeper_graphs_layer_by_layer(store: SqliteTaskStore) -> None:
    tasks = [
        ScriptedTask("D", "Deploy", blocked_by_names=("T",)),
        ScriptedTask("T", "Test", blocked_by_names=("B",)),
        ScriptedTask("B", "Build"),
    ]
    result = lead_runner(store, lead_script(tasks, ["carol"]), []).run("go")
    build, test, deploy = store.list_tasks()
    assert [build.subject, test.subject, deploy.subject] == ["Build", "Test", "Deploy"]
    assert (test.blocked_by, deploy.blocked_by) == ((build.id,), (test.id,))
    assert result.turns == 5


def test_the_scripted_lead_stops_when_a_tool_fails(store: SqliteTaskStore) -> None:
    spawned: list[str] = []
    tools = ToolRegistry([*task_tools(store), spawn_tool(spawned)])
    runner = AgentRunner(
        "lead",
        lead_script([ScriptedTask("A", "")], ["alice"]),
        tools,
        system_prompt="S",
    )
    result = runner.run("go")
    assert result.final_text == "Stopped: create_task failed with invalid_arguments."
    assert spawned == []


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([ScriptedTask("A", "A"), ScriptedTask("A", "B")], "unique"),
        ([ScriptedTask("A", "X"), ScriptedTask("B", "X")], "unique"),
        ([ScriptedTask("A", "A", blocked_by_names=("Z",))], "unknown"),
        (
            [
                ScriptedTask("A", "A", blocked_by_names=("B",)),
                ScriptedTask("B", "B", blocked_by_names=("A",)),
            ],
            "cycle",
        ),
    ],
)
def test_a_broken_lead_script_is_refused_up_front(tasks: list[ScriptedTask], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lead_script(tasks, ["alice"])


def test_the_minimal_scenario_runs_end_to_end_with_scripted_models(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    lead_runner(store, minimal_scenario_lead_script(), []).run("Build the team.")
    runners = {name: teammate_runner(store, tmp_path, name=name) for name in ("alice", "bob")}
    finals = []
    for name in ("alice", "bob", "alice", "bob"):
        claim = store.claim_next(name)
        if claim is not None:
            run = runners[name].run(auto_claimed_message(claim), idempotency_key=claim.claim_token)
            finals.append(f"{name}: {run.final_text}")
    a, b, c = store.list_tasks()
    assert all(t.status is TaskStatus.COMPLETED for t in (a, b, c))
    assert a.owner != b.owner
    assert finals == ["alice: Completed A.", "bob: Completed B.", "alice: Completed C."]


def test_a_runner_with_history_runs_keeps_the_system_prompt_and_the_last_runs_whole() -> None:
    # A teammate process lives for hundreds of tasks: its conversation must not grow
    # with every task (the prompt would reach the context limit), and the ids of new
    # tool calls must stay unique among the messages it kept.
    def echo_once_then_answer(turn: CurrentTurn) -> Reply:
        return Reply(text="done") if turn.outcomes else Reply(calls=(Call("echo", {"text": "x"}),))

    model = ScriptedModel([echo_once_then_answer])
    tools = ToolRegistry([echo_tool([])])
    runner = AgentRunner("alice", model, tools, system_prompt="sys", history_runs=2)
    for n in range(5):
        runner.run(f"say {n}")
    users = [m["content"] for m in runner.messages if m["role"] == "user"]
    assert runner.messages[0] == {"role": "system", "content": "sys"}
    assert users == ["say 3", "say 4"]
    ids = [c["id"] for m in runner.messages for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == 2
    with pytest.raises(ValueError):
        AgentRunner("a", model, ToolRegistry([]), system_prompt="s", history_runs=0)
