"""A workspace copied or moved whole opens whole at its new place, -wal included (issue 24, 1).

The story: a teammate holds a task, three more tasks are created and exist only
in the -wal, the teammate is killed (SIGKILL) or paused (SIGSTOP), and the
whole workspace is copied (cp -a, tar, rsync -a) or moved to another file
system. Every file gets a new inode, the database and its -wal stay together,
and replaying the -wal is exactly right: the copy must open with all six tasks
and the claim, nothing set aside, and the original must still open.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from file_systems import tiny_disk
from store_fixtures import db_path
from wal_workers import add_and_die, claimed_board, file_alone, integrity

from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.ledger import IdempotencyLedger, LedgerKey
from agent17.armour import wal_owner
from agent17.armour.wal_file import read_record, state_of
from agent17.armour.wal_owner import WalSetAside

spawn = multiprocessing.get_context("spawn")
DEADLINE_SECONDS = 60.0
BEFORE = ["T1", "T2", "T3"]
LATER = ["T4", "T5", "T6"]
WHOLE = [("T1", "in_progress", "alice")] + [(s, "pending", None) for s in BEFORE[1:] + LATER]


def _run(*command: str | Path) -> None:
    subprocess.run([str(part) for part in command], check=True, timeout=DEADLINE_SECONDS)


@contextlib.contextmanager
def _copied(how: str, workspace: Path, tmp_path: Path) -> Iterator[Path]:
    """The workspace copied (or moved) the way `how` says; yields where it is now."""
    if how == "mv to another file system":
        with tiny_disk(tmp_path / "other-disk", size="32m", inodes=1000) as disk:
            _run("mv", workspace, disk.root / "workspace")
            yield disk.root / "workspace"
        return
    copy = tmp_path / "copy" / "workspace"
    copy.parent.mkdir()
    if how == "cp -a":
        _run("cp", "-a", workspace, copy)
    elif how == "tar":  # GNU tar keeps an mtime to the second only
        _run("tar", "-C", workspace.parent, "-cf", tmp_path / "workspace.tar", workspace.name)
        _run("tar", "-C", copy.parent, "-xf", tmp_path / "workspace.tar")
    elif how == "rsync -a":
        if shutil.which("rsync") is None:
            pytest.skip("rsync is not installed (scripts/setup.sh installs it)")
        _run("rsync", "-a", f"{workspace}/", f"{copy}/")
    yield copy


def _opens_whole(workspace: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", WalSetAside)  # nothing may be set aside
        board = SqliteTaskStore(workspace)
    tasks = [(task.subject, task.status.value, task.owner) for task in board.list_tasks()]
    board.close()
    assert tasks == WHOLE
    assert integrity(db_path(workspace)) == ["ok"]


@pytest.mark.parametrize("teammate", ["killed", "paused"])
@pytest.mark.parametrize("how", ["cp -a", "tar", "rsync -a", "mv to another file system"])
def test_a_workspace_copied_or_moved_with_its_wal_opens_whole_and_so_does_the_original(
    tmp_path: Path, how: str, teammate: str
) -> None:
    workspace = tmp_path / "workspace"
    with claimed_board(workspace, BEFORE, LATER, before_later=lambda path: None) as holder:
        os.kill(holder, signal.SIGKILL if teammate == "killed" else signal.SIGSTOP)
        path = db_path(workspace)
        assert path.with_name("tasks.sqlite3-wal").stat().st_size  # the claim, LATER
        with _copied(how, workspace, tmp_path) as copy:
            _opens_whole(copy)
        if how != "mv to another file system":
            _opens_whole(workspace)


def _write_mailbox(workspace: Path) -> None:
    Mailbox(workspace).send("alice", sender="lead", kind="text", body='{"content": "hi"}')


def _write_ledger(workspace: Path) -> None:
    ledger = IdempotencyLedger.for_workspace(workspace)
    ledger.record(LedgerKey.of("key", 0, "shell", {}), {"ok": True})


def _read_mailbox(workspace: Path) -> int:
    return len(Mailbox(workspace).messages("alice"))


def _read_ledger(workspace: Path) -> int:
    ledger = IdempotencyLedger.for_workspace(workspace)
    return int(ledger.lookup(LedgerKey.of("key", 0, "shell", {})) is not None)


def _crash_after(write: str, workspace: str) -> None:
    {"mailbox": _write_mailbox, "ledger": _write_ledger}[write](Path(workspace))
    os._exit(0)  # no close: the row is only in the -wal


@pytest.mark.parametrize("state_file", ["mailbox", "ledger"])
def test_every_state_file_keeps_its_wal_through_a_copy(tmp_path: Path, state_file: str) -> None:
    workspace = tmp_path / "workspace"
    writer = spawn.Process(target=_crash_after, args=(state_file, str(workspace)))
    writer.start()
    writer.join(DEADLINE_SECONDS)
    assert writer.exitcode == 0
    with _copied("tar", workspace, tmp_path) as copy, warnings.catch_warnings():
        warnings.simplefilter("error", WalSetAside)
        read = _read_mailbox if state_file == "mailbox" else _read_ledger
        assert read(copy) == 1


def test_agent17s_own_checkpoints_keep_the_record_true_for_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_owner, "CHECKPOINT_FRAMES", 100)  # a few checkpoints, quickly
    workspace = tmp_path / "workspace"
    board = SqliteTaskStore(workspace)
    subjects = [f"task {n}" for n in range(300)]
    for subject in subjects:  # a commit each: several times CHECKPOINT_FRAMES frames
        board.create_task(subject)
    path = db_path(workspace)
    assert len(file_alone(path)) > 200  # checkpoints ran: tasks are in the file itself
    record = read_record(path.with_name("tasks.sqlite3-wal-owner"))
    assert record is not None and record.state == state_of(path.stat())
    with _copied("tar", workspace, tmp_path) as copy, warnings.catch_warnings():
        warnings.simplefilter("error", WalSetAside)
        assert [task.subject for task in SqliteTaskStore(copy).list_tasks()] == subjects
    board.close()


# Another program: a reader holding its snapshot (or none), then a PASSIVE checkpoint;
# it dies without closing, so no closing checkpoint of its own finishes the work.
_OTHER_PROGRAM = """
import os, sqlite3, sys
path, cut_short = sys.argv[1], sys.argv[2] == "cut short"
if cut_short:
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM tasks").fetchone()
print("reading", flush=True)
sys.stdin.readline()
other = sqlite3.connect(path, isolation_level=None)
print(*other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1:], flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("checkpoint", ["whole", "cut short"])
def test_another_programs_checkpoint_leaves_a_wal_that_a_copy_still_replays(
    tmp_path: Path, checkpoint: str
) -> None:
    # A checkpoint writes only versions of pages the -wal holds; one that a reader held
    # back halfway leaves the file between two states, and the -wal still completes it.
    workspace = tmp_path / "workspace"
    for subjects in (BEFORE, LATER):
        adder = spawn.Process(target=add_and_die, args=(str(workspace), subjects))
        adder.start()
        adder.join(DEADLINE_SECONDS)
        if subjects is BEFORE:
            other = subprocess.Popen(
                [sys.executable, "-c", _OTHER_PROGRAM, str(db_path(workspace)), checkpoint],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert other.stdout is not None and other.stdin is not None
            assert other.stdout.readline() == "reading\n"
    other.stdin.write("go\n")
    other.stdin.flush()
    frames, copied = map(int, other.stdout.readline().split())
    assert other.wait(DEADLINE_SECONDS) == 0
    assert 0 < copied < frames if checkpoint == "cut short" else 0 < copied == frames
    assert db_path(workspace).with_name("tasks.sqlite3-wal").stat().st_size > 0
    with _copied("tar", workspace, tmp_path) as copy, warnings.catch_warnings():
        warnings.simplefilter("error", WalSetAside)
        assert [task.subject for task in SqliteTaskStore(copy).list_tasks()] == BEFORE + LATER
