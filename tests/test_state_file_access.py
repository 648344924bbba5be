"""State files this process may not use: another user's, immutable, in /proc, or locked too long.

Each is `store_unavailable` with what to do, never a PermissionError or a
driver traceback, and never `store_unreadable` (that would send the user to a
backup of a board that is fine). Permissions are tested for real, in a child
process running as the user `nobody` (file_systems.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from file_systems import as_nobody, folder_for_nobody, immutable
from store_fixtures import digest

from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.ledger import IdempotencyLedger
from agent17.agent.permissions import AuditTrail
from agent17.armour import state_file
from agent17.domain import Refusal

OPENERS: dict[str, Callable[[Path], object]] = {
    "board": SqliteTaskStore,
    "mailbox": Mailbox,
    "ledger": IdempotencyLedger.for_workspace,
    "audit": lambda workspace: AuditTrail.for_workspace(workspace).append(
        identity="alice", tool="shell", arguments={}, decision="allow", outcome="ok",
        idempotency_key=None,
    ),
}  # fmt: skip


def _unavailable(action: Callable[[], object], advice: str) -> Refusal:
    with pytest.raises(Refusal) as caught:
        action()
    refusal = caught.value
    assert refusal.code == "store_unavailable", f"{refusal.code}: {refusal}"
    assert "To go on:" in refusal.message and advice in refusal.message, refusal.message
    return refusal


# -- another user's files: the child runs as nobody -------------------------------------------

AS_NOBODY = """
import json, sys
from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.ledger import IdempotencyLedger
from agent17.agent.permissions import AuditTrail
openers = {
    "board": SqliteTaskStore,
    "mailbox": Mailbox,
    "ledger": IdempotencyLedger.for_workspace,
    "audit": lambda w: AuditTrail.for_workspace(w).append(
        identity="bob", tool="shell", arguments={}, decision="allow", outcome="ok",
        idempotency_key=None),
}
become_nobody()
try:
    openers[sys.argv[1]](sys.argv[2])
    print(json.dumps({"raised": None}))
except Exception as error:
    print(json.dumps({"raised": type(error).__name__, "code": getattr(error, "code", None),
                      "message": str(error)}))
"""


def _state_files(workspace: Path) -> dict[str, str]:
    folder = workspace / ".agent_tutorial"
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir())}


@pytest.mark.parametrize("mode", [0o644, 0o600], ids=["readable", "private"])
@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_state_files_of_another_user_are_store_unavailable_for_nobody_and_left_as_they_are(
    kind: str, mode: int
) -> None:
    with folder_for_nobody() as root:
        workspace = root / "workspace"
        for opener in OPENERS.values():
            opened = opener(workspace)
            getattr(opened, "close", lambda: None)()
        folder = workspace / ".agent_tutorial"
        folder.chmod(0o755)
        for entry in folder.iterdir():
            entry.chmod(mode)
        before = _state_files(workspace)
        result = as_nobody(AS_NOBODY, kind, str(workspace))
        assert result["code"] == "store_unavailable", result
        assert "may not write" in result["message"] or "Permission denied" in result["message"]
        assert "\n" not in result["message"]
        assert _state_files(workspace) == before


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_a_workspace_nobody_may_not_write_is_store_unavailable_and_gets_no_state_folder(
    kind: str,
) -> None:
    with folder_for_nobody() as root:
        workspace = root / "workspace"
        workspace.mkdir(mode=0o755)
        result = as_nobody(AS_NOBODY, kind, str(workspace))
        assert result["code"] == "store_unavailable", result
        assert "Permission denied" in result["message"], result
        assert list(workspace.iterdir()) == []


# -- immutable files and folders (chattr +i) ----------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_an_immutable_workspace_is_store_unavailable_not_a_permission_traceback(
    tmp_path: Path, kind: str
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with immutable(workspace):
        _unavailable(lambda: OPENERS[kind](workspace), "chattr -i")
    assert list(workspace.iterdir()) == []


def test_a_wal_made_immutable_under_an_open_board_refuses_writes_until_it_is_writable_again(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(tmp_path)
    a = store.create_task("A")
    wal = store.path.with_name("tasks.sqlite3-wal")
    with immutable(wal):
        _unavailable(lambda: store.claim_next("alice"), "chattr -i")
    claim = store.claim_next("alice")
    assert claim is not None and claim.task.id == a.id
    assert [event.kind.value for event in store.events()] == ["created", "claimed"]


def test_a_state_folder_made_immutable_refuses_a_new_lock_file_and_an_audit_record(
    tmp_path: Path,
) -> None:
    mailbox = Mailbox(tmp_path)
    folder = mailbox.path.parent
    trail = AuditTrail.for_workspace(tmp_path)
    with immutable(folder):
        _unavailable(lambda: mailbox.hold_exclusive("teammate-alice"), "chattr -i")
        _unavailable(lambda: OPENERS["audit"](tmp_path), "chattr -i")
    mailbox.hold_exclusive("teammate-alice").release()
    assert trail.records() == []
    mailbox.close()


def test_an_immutable_audit_trail_is_store_unavailable_and_unchanged(tmp_path: Path) -> None:
    OPENERS["audit"](tmp_path)
    trail = AuditTrail.for_workspace(tmp_path)
    assert trail.path is not None
    before = digest(trail.path)
    with immutable(trail.path):
        _unavailable(lambda: OPENERS["audit"](tmp_path), "chattr -i")
    assert digest(trail.path) == before and len(trail.records()) == 1


# -- a workspace no state file can be made in -------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_proc_1_as_the_workspace_is_store_unavailable(kind: str) -> None:
    _unavailable(lambda: OPENERS[kind](Path("/proc/1")), "writable local disk")


# -- a write lock held past the busy timeout --------------------------------------------------


def test_a_write_lock_held_past_the_busy_timeout_is_store_unavailable_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_file, "BUSY_TIMEOUT_SECONDS", 0.05)  # not 30 s of waiting
    store = SqliteTaskStore(tmp_path)
    store.create_task("A")
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        _unavailable(lambda: store.claim_next("alice"), "fuser")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [event.kind.value for event in store.events()] == ["created"]
    assert store.claim_next("alice") is not None


def test_the_refusal_is_one_json_safe_line(tmp_path: Path) -> None:
    # Tools hand refusals to the model as JSON, and a teammate prints them as its last line.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with immutable(workspace):
        refusal = _unavailable(lambda: SqliteTaskStore(workspace), "chattr -i")
    assert "\n" not in refusal.message
    assert json.loads(json.dumps({"code": refusal.code, "message": refusal.message}))
