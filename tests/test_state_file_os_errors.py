"""A full, read-only or failing disk under the state files: a coded refusal, never a traceback.

Every OS-level failure of a state file (the board, the mailbox, the ledger,
the audit trail, the lock files) is `store_unavailable`, whose message says
what to do; the transaction is rolled back, so the files are whole afterwards
and work again once the disk does. The disks are real (file_systems.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from file_systems import ext4_disk, read_only_view, tiny_disk
from store_fixtures import digest
from team_processes import Teammate, integrity, teammates, wait_until

from agent17 import Mailbox, SqliteTaskStore, TaskStatus
from agent17.agent.ledger import IdempotencyLedger, LedgerKey
from agent17.agent.permissions import AuditTrail
from agent17.domain import Refusal

__all__ = ["teammates"]  # the fixture, imported for the tests below


def _unavailable(action: Callable[[], object], advice: str = "") -> Refusal:
    with pytest.raises(Refusal) as caught:
        action()
    refusal = caught.value
    assert refusal.code == "store_unavailable", f"{refusal.code}: {refusal}"
    assert "To go on:" in refusal.message and advice in refusal.message, refusal.message
    assert "\n" not in refusal.message
    return refusal


def _events(store: SqliteTaskStore) -> list[tuple[str, str]]:
    return [(event.kind.value, event.task_id) for event in store.events()]


def _audit(trail: AuditTrail, size: int = 10) -> None:
    trail.append(
        identity="alice", tool="shell", arguments={"command": "x" * size},
        decision="allow", outcome="ok", idempotency_key=None,
    )  # fmt: skip


# -- a full disk ---------------------------------------------------------------------------------


def test_a_full_disk_refuses_every_board_write_and_the_same_store_works_once_there_is_room(
    tmp_path: Path,
) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        store = SqliteTaskStore(disk.root / "workspace")
        a, b, _ = store.create_tasks([(f"T{n}", "", ()) for n in range(3)])
        held = store.claim_task(a.id, "alice")
        board, events = store.list_tasks(), _events(store)
        disk.fill()

        free_space = "free space on the file system"
        _unavailable(lambda: store.claim_next("bob"), free_space)
        _unavailable(lambda: store.claim_task(b.id, "bob"), free_space)
        _unavailable(lambda: store.create_tasks([("big", "x" * 100_000, ())]), free_space)
        _unavailable(lambda: store.complete_task(a.id, "alice", held.claim_token), free_space)
        for read in (store.list_tasks, store.events, lambda: store.get_task(a.id)):
            try:
                read()  # a read may still be answered from what is on the disk
            except Refusal as refusal:
                assert refusal.code == "store_unavailable"

        disk.free()
        assert store.list_tasks() == board and _events(store) == events  # nothing half written
        store.complete_task(a.id, "alice", held.claim_token)
        claim = store.claim_next("bob")
        assert claim is not None and claim.task.id == b.id
        store.close()
        assert integrity(store.path) == ["ok"]


def test_a_full_disk_refuses_mailbox_and_ledger_writes_with_the_same_code(tmp_path: Path) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        workspace = disk.root / "workspace"
        mailbox, ledger = Mailbox(workspace), IdempotencyLedger.for_workspace(workspace)
        key = LedgerKey.of("key", 0, "shell", {"command": "make"})
        disk.fill()
        body = '{"content": "' + "x" * 50_000 + '"}'
        _unavailable(lambda: mailbox.send("alice", sender="lead", kind="text", body=body))
        _unavailable(lambda: ledger.record(key, {"stdout": "y" * 50_000}))
        disk.free()
        assert mailbox.messages() == [] and ledger.lookup(key) is None
        ledger.record(key, {"stdout": "ok"})
        assert ledger.lookup(key) == {"stdout": "ok"}
        mailbox.close()
        ledger.close()


def test_an_audit_record_cut_off_by_a_full_disk_leaves_no_torn_line_and_no_gap_in_seq(
    tmp_path: Path,
) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        trail = AuditTrail.for_workspace(disk.root / "workspace")
        _audit(trail)
        assert trail.path is not None
        before = digest(trail.path)
        disk.fill(leave=16 * 1024)  # room for part of the next record, not all of it
        _unavailable(lambda: _audit(trail, size=200_000), "free space")
        assert digest(trail.path) == before
        disk.free()
        _audit(trail)
        assert [record["seq"] for record in trail.records()] == [1, 2]


def test_a_lock_file_that_cannot_be_created_is_store_unavailable(tmp_path: Path) -> None:
    with tiny_disk(tmp_path / "disk", inodes=64) as disk:
        mailbox = Mailbox(disk.root / "workspace")
        disk.use_up_inodes()
        _unavailable(lambda: mailbox.hold_exclusive("teammate-alice"), "free space")
        disk.free()
        mailbox.hold_exclusive("teammate-alice").release()
        mailbox.close()


def test_a_new_board_whose_schema_does_not_fit_is_refused_and_made_whole_once_there_is_room(
    tmp_path: Path,
) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        workspace = disk.root / "workspace"
        (workspace / ".agent_tutorial").mkdir(parents=True)
        disk.fill(leave=8 * 1024)  # the state folder is there; the schema is not
        _unavailable(lambda: SqliteTaskStore(workspace), "free space")
        disk.free()
        store = SqliteTaskStore(workspace)
        assert store.list_tasks() == []
        assert store.create_task("A").subject == "A"
        store.close()


def test_a_workspace_that_cannot_be_created_on_a_full_disk_is_store_unavailable(
    tmp_path: Path,
) -> None:
    with tiny_disk(tmp_path / "disk", inodes=64) as disk:
        disk.use_up_inodes()
        for opener in (SqliteTaskStore, Mailbox, IdempotencyLedger.for_workspace):
            _unavailable(lambda: opener(disk.root / "new"), "free space")  # noqa: B023
        _unavailable(lambda: AuditTrail.for_workspace(disk.root / "new"), "free space")


# -- a read-only file system ------------------------------------------------------------------


def _opened_and_written(kind: str, workspace: Path) -> None:
    if kind == "audit":
        _audit(AuditTrail.for_workspace(workspace))
        return
    if kind == "board":
        board = SqliteTaskStore(workspace)
        with contextlib.closing(board):
            board.create_task("B")
    elif kind == "mailbox":
        with Mailbox(workspace) as mailbox:
            mailbox.send("alice", sender="lead", kind="text", body='{"content": "hi"}')
    else:
        ledger = IdempotencyLedger.for_workspace(workspace)
        with contextlib.closing(ledger):
            ledger.record(LedgerKey.of("k", 0, "shell", {}), {})


@pytest.mark.parametrize("kind", ["board", "mailbox", "ledger", "audit"])
def test_every_state_file_on_a_read_only_file_system_is_store_unavailable_and_untouched(
    tmp_path: Path, kind: str
) -> None:
    workspace = tmp_path / "workspace"
    for each in ("board", "mailbox", "ledger", "audit"):
        _opened_and_written(each, workspace)  # every file exists, closed and whole
    folder = workspace / ".agent_tutorial"
    before = {entry.name: digest(entry) for entry in folder.iterdir()}
    with read_only_view(workspace, tmp_path / "read-only") as view:
        _unavailable(lambda: _opened_and_written(kind, view), "writable")
    assert {entry.name: digest(entry) for entry in folder.iterdir()} == before


def test_a_new_workspace_on_a_read_only_file_system_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with read_only_view(tmp_path / "empty", tmp_path / "read-only") as view:
        _unavailable(lambda: SqliteTaskStore(view / "workspace"), "writable")
        _unavailable(lambda: SqliteTaskStore(view), "writable")
    assert list((tmp_path / "empty").iterdir()) == []


# -- a failing disk (every I/O is EIO) ------------------------------------------------------------


def test_a_disk_failing_under_an_open_board_is_store_unavailable_and_keeps_every_commit(
    tmp_path: Path,
) -> None:
    with ext4_disk(tmp_path / "disk") as disk:
        workspace = disk.root / "workspace"
        store = SqliteTaskStore(workspace)
        store.create_tasks([(f"T{n}", "", ()) for n in range(4)])
        first = store.claim_next("alice")
        assert first is not None
        committed = [(task.subject, task.status, task.owner) for task in store.list_tasks()]
        trail = AuditTrail.for_workspace(workspace)
        disk.shut_down()

        _unavailable(lambda: store.claim_next("bob"), "the disk may be failing")
        _unavailable(lambda: store.create_task("lost"), "the disk may be failing")
        _unavailable(lambda: _audit(trail), "the disk may be failing")
        _unavailable(lambda: SqliteTaskStore(workspace), "the disk may be failing")
        store.close()

        disk.remount()
        path = workspace / ".agent_tutorial" / "tasks.sqlite3"
        reopened = SqliteTaskStore(workspace)
        board = [(task.subject, task.status, task.owner) for task in reopened.list_tasks()]
        assert board == committed
        reopened.close()
        assert integrity(path) == ["ok"]


# -- a real teammate whose disk fills while it claims -------------------------------------------


def _claimed(path: Path) -> int:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        (count,) = connection.execute(
            "SELECT count(*) FROM tasks WHERE status != 'pending'"
        ).fetchone()
        return int(count)
    finally:
        connection.close()


def test_a_teammate_whose_disk_fills_while_it_claims_exits_with_one_line_and_the_board_is_whole(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    with tiny_disk(tmp_path / "disk", size="4m") as disk:
        workspace = disk.root / "workspace"
        lead = SqliteTaskStore(workspace)
        tasks = lead.create_tasks([(f"T{n}", "", ()) for n in range(40)])
        lead.close()
        alice = teammates(
            workspace, "alice", "--max-idle-polls", "2", "--poll-interval", "0.05",
            "--work-seconds", "0.05",
        )  # fmt: skip
        path = workspace / ".agent_tutorial" / "tasks.sqlite3"
        wait_until(lambda: _claimed(path) >= 2, "alice has claimed tasks")
        disk.fill()

        assert alice.finish() == 1
        assert len(alice.errors) == 1, alice.errors
        assert "store_unavailable" in alice.errors[0] and "free space" in alice.errors[0]
        assert not any("Traceback" in line for line in alice.seen + alice.errors)

        disk.free()
        assert integrity(path) == ["ok"]
        board = SqliteTaskStore(workspace)
        assert [task.id for task in board.list_tasks()] == [task.id for task in tasks]
        done = [task for task in board.list_tasks() if task.status is TaskStatus.COMPLETED]
        assert 0 < len(done) < len(tasks)  # she worked, and the full disk stopped her
        completed = [event.task_id for event in board.events() if event.kind == "completed"]
        assert sorted(completed) == sorted(task.id for task in done)
        board.close()
