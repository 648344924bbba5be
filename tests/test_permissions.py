"""The permission policy asks or refuses as configured; the audit trail is durable and complete."""

from __future__ import annotations

import io
import json
import multiprocessing
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent17.agent.permissions import (
    ApprovalRequest,
    AuditTrail,
    PermissionPolicy,
    teammate_policy,
    terminal_approver,
)
from agent17.domain import TaskError

SHELL = ApprovalRequest("alice", "shell", {"command": "ls"})
FIXED_CLOCK = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731


class TerminalInput(io.StringIO):
    """A stdin double that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def test_allow_and_deny_rules_do_not_consult_the_approver() -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    policy = PermissionPolicy({"shell": "deny", "read_file": "allow"}, approver)
    assert policy.decide(SHELL, effectful=True) == "deny"
    assert policy.decide(ApprovalRequest("alice", "read_file", {}), effectful=False) == "allow"
    assert asked == []


def test_ask_passes_the_request_to_the_approver_and_follows_its_answer() -> None:
    answers = iter([True, False])
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        seen.append(request)
        return next(answers)

    policy = PermissionPolicy({"shell": "ask"}, approver)
    assert policy.decide(SHELL, effectful=True) == "allow"
    assert policy.decide(SHELL, effectful=True) == "deny"
    assert seen == [SHELL, SHELL]


def test_ask_without_an_approver_denies() -> None:
    assert PermissionPolicy({"shell": "ask"}).decide(SHELL, effectful=True) == "deny"


def test_an_unlisted_effectful_tool_needs_approval_but_a_plain_one_is_allowed() -> None:
    policy = PermissionPolicy({})
    assert policy.rule_for("deploy", effectful=True) == "ask"
    assert policy.decide(ApprovalRequest("bob", "deploy", {}), effectful=True) == "deny"
    assert policy.decide(ApprovalRequest("bob", "list_tasks", {}), effectful=False) == "allow"


def test_the_teammate_policy_asks_for_shell_and_write_file_only() -> None:
    policy = teammate_policy()
    assert policy.rule_for("shell", effectful=True) == "ask"
    assert policy.rule_for("write_file", effectful=True) == "ask"
    assert policy.rule_for("complete_task", effectful=False) == "allow"
    assert policy.rule_for("read_file", effectful=False) == "allow"


def test_an_unknown_rule_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="allow, deny or ask"):
        PermissionPolicy({"shell": "maybe"})  # type: ignore[dict-item]


@pytest.mark.parametrize(("answer", "approved"), [("y\n", True), ("YES\n", True), ("\n", False)])
def test_terminal_approver_asks_y_n_on_a_terminal(answer: str, approved: bool) -> None:
    stdout = io.StringIO()
    approve = terminal_approver(TerminalInput(answer), stdout)
    assert approve(SHELL) is approved
    assert stdout.getvalue() == 'alice wants to run shell {"command": "ls"}. Allow? [y/N] '


def test_terminal_approver_denies_without_a_terminal_and_reads_nothing() -> None:
    stdin, stdout = io.StringIO("y\n"), io.StringIO()
    assert terminal_approver(stdin, stdout)(SHELL) is False
    assert stdin.read() == "y\n"
    assert "denied: no terminal" in stdout.getvalue()


def append_call(trail: AuditTrail, tool: str = "shell", outcome: str = "ok") -> None:
    trail.append(
        identity="alice",
        tool=tool,
        arguments={"command": "ls"},
        decision="allow",
        outcome=outcome,
        idempotency_key="00000000-0000-4000-8000-000000001711",
    )


def test_audit_trail_writes_one_json_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / ".agent_tutorial" / "audit.jsonl"
    trail = AuditTrail(path, clock=FIXED_CLOCK)
    append_call(trail)
    append_call(trail, "write_file", "permission_denied")
    lines = path.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]
    assert json.loads(lines[0]) == {
        "seq": 1,
        "at_utc": "2026-01-01T00:00:00Z",
        "identity": "alice",
        "tool": "shell",
        "arguments": {"command": "ls"},
        "decision": "allow",
        "outcome": "ok",
        "idempotency_key": "00000000-0000-4000-8000-000000001711",
    }
    assert trail.records() == [json.loads(line) for line in lines]


def test_a_reopened_audit_trail_continues_the_sequence(tmp_path: Path) -> None:
    append_call(AuditTrail.for_workspace(tmp_path))
    reopened = AuditTrail.for_workspace(tmp_path)
    append_call(reopened)
    assert [record["seq"] for record in reopened.records()] == [1, 2]


def test_audit_trail_refuses_to_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "audit.jsonl"
    link.symlink_to(target)
    with pytest.raises(TaskError) as refused:
        append_call(AuditTrail(link))
    assert refused.value.code == "unsafe_store_path"
    assert target.read_text() == ""


def test_concurrent_appends_get_distinct_sequence_numbers(tmp_path: Path) -> None:
    trail = AuditTrail(tmp_path / "audit.jsonl")
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(10):
            append_call(trail)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(record["seq"] for record in trail.records()) == list(range(1, 81))


def test_in_memory_audit_trail_reads_back_copies() -> None:
    trail = AuditTrail.in_memory(clock=FIXED_CLOCK)
    append_call(trail)
    trail.records()[0]["tool"] = "tampered"
    assert [record["tool"] for record in trail.records()] == ["shell"]
    assert trail.path is None


def _append_from_a_process(path: str, start: Any, count: int) -> None:
    trail = AuditTrail(path)
    start.wait(30)
    for _ in range(count):
        append_call(trail)


def test_teammate_processes_sharing_one_trail_get_one_dense_sequence(tmp_path: Path) -> None:
    # Every teammate process of a workspace appends to the same audit.jsonl; a
    # counter per process once gave 2,000 records only ~300 distinct numbers.
    path = tmp_path / "audit.jsonl"
    append_call(AuditTrail(path))  # an earlier process's record
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    workers = [
        context.Process(target=_append_from_a_process, args=(str(path), start, 25))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    seqs = [json.loads(line)["seq"] for line in path.read_text().splitlines()]
    assert seqs == list(range(1, 102))


def test_a_record_torn_by_a_crash_is_skipped_and_the_next_one_starts_its_own_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    trail = AuditTrail(path, clock=FIXED_CLOCK)
    append_call(trail)
    with path.open("a") as file:
        file.write('{"seq": 2, "tool": "sh')  # the process died mid-write
    append_call(trail, "write_file")
    assert [(r["seq"], r["tool"]) for r in trail.records()] == [(1, "shell"), (2, "write_file")]
    assert len(path.read_text().splitlines()) == 3
