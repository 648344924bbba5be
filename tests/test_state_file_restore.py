"""A state file restored from a backup: the replaced file's -wal must never be replayed into it.

SQLite ties nothing in a -wal to its database, and a file replaced under an
open connection keeps the old file's -wal and -shm beside the new one. These
tests restore backups the way an operator would (a rename over the live file,
a copy over it, a copy after `rm`; a crashed writer's -wal beside it, a real
teammate process holding it) and require the next opener never to mix the
two: the restored board opens as restored, with the old -wal set aside (never
deleted), or while a process still has the old file open `foreign_wal` comes,
touching nothing, and doing what its message says loses nothing. Every
legitimate -wal (a crashed writer's, agent17's or another program's) is still
replayed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from store_fixtures import db_path, digest
from team_processes import Teammate, teammates
from wal_workers import board_of, claimed_board, integrity

from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.ledger import IdempotencyLedger, LedgerKey
from agent17.armour import state_file
from agent17.armour.wal_file import read_record, state_of
from agent17.armour.wal_owner import WalSetAside
from agent17.domain import Refusal

__all__ = ["teammates"]  # the fixture, imported for the tests below

spawn = multiprocessing.get_context("spawn")
BARRIER_SECONDS = 60.0
SAVED = ["saved 1", "saved 2", "saved 3"]
LATER = ["later 1", "later 2", "later 3"]


def _refused(code: str, action: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        action()
    assert caught.value.code == code, f"expected {code}, got {caught.value.code}: {caught.value}"
    return caught.value


def _journals(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _files_in(folder: Path) -> dict[str, str]:
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir()) if entry.is_file()}


def _backup(path: Path, into: Path) -> Path:
    """A clean one-file backup of a live state file, made by SQLite itself."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("VACUUM INTO ?", (str(into),))
    finally:
        connection.close()
    return into


def _subjects(store: SqliteTaskStore) -> list[str]:
    return [task.subject for task in store.list_tasks()]


def _opened_as_restored(workspace: Path, expected: list[str]) -> Path:
    """Open the restored board: it must be the backup, the old -wal set aside; where it went."""
    with pytest.warns(WalSetAside) as warned:
        board = SqliteTaskStore(workspace)
    assert _subjects(board) == expected
    board.close()
    assert integrity(db_path(workspace)) == ["ok"]
    (message,) = [str(each.message) for each in warned]
    found = re.search(r" in (\S+), and tasks.sqlite3 opened as it is now", message)
    assert found, message
    return Path(found.group(1))


def _old_board(path: Path, tmp_path: Path) -> tuple[str, Path]:
    """Before a restore: the digest of the board's -wal, and a copy of its file alone."""
    return digest(_journals(path)[0]), Path(shutil.copy(path, tmp_path / "before.sqlite3"))


def _nothing_lost(aside: Path, before: Path, wal_before: str, expected: list[str]) -> None:
    """The set-aside -wal is the old one, and beside the old file it opens whole."""
    wal = aside / "tasks.sqlite3-wal"
    assert digest(wal) == wal_before
    old = before.parent / "old-board"
    old.mkdir()
    shutil.copy(before, old / "tasks.sqlite3")
    shutil.copy(wal, old / "tasks.sqlite3-wal")
    assert [subject for subject, _, _ in board_of(old / "tasks.sqlite3")] == expected


def _restore(how: str, backup: Path, path: Path) -> None:
    """Put `backup` in place of the board file, the way `how` says."""
    if how == "rename":
        os.replace(backup, path)
    elif how == "cp over":
        subprocess.run(["cp", str(backup), str(path)], check=True, timeout=60)
    else:  # "rm then cp": the new file may even get the old inode number
        path.unlink()
        subprocess.run(["cp", str(backup), str(path)], check=True, timeout=60)


@pytest.mark.parametrize("teammate", ["killed", "paused"])
@pytest.mark.parametrize("how", ["rename", "cp over", "rm then cp"])
def test_a_backup_put_in_place_beside_a_teammates_wal_never_gives_a_mixed_board(
    tmp_path: Path, how: str, teammate: str
) -> None:
    workspace = tmp_path / "workspace"
    path = db_path(workspace)
    backup = tmp_path / "backup.sqlite3"
    with claimed_board(workspace, SAVED, LATER, lambda board: _backup(board, backup)) as holder:
        os.kill(holder, signal.SIGKILL if teammate == "killed" else signal.SIGSTOP)
        wal_before, before = _old_board(path, tmp_path)
        _restore(how, backup, path)
        if teammate == "paused":  # alive, its connection open on the old file
            untouched = _files_in(path.parent)
            error = _refused("foreign_wal", lambda: SqliteTaskStore(workspace))
            assert _files_in(path.parent) == untouched
            advice = "stop every teammate and program using this workspace, then open it again"
            assert advice in error.message
    # The advice followed literally: the teammate is stopped (the block ends), open again.
    aside = _opened_as_restored(workspace, SAVED)
    _nothing_lost(aside, before, wal_before, SAVED + LATER)


def test_a_backup_restored_under_a_running_teammate_opens_as_restored_once_it_stops(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    workspace = tmp_path / "workspace"
    lead = SqliteTaskStore(workspace)
    lead.create_tasks([(f"saved {n}", "", ()) for n in range(6)])
    path = lead.path
    backup = _backup(path, tmp_path / "backup.sqlite3")
    lead.create_tasks([(f"later {n}", "x" * 2000, ()) for n in range(30)])
    lead.close()
    alice = teammates(
        workspace, "alice", "--max-idle-polls", "100000", "--poll-interval", "0.05",
        "--work-seconds", "0.2",
    )  # fmt: skip
    alice.wait_for_line("works on")  # she holds a claim: her connection writes the -wal

    os.replace(backup, path)  # the operator restores the backup under her
    assert alice.finish() == 1
    assert len(alice.errors) == 1 and "unsafe_store_path" in alice.errors[0], alice.errors
    assert _journals(path)[0].stat().st_size > 0  # the replaced file's last pages

    _opened_as_restored(workspace, [f"saved {n}" for n in range(6)])


def test_the_read_only_probe_does_not_read_a_foreign_wal_either(tmp_path: Path) -> None:
    # A backup of another board under an open one: replaying the -wal over it makes a
    # damaged mixture the probe would call store_unreadable (sending the user to a backup
    # that is fine). It must not get that far, nor create or change any file.
    other = SqliteTaskStore(tmp_path / "other")
    other.create_tasks([(f"theirs {n}", "t" * 300, ()) for n in range(8)])
    backup = _backup(other.path, tmp_path / "backup.sqlite3")
    other.close()
    workspace = tmp_path / "workspace"
    live = SqliteTaskStore(workspace)
    live.create_tasks([(f"ours {n}", "o" * 300, ()) for n in range(8)])
    assert live.claim_next("alice") is not None
    os.replace(backup, live.path)
    folder = live.path.parent
    before = _files_in(folder)

    _refused("foreign_wal", lambda: SqliteTaskStore(workspace))
    assert _files_in(folder) == before
    # The open store notices the swap itself, and writes neither file.
    _refused("unsafe_store_path", lambda: live.claim_next("bob"))
    live.close()
    _opened_as_restored(workspace, [f"theirs {n}" for n in range(8)])


def test_a_board_deleted_under_an_open_store_is_not_recreated_beside_its_wal(
    tmp_path: Path,
) -> None:
    store = SqliteTaskStore(tmp_path)
    store.create_task("A")
    store.path.unlink()
    folder = store.path.parent
    before = _files_in(folder)
    _refused("foreign_wal", lambda: SqliteTaskStore(tmp_path))
    assert _files_in(folder) == before and not store.path.exists()
    store.close()


def test_an_empty_wal_of_the_replaced_file_holds_nothing_to_mix_and_its_reader_stops(
    tmp_path: Path,
) -> None:
    # A reader that never wrote leaves a 0-byte -wal it shares (with the -shm) by name.
    # Nothing in it can be replayed, so the restored file opens; the reader, still on
    # the replaced file, is refused at its next call and writes nothing anywhere.
    writer = SqliteTaskStore(tmp_path)
    writer.create_task("A")
    writer.close()  # checkpointed, and the -wal deleted
    reader = SqliteTaskStore(tmp_path)
    wal, _ = _journals(reader.path)
    assert wal.stat().st_size == 0
    restored = tmp_path / "copy.sqlite3"
    _backup(reader.path, restored)
    with contextlib.closing(sqlite3.connect(restored)) as connection:
        connection.execute("UPDATE tasks SET subject = 'restored'")
        connection.commit()
    os.replace(restored, reader.path)
    board = SqliteTaskStore(tmp_path)
    assert _subjects(board) == ["restored"]
    _refused("unsafe_store_path", lambda: reader.create_task("B"))
    board.create_task("C")
    assert _subjects(board) == ["restored", "C"]
    reader.close()
    board.close()


def _board(workspace: Path) -> tuple[object, Callable[[], object]]:
    store = SqliteTaskStore(workspace)
    return store, lambda: store.create_task("written")


def _mailbox(workspace: Path) -> tuple[object, Callable[[], object]]:
    mailbox = Mailbox(workspace)
    return mailbox, lambda: mailbox.send(
        "alice", sender="lead", kind="text", body='{"content": "hi"}'
    )


def _ledger(workspace: Path) -> tuple[object, Callable[[], object]]:
    ledger = IdempotencyLedger.for_workspace(workspace)
    return ledger, lambda: ledger.record(LedgerKey.of("key", 0, "shell", {}), {"ok": True})


@pytest.mark.parametrize("opener", [_board, _mailbox, _ledger], ids=["board", "mailbox", "ledger"])
def test_every_state_file_keeps_the_wal_of_the_file_it_replaced_out_of_it(
    tmp_path: Path, opener: Callable[[Path], tuple[object, Callable[[], object]]]
) -> None:
    first, write = opener(tmp_path)
    write()
    path = Path(getattr(first, "path"))  # noqa: B009 (the three have no common type)
    copy = _backup(path, tmp_path / "copy.sqlite3")
    os.replace(copy, path)
    restored = digest(path)
    _refused("foreign_wal", lambda: opener(tmp_path))  # the first is still open
    assert digest(path) == restored
    getattr(first, "close")()  # noqa: B009
    with pytest.warns(WalSetAside):
        second, write_again = opener(tmp_path)
    write_again()
    getattr(second, "close")()  # noqa: B009


def _crash_inside_a_rollback_transaction(path: Path) -> None:
    """Another program takes the board out of WAL mode and dies halfway through a write."""
    editor = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('PRAGMA journal_mode = DELETE')\n"
        "connection.execute('PRAGMA cache_size = 10')\n"  # spills pages into the file
        "connection.execute('BEGIN IMMEDIATE')\n"
        "connection.execute(\"UPDATE tasks SET description = printf('%.3000c', 'x')\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", editor, str(path)], check=True, timeout=60)


@pytest.mark.parametrize("replaced", [False, True], ids=["not replaced", "replaced"])
def test_a_rollback_journal_beside_a_changed_file_is_refused_and_either_advice_loses_nothing(
    tmp_path: Path, replaced: bool
) -> None:
    workspace = tmp_path / "workspace"
    lead = SqliteTaskStore(workspace)
    lead.create_tasks([(f"task {n}", "", ()) for n in range(300)])
    path = lead.path
    backup = _backup(path, tmp_path / "backup.sqlite3")
    lead.close()
    _crash_inside_a_rollback_transaction(path)
    journal = path.with_name("tasks.sqlite3-journal")
    assert journal.stat().st_size > 0
    if replaced:
        with contextlib.closing(sqlite3.connect(backup)) as connection:
            connection.execute("UPDATE tasks SET subject = 'restored ' || subject")
            connection.commit()
        os.replace(backup, path)

    error = _refused("foreign_wal", lambda: SqliteTaskStore(workspace))
    advice = error.message.split("To go on: ", 1)[1]
    if replaced:  # "...move tasks.sqlite3-journal out of <folder>..."
        assert f"move tasks.sqlite3-journal out of {path.parent}" in advice
        journal.rename(tmp_path / journal.name)
        expected = [f"restored task {n}" for n in range(300)]
    else:  # "...open it once with the sqlite3 program (sqlite3 <file> 'PRAGMA quick_check')..."
        command = re.search(r"\(sqlite3 (\S+) '(PRAGMA quick_check)'\)", advice)
        assert command and command.group(1) == str(path)
        subprocess.run(["sqlite3", command.group(1), command.group(2)], check=True, timeout=60)
        expected = [f"task {n}" for n in range(300)]
    board = SqliteTaskStore(workspace)
    assert _subjects(board) == expected
    assert all(task.description == "" for task in board.list_tasks())
    board.close()
    assert integrity(path) == ["ok"]


# -- every legitimate -wal is still replayed ------------------------------------------------


def _write_and_die(workspace: str, subject: str, barrier: Barrier) -> None:
    """Open the board with the others, write one task, and die like kill -9 (no close)."""
    barrier.wait(BARRIER_SECONDS)
    store = SqliteTaskStore(workspace)
    store.create_task(subject)
    os._exit(0)


def test_concurrent_openers_that_crash_leave_a_wal_the_next_opener_replays(
    tmp_path: Path,
) -> None:
    # Four processes open a new board at the same moment, each writes and dies before
    # any checkpoint: every task is only in the -wal, which must be replayed.
    workspace = tmp_path / "workspace"
    barrier = spawn.Barrier(4)
    children = [
        spawn.Process(target=_write_and_die, args=(str(workspace), f"T{n}", barrier))
        for n in range(4)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(BARRIER_SECONDS)
        assert child.exitcode == 0
    wal, _ = _journals(db_path(workspace))
    assert wal.stat().st_size > 0
    board = SqliteTaskStore(workspace)
    assert sorted(task.subject for task in board.list_tasks()) == ["T0", "T1", "T2", "T3"]


class _SwitchingConnection:
    """Answers the WAL switch with `answers` in turn: an error is raised, None succeeds."""

    def __init__(self, answers: list[sqlite3.Error | None]) -> None:
        self.answers = answers
        self.statements: list[str] = []

    def execute(self, statement: str) -> None:
        self.statements.append(statement)
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


def _error(message: str, code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code
    return error


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every pause the WAL switch asks for, recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(state_file, "_pause", asked.append)
    return asked


def test_a_wal_switch_refused_at_once_by_another_opener_is_tried_again(
    pauses: list[float],
) -> None:
    # What the four openers above met: SQLite answered "database is locked" at once,
    # without its busy handler, while another opener held the file.
    busy = _error("database is locked", sqlite3.SQLITE_BUSY)
    connection = _SwitchingConnection([busy, busy, None])
    state_file._switch_to_wal(connection)  # type: ignore[arg-type]
    assert connection.statements == ["PRAGMA journal_mode = WAL"] * 3
    assert len(pauses) == 2 and pauses[0] < pauses[1]


def test_a_wal_switch_that_fails_otherwise_is_not_tried_again(pauses: list[float]) -> None:
    full = _error("database or disk is full", sqlite3.SQLITE_FULL)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        state_file._switch_to_wal(_SwitchingConnection([full, None]))  # type: ignore[arg-type]
    assert pauses == []


def test_a_wal_switch_still_locked_at_the_busy_timeout_gives_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(state_file.time, "monotonic", lambda: now[0])

    def pause(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(state_file, "_pause", pause)
    busy = _error("database is locked", sqlite3.SQLITE_BUSY)
    connection = _SwitchingConnection([busy] * 1000)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        state_file._switch_to_wal(connection)  # type: ignore[arg-type]
    assert state_file.BUSY_TIMEOUT_SECONDS - 0.1 <= now[0] <= state_file.BUSY_TIMEOUT_SECONDS


def test_a_state_file_sqlite_keeps_in_its_rollback_journal_is_not_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SQLite without shared memory (some browser builds) answers the WAL switch by
    # staying in its rollback journal: the file then changes with every commit, and
    # there is no -wal to own.
    monkeypatch.setattr(state_file, "_switch_to_wal", lambda connection: None)
    board = SqliteTaskStore(tmp_path)
    for n in range(3):
        board.create_task(f"task {n}")
    board.close()
    again = SqliteTaskStore(tmp_path)
    assert [task.subject for task in again.list_tasks()] == ["task 0", "task 1", "task 2"]
    again.create_task("task 3")
    again.close()


def test_a_wal_another_program_left_on_the_same_file_is_replayed(tmp_path: Path) -> None:
    # A sqlite3 shell that edited the board and crashed: its -wal is not agent17's,
    # but it was written for this very file.
    SqliteTaskStore(tmp_path).create_task("as agent17 wrote it")
    path = db_path(tmp_path)
    editor = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "connection.execute(\"UPDATE tasks SET subject = 'as the shell left it'\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", editor, str(path)], check=True, timeout=60)
    assert _journals(path)[0].stat().st_size > 0
    assert [task.subject for task in SqliteTaskStore(tmp_path).list_tasks()] == [
        "as the shell left it"
    ]


def test_an_unreadable_wal_owner_record_counts_as_none_and_is_written_again(
    tmp_path: Path,
) -> None:
    SqliteTaskStore(tmp_path).create_task("A")
    record = db_path(tmp_path).with_name("tasks.sqlite3-wal-owner")
    record.write_text('{"database_inode": 1}')  # not a record (an older agent17 wrote these)
    store = SqliteTaskStore(tmp_path)
    assert [task.subject for task in store.list_tasks()] == ["A"]
    written = read_record(record)
    assert written is not None and written.state == state_of(store.path.stat())


# -- the safe way to restore: through SQLite, into the live file -------------------------------


def test_a_backup_restored_through_sqlite_into_the_stopped_board_opens_whole(
    tmp_path: Path,
) -> None:
    # What `sqlite3 tasks.sqlite3 ".restore backup.sqlite3"` does: the backup's pages are
    # written into the board itself, through its own -wal, so nothing is left to mix.
    store = SqliteTaskStore(tmp_path)
    store.create_tasks([(f"saved {n}", "", ()) for n in range(3)])
    backup = _backup(store.path, tmp_path / "backup.sqlite3")
    saved = [(subject, status) for subject, status, _ in board_of(backup)]
    store.create_tasks([(f"later {n}", "", ()) for n in range(3)])
    store.close()
    with (
        contextlib.closing(sqlite3.connect(backup)) as source,
        contextlib.closing(sqlite3.connect(db_path(tmp_path))) as board,
    ):
        source.backup(board)
    reopened = SqliteTaskStore(tmp_path)
    assert [(task.subject, task.status.value) for task in reopened.list_tasks()] == saved
    reopened.close()
    assert integrity(db_path(tmp_path)) == ["ok"]
