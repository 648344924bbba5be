"""A backup copied over a running board in place: its teammate stops at the next write (24, 2).

`cp backup tasks.sqlite3` keeps the inode, so the file does not look replaced,
and a teammate that noticed nothing would go on completing tasks into a mixed
board, which the next opener finds damaged. Each write of a store compares the
file's size and mtime with what agent17 last left there, and hashes the file
when they differ: the first write after the copy is refused with
`foreign_wal`, and so is every call after it; the store closes without
folding its -wal into the copy; the next opener gets the restored board, with
the old -wal set aside.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from store_fixtures import db_path
from team_processes import Teammate, teammates
from wal_workers import complete_on_request, integrity

from agent17 import Refusal, SqliteTaskStore
from agent17.armour.wal_owner import WalSetAside

__all__ = ["teammates"]  # the fixture, imported for the test below

spawn = multiprocessing.get_context("spawn")
DEADLINE_SECONDS = 60.0
TASKS = [f"task {n}" for n in range(20)]


def _board_and_backup(workspace: Path, backup: Path) -> Path:
    """A board of TASKS, all pending, and a backup of it made by SQLite; the board's path."""
    lead = SqliteTaskStore(workspace)
    lead.create_tasks([(subject, "", ()) for subject in TASKS])
    with contextlib.closing(sqlite3.connect(lead.path)) as connection:
        connection.execute("VACUUM INTO ?", (str(backup),))
    lead.close()
    return db_path(workspace)


def _copy_over(backup: Path, path: Path) -> None:
    inode = path.stat().st_ino
    subprocess.run(["cp", str(backup), str(path)], check=True, timeout=DEADLINE_SECONDS)
    assert path.stat().st_ino == inode  # in place: the file does not look replaced


def _opens_as_restored(workspace: Path) -> None:
    with pytest.warns(WalSetAside):
        board = SqliteTaskStore(workspace)
    statuses = [(task.subject, task.status.value) for task in board.list_tasks()]
    board.close()
    assert statuses == [(subject, "pending") for subject in TASKS]
    assert integrity(db_path(workspace)) == ["ok"]


def test_a_backup_copied_over_a_running_board_stops_its_teammate_at_the_next_write(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    backup = tmp_path / "backup.sqlite3"
    path = _board_and_backup(workspace, backup)
    requests, results = spawn.Queue(), spawn.Queue()
    teammate = spawn.Process(target=complete_on_request, args=(str(workspace), requests, results))
    teammate.start()
    try:
        for subject in TASKS[:3]:
            requests.put("work")
            assert results.get(timeout=DEADLINE_SECONDS) == ("completed", subject)

        _copy_over(backup, path)
        requests.put("work")
        assert results.get(timeout=DEADLINE_SECONDS) == ("refused", "foreign_wal")
        requests.put("work")  # and it stays stopped
        assert results.get(timeout=DEADLINE_SECONDS) == ("refused", "foreign_wal")
        requests.put("stop")
        assert results.get(timeout=DEADLINE_SECONDS) == ("closed", "")
        teammate.join(DEADLINE_SECONDS)
        assert teammate.exitcode == 0
    finally:
        teammate.kill()
        teammate.join(DEADLINE_SECONDS)
    # Its close folded nothing into the copy: the board is the backup, not a mixture.
    _opens_as_restored(workspace)


def test_a_teammate_process_stops_with_foreign_wal_when_a_backup_is_copied_over_its_board(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    workspace = tmp_path / "workspace"
    backup = tmp_path / "backup.sqlite3"
    path = _board_and_backup(workspace, backup)
    alice = teammates(
        workspace, "alice", "--max-idle-polls", "100000", "--poll-interval", "0.05",
        "--work-seconds", "0.05",
    )  # fmt: skip
    alice.wait_for_line("works on")

    _copy_over(backup, path)
    assert alice.finish() == 1
    assert "foreign_wal" in alice.errors[-1], alice.errors
    _opens_as_restored(workspace)


def test_another_program_that_empties_the_wal_stops_the_writers_and_loses_nothing(
    tmp_path: Path,
) -> None:
    # PRAGMA wal_checkpoint(TRUNCATE) from a program that is not agent17 copies the
    # -wal back and empties it: the file then matches no record and no -wal vouches for
    # it (README: what is not caught). The writers stop; nothing committed is lost.
    workspace = tmp_path / "workspace"
    store = SqliteTaskStore(workspace)
    store.create_tasks([(subject, "", ()) for subject in TASKS])
    with contextlib.closing(sqlite3.connect(store.path, isolation_level=None)) as other:
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with pytest.raises(Refusal) as caught:
        store.create_task("one more")
    assert caught.value.code == "foreign_wal"
    store.close()
    board = SqliteTaskStore(workspace)
    assert [task.subject for task in board.list_tasks()] == TASKS
    board.close()
