"""A state file restored from a backup: the replaced file's -wal must never be replayed into it.

SQLite ties nothing in a -wal to its database, and a file replaced under an
open connection keeps the old file's -wal and -shm beside the new one. These
tests restore backups the way an operator would (a rename over the live file,
a real teammate process holding it) and require the next opener to refuse
with `foreign_wal`, touching nothing, while every legitimate -wal (a crashed
writer's, agent17's or another program's) is still replayed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from store_fixtures import db_path, digest
from team_processes import Teammate, integrity, teammates

from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.ledger import IdempotencyLedger, LedgerKey
from agent17.domain import Refusal
from agent17.store import state_file

__all__ = ["teammates"]  # the fixture, imported for the tests below

spawn = multiprocessing.get_context("spawn")
BARRIER_SECONDS = 60.0


def _refused(code: str, action: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        action()
    assert caught.value.code == code, f"expected {code}, got {caught.value.code}: {caught.value}"
    return caught.value


def _journals(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _files_in(folder: Path) -> dict[str, str]:
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir()) if entry.is_file()}


def _board_of(path: Path) -> list[tuple[str, str]]:
    """(subject, status) of every task in a board file, read without touching it."""
    connection = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
    try:
        rows = connection.execute("SELECT subject, status FROM tasks ORDER BY sequence")
        return [(str(subject), str(status)) for subject, status in rows]
    finally:
        connection.close()


def _backup(path: Path, into: Path) -> Path:
    """A clean one-file backup of a live state file, made by SQLite itself."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("VACUUM INTO ?", (str(into),))
    finally:
        connection.close()
    return into


def _set_journals_aside(path: Path, aside: Path) -> None:
    """The restore procedure's step once every teammate is stopped."""
    aside.mkdir()
    for journal in _journals(path):
        journal.rename(aside / journal.name)


def _tasks_claimed(path: Path) -> int:
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        (count,) = connection.execute(
            "SELECT count(*) FROM tasks WHERE status != 'pending'"
        ).fetchone()
        return int(count)
    finally:
        connection.close()


def test_a_backup_restored_under_a_running_teammate_is_refused_untouched_then_opens_whole(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    workspace = tmp_path / "workspace"
    lead = SqliteTaskStore(workspace)
    lead.create_tasks([(f"saved {n}", "", ()) for n in range(6)])
    path = lead.path
    backup = _backup(path, tmp_path / "backup.sqlite3")
    saved = _board_of(backup)
    lead.create_tasks([(f"later {n}", "x" * 2000, ()) for n in range(30)])
    lead.close()
    alice = teammates(
        workspace, "alice", "--max-idle-polls", "100000", "--poll-interval", "0.05",
        "--work-seconds", "0.2",
    )  # fmt: skip
    alice.wait_for_line("works on")  # she holds a claim: her connection writes the -wal

    os.replace(backup, path)  # the operator restores the backup under her
    restored = digest(path)
    assert alice.finish() == 1
    assert len(alice.errors) == 1 and "unsafe_store_path" in alice.errors[0], alice.errors
    wal, _ = _journals(path)
    assert wal.stat().st_size > 0  # the replaced file's last pages, still beside the copy
    wal_before = digest(wal)

    error = _refused("foreign_wal", lambda: SqliteTaskStore(workspace))
    assert "tasks.sqlite3-wal" in error.message and "stop every teammate" in error.message
    assert digest(path) == restored and digest(wal) == wal_before

    # The documented procedure: every teammate stopped (alice is), the journals set aside.
    _set_journals_aside(path, tmp_path / "aside")
    board = SqliteTaskStore(workspace)
    assert [(task.subject, task.status.value) for task in board.list_tasks()] == saved
    board.close()
    assert integrity(path) == ["ok"]


def test_the_read_only_probe_does_not_read_a_foreign_wal_either(tmp_path: Path) -> None:
    # A backup of another board under an open one: replaying the -wal over it makes a
    # damaged mixture the probe would call store_unreadable (sending the user to a backup
    # that is fine). It must not get that far, nor create or change any file.
    other = SqliteTaskStore(tmp_path / "other")
    other.create_tasks([(f"theirs {n}", "t" * 300, ()) for n in range(8)])
    backup = _backup(other.path, tmp_path / "backup.sqlite3")
    other.close()
    saved = _board_of(backup)
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
    _set_journals_aside(live.path, tmp_path / "aside")
    assert [(t.subject, t.status.value) for t in SqliteTaskStore(workspace).list_tasks()] == saved


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


def test_even_an_empty_wal_of_the_replaced_file_is_refused(tmp_path: Path) -> None:
    # A reader that never wrote leaves a 0-byte -wal; while it is open it shares that
    # -wal (and the -shm) by name, and its next write would go into the new file's.
    writer = SqliteTaskStore(tmp_path)
    writer.create_task("A")
    writer.close()  # the last connection folds its -wal in and deletes it
    reader = SqliteTaskStore(tmp_path)
    wal, _ = _journals(reader.path)
    assert wal.stat().st_size == 0
    os.replace(_backup(reader.path, tmp_path / "copy.sqlite3"), reader.path)
    _refused("foreign_wal", lambda: SqliteTaskStore(tmp_path))
    reader.close()


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
def test_every_state_file_refuses_the_wal_of_the_file_it_replaced(
    tmp_path: Path, opener: Callable[[Path], tuple[object, Callable[[], object]]]
) -> None:
    first, write = opener(tmp_path)
    write()
    path = Path(getattr(first, "path"))  # noqa: B009 (the three have no common type)
    copy = _backup(path, tmp_path / "copy.sqlite3")
    os.replace(copy, path)
    restored = digest(path)
    _refused("foreign_wal", lambda: opener(tmp_path))
    assert digest(path) == restored
    getattr(first, "close")()  # noqa: B009
    _set_journals_aside(path, tmp_path / "aside")
    second, write_again = opener(tmp_path)
    write_again()
    getattr(second, "close")()  # noqa: B009


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
    record.write_text("not json")
    store = SqliteTaskStore(tmp_path)
    assert [task.subject for task in store.list_tasks()] == ["A"]
    assert f'"database_inode": {store.path.stat().st_ino}' in record.read_text()


# -- the safe way to restore: through SQLite, into the live file -------------------------------


def test_a_backup_restored_through_sqlite_into_the_stopped_board_opens_whole(
    tmp_path: Path,
) -> None:
    # What `sqlite3 tasks.sqlite3 ".restore backup.sqlite3"` does: the backup's pages are
    # written into the board itself, through its own -wal, so nothing is left to mix.
    store = SqliteTaskStore(tmp_path)
    store.create_tasks([(f"saved {n}", "", ()) for n in range(3)])
    backup = _backup(store.path, tmp_path / "backup.sqlite3")
    saved = _board_of(backup)
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
