"""Who may run what: a per-tool permission policy with human approval, and an audit trail.

Working autonomously does not lower the bar for side effects: a teammate that
claimed a task by itself still needs approval to run `shell` or `write_file`,
and every tool call, with its decision and outcome, is written down.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from agent17.armour.file_failures import os_failure
from agent17.armour.paths import safe_state_file
from agent17.domain import Clock, TaskError, utc_now
from agent17.wire import utc_wire_time

Rule = Literal["allow", "deny", "ask"]
"""What the policy says about one tool: run it, refuse it, or ask a human."""

Decision = Literal["allow", "deny"]
"""The policy's answer for one call."""

AuditDecision = Literal["allow", "deny", "replayed", "refused", "fenced"]
"""What the runner did with a call: ran it, was denied, replayed a recorded result,
refused it before asking anyone (unknown tool, invalid arguments), or fenced it
off because the auto-claimed task's claim was no longer live."""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a human approver is shown: who wants to run which tool with which arguments."""

    identity: str
    tool: str
    arguments: Mapping[str, Any]


Approver = Callable[[ApprovalRequest], bool]
"""Answers an ApprovalRequest: True approves the call, False denies it."""


class PermissionPolicy:
    """Per-tool rules; a tool without a rule is allowed, unless it is effectful (then: ask).

    "ask" consults the approver; with no approver, "ask" means deny.
    """

    def __init__(self, rules: Mapping[str, Rule], ask: Approver | None = None) -> None:
        for tool, rule in rules.items():
            if rule not in ("allow", "deny", "ask"):
                raise ValueError(f"rule for {tool!r} must be allow, deny or ask, not {rule!r}")
        self.rules: dict[str, Rule] = dict(rules)
        self.ask = ask

    def rule_for(self, tool: str, *, effectful: bool) -> Rule:
        """The rule that applies to `tool` (an unlisted effectful tool needs approval)."""
        return self.rules.get(tool, "ask" if effectful else "allow")

    def decide(self, request: ApprovalRequest, *, effectful: bool) -> Decision:
        """Allow or deny one call, asking the approver when the rule says "ask"."""
        rule = self.rule_for(request.tool, effectful=effectful)
        if rule == "ask":
            return "allow" if self.ask is not None and self.ask(request) else "deny"
        return rule


def teammate_policy(ask: Approver | None = None) -> PermissionPolicy:
    """The default for teammates: shell and write_file need approval, the rest is allowed."""
    return PermissionPolicy({"shell": "ask", "write_file": "ask"}, ask)


def terminal_approver(stdin: TextIO, stdout: TextIO) -> Approver:
    """Ask y/N on a terminal; without a terminal (CI, pipes) every request is denied."""
    # Teammates run in threads: one question on the screen at a time.
    lock = threading.Lock()

    def approve(request: ApprovalRequest) -> bool:
        arguments = json.dumps(dict(request.arguments), sort_keys=True)
        with lock:
            if not stdin.isatty():
                stdout.write(f"[denied: no terminal] {request.identity} -> {request.tool}\n")
                stdout.flush()
                return False
            stdout.write(
                f"{request.identity} wants to run {request.tool} {arguments}. Allow? [y/N] "
            )
            stdout.flush()
            answer = stdin.readline()
        return answer.strip().lower() in ("y", "yes")

    return approve


class AuditTrail:
    """An append-only record of every tool call: one JSON object per line.

    Fields: seq, at_utc, identity, tool, arguments, decision, outcome
    (`"ok"` or an error code), idempotency_key. Each record is flushed and
    fsynced before `append` returns. Safe for threads and for many processes
    on one file (every teammate process of a workspace shares it): seq is taken
    from the file's last record under an exclusive flock, so it stays dense.
    A file the machine will not let us write (full, read-only, an I/O error,
    not this user's) is a TaskError `store_unavailable`, and a record that
    failed half way is cut off again: no torn line is left behind.
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, clock: Clock = utc_now) -> None:
        self.path = Path(path) if path is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._memory: list[dict[str, Any]] = []

    @classmethod
    def in_memory(cls, *, clock: Clock = utc_now) -> AuditTrail:
        """An audit trail kept in a list (tests, notebooks)."""
        return cls(None, clock=clock)

    @classmethod
    def for_workspace(
        cls, workspace: str | os.PathLike[str], *, clock: Clock = utc_now
    ) -> AuditTrail:
        """The workspace's trail: `<workspace>/.agent_tutorial/audit.jsonl`."""
        # The same path checks as the task database: no symlinks, hard links or escapes.
        return cls(safe_state_file(workspace, "audit.jsonl"), clock=clock)

    def append(
        self,
        *,
        identity: str,
        tool: str,
        arguments: Mapping[str, Any],
        decision: AuditDecision,
        outcome: str,
        idempotency_key: str | None,
    ) -> dict[str, Any]:
        """Write one record durably and return it."""
        with self._lock:
            record: dict[str, Any] = {
                "at_utc": utc_wire_time(self._clock()),
                "identity": identity,
                "tool": tool,
                "arguments": dict(arguments),
                "decision": decision,
                "outcome": outcome,
                "idempotency_key": idempotency_key,
            }
            if self.path is None:
                record["seq"] = len(self._memory) + 1
                self._memory.append(json.loads(_line(record)))
            else:
                self._append_numbered(self.path, record)
            return record

    def records(self) -> list[dict[str, Any]]:
        """Every record so far, oldest first."""
        if self.path is None:
            return [dict(record) for record in self._memory]
        try:
            with open(self.path, encoding="utf-8", errors="replace") as file:
                lines = [line for line in file if line.strip()]
        except FileNotFoundError:
            return []
        except OSError as error:
            raise os_failure(TaskError, self.path, error, "nothing was read") from None
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line torn by a crash mid-write is not a record
        return records

    @staticmethod
    def _append_numbered(path: Path, record: dict[str, Any]) -> None:
        outcome = "the record was not written"
        # O_NOFOLLOW: a symlink planted at the trail's path must not redirect our writes.
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(path, flags, 0o600)
        except OSError as error:
            raise os_failure(TaskError, path, error, outcome) from None
        try:
            # Closing the descriptor releases the lock, also when this process dies.
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            end = os.fstat(descriptor).st_size
            last, torn = _last_record(descriptor)
            record["seq"] = int(last.get("seq", 0)) + 1 if last is not None else 1
            # A record torn by a crash mid-write stays on its own line, never merged.
            data = (("\n" if torn else "") + _line(record)).encode("utf-8")
            try:
                while data:
                    data = data[os.write(descriptor, data) :]
                os.fsync(descriptor)
            except BaseException:
                # A full disk, an I/O error or a Ctrl-C between two writes: under the
                # lock nobody else appends, so cutting back to where this record began
                # leaves the file as it was, not with half a record in it.
                try:
                    os.ftruncate(descriptor, end)
                except OSError:
                    outcome = "part of the record may remain (a torn line, skipped when read)"
                raise
        except OSError as error:
            raise os_failure(TaskError, path, error, outcome) from None
        finally:
            os.close(descriptor)


def _line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, default=str) + "\n"


TAIL_CHUNK_BYTES = 65536


def _last_record(descriptor: int) -> tuple[dict[str, Any] | None, bool]:
    """The file's last whole record (None if there is none) and whether a torn line follows it."""
    end = os.fstat(descriptor).st_size
    if end == 0:
        return None, False
    torn = os.pread(descriptor, 1, end - 1) != b"\n"
    tail, position = b"", end
    while position > 0:  # read backwards, a chunk at a time
        start = max(0, position - TAIL_CHUNK_BYTES)
        tail = os.pread(descriptor, position - start, start) + tail
        position = start
        # The last piece is what follows the final newline (empty, or a torn line);
        # the first may be cut by the chunk's start unless the file starts there.
        pieces = tail.split(b"\n")[:-1]
        whole = pieces if position == 0 else pieces[1:]
        for raw in reversed(whole):
            try:
                value = json.loads(raw)
            except ValueError:
                continue  # a torn or foreign line: the one before it counts
            if isinstance(value, dict) and isinstance(value.get("seq"), int):
                return value, torn
    return None, torn
