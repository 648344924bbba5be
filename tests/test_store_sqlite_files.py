"""The SQLite store's file: refused untouched when it is not an intact board, watched while open.

Every refusal here must leave the file byte-identical: a board that is not
ours, damaged or swapped is evidence, and a store that "repairs" it by
creating missing tables loses history. (Path and link rules: test_store_paths.py.)
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_fixtures import ManualClock, db_path, digest, new_store, raises_code, raw_connection

from agent17 import SqliteTaskStore, TaskStatus
from agent17.deterministic import uuid_sequence
from agent17.store.sqlite import BOARD_SCHEMA


def _files_in(folder: Path) -> dict[str, str]:
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir()) if entry.is_file()}


def _board_with_tasks(workspace: Path, count: int = 3) -> Path:
    store = new_store(workspace)
    store.create_tasks([(f"T{n}", "x" * 500, ()) for n in range(count)])
    store.close()  # the last connection folds the WAL into the main file
    path = db_path(workspace)
    assert not path.with_name(path.name + "-wal").exists()
    return path


# -- what is at the path when the store opens ------------------------------------------------


def test_a_schema_version_mismatch_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    path = _board_with_tasks(tmp_path)
    with raw_connection(path) as connection:
        connection.execute("UPDATE task_metadata SET value = '99' WHERE key = 'schema_version'")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before, stat_before = digest(path), os.stat(path)

    error = raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert "'99'" in str(error) and f"'{BOARD_SCHEMA.version}'" in str(error)
    assert digest(path) == before
    assert os.stat(path).st_mtime_ns == stat_before.st_mtime_ns
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def _crash_after_writing_another_version(path: Path) -> None:
    """Another process writes schema version 99 and dies before any checkpoint."""
    writer = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "connection.execute(\"UPDATE task_metadata SET value = '99'\")\n"
        "os._exit(0)  # die like kill -9: no close, no checkpoint\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(path)], check=True, timeout=60)


def test_a_schema_mismatch_still_in_the_wal_of_a_crashed_writer_leaves_both_files_untouched(
    tmp_path: Path,
) -> None:
    # A newer agent17 wrote another version and was killed before any checkpoint:
    # the change lives only in the -wal file. Refusing must not fold that WAL into
    # the main file (a read-write connection does so when it closes).
    new_store(tmp_path).close()
    path = db_path(tmp_path)
    _crash_after_writing_another_version(path)
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 0
    main_before, wal_before = digest(path), digest(wal)

    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert digest(path) == main_before
    assert wal.exists() and digest(wal) == wal_before


@pytest.mark.parametrize("shm_before", [False, True], ids=["no-shm", "shm"])
def test_a_refused_file_with_a_wal_gets_no_new_shm_and_keeps_its_own(
    tmp_path: Path, shm_before: bool
) -> None:
    # The read-only probe makes SQLite create a -shm; a refusal removes it only if the
    # probe made it, never one that was there (a crashed or live writer's).
    new_store(tmp_path).close()
    path = db_path(tmp_path)
    _crash_after_writing_another_version(path)
    wal, shm = (path.with_name(path.name + end) for end in ("-wal", "-shm"))
    if not shm_before:
        shm.unlink()
    names = sorted(entry.name for entry in path.parent.iterdir())
    main_before, wal_before = digest(path), digest(wal)

    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert sorted(entry.name for entry in path.parent.iterdir()) == names
    assert shm.exists() is shm_before
    assert digest(path) == main_before and digest(wal) == wal_before


def test_a_missing_schema_version_row_is_a_mismatch(tmp_path: Path) -> None:
    path = _board_with_tasks(tmp_path)
    with raw_connection(path) as connection:
        connection.execute("DELETE FROM task_metadata")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = digest(path)
    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert digest(path) == before


def test_a_text_file_at_the_database_path_is_refused_untouched(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    path.parent.mkdir()
    path.write_text("my shopping list\nmilk\n")
    before = _files_in(path.parent)
    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert _files_in(path.parent) == before


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    path.parent.mkdir()
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE recipes (name TEXT)")
    foreign.execute("INSERT INTO recipes VALUES ('soup')")
    foreign.commit()
    foreign.close()
    before = _files_in(path.parent)
    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert _files_in(path.parent) == before


def test_a_foreign_table_called_task_metadata_is_a_mismatch_not_a_driver_error(
    tmp_path: Path,
) -> None:
    path = db_path(tmp_path)
    path.parent.mkdir()
    with raw_connection(path) as connection:
        connection.execute("CREATE TABLE task_metadata (owner TEXT)")
    before = _files_in(path.parent)
    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert _files_in(path.parent) == before


@pytest.mark.parametrize("table", ["task_events", "task_dependencies", "tasks"])
def test_a_board_missing_one_of_its_tables_is_store_unreadable_and_not_recreated(
    tmp_path: Path, table: str
) -> None:
    path = _board_with_tasks(tmp_path)
    with raw_connection(path, unchecked=True) as connection:
        connection.execute("DROP TRIGGER IF EXISTS task_events_are_append_only_delete")
        connection.execute("DROP TRIGGER IF EXISTS task_events_are_append_only_update")
        connection.execute(f"DROP TABLE {table}")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _files_in(path.parent)
    error = raises_code("store_unreadable", lambda: new_store(tmp_path))
    assert table in str(error)
    assert _files_in(path.parent) == before


def test_an_extra_trigger_on_the_board_is_store_unreadable(tmp_path: Path) -> None:
    # A trigger could quietly undo a claim: a board with objects we did not make is not ours.
    path = _board_with_tasks(tmp_path)
    with raw_connection(path) as connection:
        connection.execute(
            "CREATE TRIGGER sneaky AFTER UPDATE ON tasks BEGIN"
            " UPDATE tasks SET owner = 'mallory' WHERE sequence = NEW.sequence; END"
        )
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _files_in(path.parent)
    error = raises_code("store_unreadable", lambda: new_store(tmp_path))
    assert "sneaky" in str(error)
    assert _files_in(path.parent) == before


def test_analyze_statistics_do_not_make_a_board_unreadable(tmp_path: Path) -> None:
    path = _board_with_tasks(tmp_path)
    with raw_connection(path) as connection:
        connection.execute("ANALYZE")
    assert len(new_store(tmp_path).list_tasks()) == 3


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_truncated_board_is_store_unreadable_and_left_as_it_is(
    tmp_path: Path, keep: float
) -> None:
    path = _board_with_tasks(tmp_path, count=300)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(int(size * keep) // 4096 * 4096)
    before = _files_in(path.parent)
    raises_code("store_unreadable", lambda: new_store(tmp_path))
    assert _files_in(path.parent) == before


def test_a_damaged_page_is_store_unreadable_at_open(tmp_path: Path) -> None:
    path = _board_with_tasks(tmp_path, count=300)
    data = bytearray(path.read_bytes())
    rng = random.Random(5)
    for page in (3, 5, 8):
        start = page * 4096
        data[start : start + 4096] = bytes(rng.randrange(256) for _ in range(4096))
    path.write_bytes(bytes(data))
    before = _files_in(path.parent)
    raises_code("store_unreadable", lambda: new_store(tmp_path))
    assert _files_in(path.parent) == before


def test_damage_found_by_an_open_store_is_refused_and_the_store_survives(
    tmp_path: Path,
) -> None:
    path = _board_with_tasks(tmp_path, count=300)
    store = new_store(tmp_path)
    pristine = path.read_bytes()
    damaged = bytearray(pristine)
    for page in range(2, len(pristine) // 4096):
        damaged[page * 4096 : page * 4096 + 100] = b"\xff" * 100
    path.write_bytes(bytes(damaged))  # in place: same inode, so this is damage, not a swap
    raises_code("store_unreadable", store.events)
    # A write first finds the file changed outside agent17, and not the one its -wal was
    # written for (test_state_file_overwritten.py): it stops before SQLite reads a page.
    raises_code("foreign_wal", lambda: store.claim_next("alice"))
    raises_code("foreign_wal", store.list_tasks)
    # The failure left no transaction open: another writer gets the lock at once.
    with raw_connection(path) as connection:
        connection.execute("PRAGMA busy_timeout = 0")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
    store.close()
    path.write_bytes(pristine)
    assert len(new_store(tmp_path).list_tasks()) == 300


# -- the file under an open store ----------------------------------------------------------------


def test_a_board_replaced_under_an_open_store_is_refused_and_neither_file_is_written(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    path = store.path
    # A backup restore or a sync tool: a copy moved over the original.
    copy = tmp_path / "restore.sqlite3"
    with raw_connection(path) as connection:
        connection.execute("VACUUM INTO ?", (str(copy),))
    os.replace(copy, path)
    restored = digest(path)

    raises_code("unsafe_store_path", lambda: store.create_task("B"))
    raises_code("unsafe_store_path", lambda: store.claim_next("alice"))
    assert digest(path) == restored
    # The old file's -wal is still beside the new one: a store opened now must not
    # replay it into the copy (test_state_file_restore.py has the whole story).
    raises_code("foreign_wal", lambda: new_store(tmp_path, new_task_id=uuid_sequence(18)))
    assert digest(path) == restored
    store.close()
    for end in ("-wal", "-shm"):
        path.with_name(path.name + end).unlink()
    fresh = new_store(tmp_path, new_task_id=uuid_sequence(18))
    assert [t.subject for t in fresh.list_tasks()] == ["A"]


def test_a_board_deleted_under_an_open_store_is_refused(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    shutil.move(str(store.path), str(tmp_path / "elsewhere.sqlite3"))
    raises_code("unsafe_store_path", store.list_tasks)


def test_a_hard_link_made_to_an_open_board_is_refused(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    os.link(store.path, tmp_path / "second-name.sqlite3")
    raises_code("unsafe_store_path", store.list_tasks)


@pytest.mark.parametrize("moved_to", ["outside", "inside"])
def test_a_state_folder_moved_away_and_replaced_by_a_symlink_is_refused_and_not_written(
    tmp_path: Path, moved_to: str
) -> None:
    # The file keeps its inode (lstat of the path follows the folder's symlink), so
    # only the folder's own identity shows the swap.
    workspace = tmp_path / "workspace"
    store = new_store(workspace)
    store.create_task("A")
    folder = workspace / ".agent_tutorial"
    moved = tmp_path / "elsewhere" if moved_to == "outside" else workspace / "moved"
    folder.rename(moved)
    folder.symlink_to(moved)
    board, wal = moved / "tasks.sqlite3", moved / "tasks.sqlite3-wal"
    before = digest(board), digest(wal)

    raises_code("unsafe_store_path", lambda: store.create_task("B"))
    raises_code("unsafe_store_path", store.list_tasks)
    assert (digest(board), digest(wal)) == before
    store.close()
    with raw_connection(board) as connection:
        assert connection.execute("SELECT subject FROM tasks").fetchall() == [("A",)]


def test_a_state_folder_replaced_by_a_new_one_holding_the_same_file_is_refused(
    tmp_path: Path,
) -> None:
    # The file itself (same inode, one link) moved into a fresh folder without its
    # -wal: a new opener would read it without the frames this store still writes.
    store = new_store(tmp_path)
    store.create_task("A")
    folder, old = tmp_path / ".agent_tutorial", tmp_path / "old"
    folder.rename(old)
    folder.mkdir()
    (old / "tasks.sqlite3").rename(folder / "tasks.sqlite3")
    raises_code("unsafe_store_path", store.list_tasks)


def test_a_transaction_left_open_on_the_connection_is_rolled_back_by_the_next_call(
    tmp_path: Path,
) -> None:
    # What an interrupt escaping the rollback loop (a third signal on its retry) would
    # leave; the backstop at the start of every call ends it. Only the state it leaves
    # can be made from outside, hence the private connection.
    store = new_store(tmp_path)
    store.create_task("A")
    connection = store._file._connection
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("UPDATE task_metadata SET value = 'x' WHERE key = 'schema_version'")
    assert store.create_task("B").subject == "B"
    assert not connection.in_transaction
    with raw_connection(store.path) as other:
        other.execute("PRAGMA busy_timeout = 0")
        other.execute("BEGIN IMMEDIATE")  # the lock is free
        other.execute("ROLLBACK")
        assert other.execute("SELECT value FROM task_metadata").fetchone() == ("2",)
    assert [t.subject for t in store.list_tasks()] == ["A", "B"]


# -- the query plan ------------------------------------------------------------------------------


def _assert_claim_is_a_seek(plan: list[str]) -> None:
    assert plan, "no plan"
    assert not any(line.startswith("SCAN") for line in plan), plan
    assert any("SEARCH tasks USING COVERING INDEX tasks_by_state" in line for line in plan), plan


def test_the_claim_statement_is_an_index_seek(tmp_path: Path) -> None:
    _assert_claim_is_a_seek(new_store(tmp_path).explain_claim_next())


def test_the_claim_stays_an_index_seek_after_analyze_on_a_large_mixed_board(
    tmp_path: Path,
) -> None:
    # Tasks of every status and a big blocked tail, then ANALYZE gathers statistics:
    # the planner must still seek the index, not scan the table in rowid order.
    store = new_store(tmp_path)
    rng = random.Random(17)
    ids: list[str] = []
    for n in range(600):
        deps = rng.sample(ids, k=min(len(ids), rng.choice([0, 0, 1, 2])))
        ids.append(store.create_task(f"T{n}", blocked_by=deps).id)
    held = None
    for _ in range(250):
        claim = store.claim_next("alice")
        assert claim is not None
        if rng.random() < 0.7:
            store.complete_task(claim.task.id, "alice", claim.claim_token)
        else:
            held = claim
    assert held is not None
    store.create_tasks([(f"bulk {n}", "", [held.task.id]) for n in range(3000)])
    store.close()
    with raw_connection(db_path(tmp_path)) as connection:
        connection.execute("ANALYZE")
        statuses = dict(connection.execute("SELECT status, count(*) FROM tasks GROUP BY status"))
    assert set(statuses) == {"pending", "in_progress", "completed"}

    reopened = SqliteTaskStore(tmp_path, new_claim_token=uuid_sequence(72))
    _assert_claim_is_a_seek(reopened.explain_claim_next())
    board = reopened.list_tasks()
    status = {t.id: t.status for t in board}
    ready = [
        t.id
        for t in board
        if t.status == TaskStatus.PENDING
        and all(status[dep] == TaskStatus.COMPLETED for dep in t.blocked_by)
    ]
    claim = reopened.claim_next("bob")
    assert claim is not None and claim.task.id == ready[0]


def test_a_refused_completion_commits_the_release_it_made(tmp_path: Path) -> None:
    # Read straight from the file: the release was committed by the refused call itself.
    clock = ManualClock()
    store = new_store(tmp_path, clock=clock, lease_seconds=60)
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    clock.set(claim.lease_expires_at_utc)
    raises_code("lease_expired", lambda: store.complete_task(a.id, "alice", claim.claim_token))
    with raw_connection(db_path(tmp_path)) as connection:
        row = connection.execute(
            "SELECT status, owner, claim_token, lease_expires_at_utc FROM tasks"
        ).fetchone()
        logged = [kind for (kind,) in connection.execute("SELECT kind FROM task_events")]
    assert row == ("pending", None, None, None)
    assert logged == ["created", "claimed", "lease_expired"]


# -- rows edited by hand: a stored value no store writes is store_unreadable -----------------


@pytest.mark.parametrize("column", ["subject", "description", "owner"])
def test_a_text_value_that_is_not_utf8_is_store_unreadable_for_every_read(
    tmp_path: Path, column: str
) -> None:
    # Python's sqlite3 cannot decode it; the store must say what it means, with its code.
    store = new_store(tmp_path)
    a = store.create_task("A")
    store.claim_task(a.id, "alice")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute(f"UPDATE tasks SET {column} = CAST(x'ff41' AS TEXT)")
    raises_code("store_unreadable", store.list_tasks)
    raises_code("store_unreadable", lambda: store.get_task(a.id))
    # The failed reads left no transaction open: the same store still writes.
    assert store.create_task("B").subject == "B"


@pytest.mark.parametrize(
    ("column", "value"),
    [("subject", "x'4142'"), ("description", "x'00ff'"), ("owner", "x'41'")],
    ids=repr,
)
def test_a_value_of_the_wrong_type_is_store_unreadable_not_a_task_with_a_blob(
    tmp_path: Path, column: str, value: str
) -> None:
    # TEXT affinity turns a number into text, but a blob stays a blob: without the
    # check a Task would carry bytes and fail far from here (in a tool's JSON, say).
    store = new_store(tmp_path)
    a = store.create_task("A")
    store.claim_task(a.id, "alice")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute(f"UPDATE tasks SET {column} = {value}")
    raises_code("store_unreadable", store.list_tasks)
    raises_code("store_unreadable", lambda: store.get_task(a.id))


@pytest.mark.parametrize(
    ("column", "value"),
    [("subject", "x'4142'"), ("description", "x'00ff'")],
    ids=repr,
)
def test_a_claim_or_completion_of_a_task_with_a_blob_is_refused_before_it_commits(
    tmp_path: Path, column: str, value: str
) -> None:
    # The refusal must come inside the transaction: a caller told store_unreadable
    # must not find the task taken (held until its lease ends) or completed.
    store = new_store(tmp_path)
    a = store.create_task("A")
    b = store.create_task("B")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute(f"UPDATE tasks SET {column} = {value} WHERE id = ?", (a.id,))
    raises_code("store_unreadable", lambda: store.claim_next("alice"))
    raises_code("store_unreadable", lambda: store.claim_task(a.id, "alice"))
    claim = store.claim_task(b.id, "bob")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute(f"UPDATE tasks SET {column} = {value} WHERE id = ?", (b.id,))
    raises_code("store_unreadable", lambda: store.complete_task(b.id, "bob", claim.claim_token))
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        rows = connection.execute("SELECT id, status, owner FROM tasks ORDER BY sequence")
        assert [tuple(row) for row in rows] == [
            (a.id, "pending", None),
            (b.id, "in_progress", "bob"),
        ]
        kinds = connection.execute("SELECT kind FROM task_events ORDER BY sequence")
        assert [kind for (kind,) in kinds] == ["created", "created", "claimed"]


def test_an_event_of_an_unknown_kind_is_store_unreadable(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("DROP TRIGGER task_events_are_append_only_update")
        connection.execute("UPDATE task_events SET kind = 'vanished'")
    raises_code("store_unreadable", store.events)


# -- what the schema itself enforces, whoever writes the SQL ---------------------------------


def test_a_hand_written_update_that_skips_a_step_of_the_lifecycle_is_refused(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path)
    a = store.create_task("A")
    refused = pytest.raises(sqlite3.IntegrityError, match="pending -> in_progress -> completed")
    with raw_connection(db_path(tmp_path)) as connection, refused:
        connection.execute(
            "UPDATE tasks SET status = 'completed', owner = 'mallory' WHERE id = ?", (a.id,)
        )
    assert store.get_task(a.id).status == TaskStatus.PENDING


def test_a_hand_written_claim_is_logged_by_the_database_itself(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    a = store.create_task("A")
    with raw_connection(db_path(tmp_path)) as connection:
        connection.execute(
            "UPDATE tasks SET status = 'in_progress', owner = 'sneaky',"
            " claim_token = '00000000-0000-4000-8000-000000000bad',"
            " changed_at_utc = '2026-01-01T09:00:00.000000Z',"
            " lease_expires_at_utc = '2026-01-01T09:05:00.000000Z' WHERE id = ?",
            (a.id,),
        )
    (claimed,) = [event for event in store.events() if event.kind == "claimed"]
    assert (claimed.task_id, claimed.owner) == (a.id, "sneaky")
    assert store.issued_claim_tokens() == ["00000000-0000-4000-8000-000000000bad"]


def test_the_event_log_refuses_updates_and_deletes(tmp_path: Path) -> None:
    new_store(tmp_path).create_task("A")
    with raw_connection(db_path(tmp_path)) as connection:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            connection.execute("UPDATE task_events SET owner = 'mallory'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            connection.execute("DELETE FROM task_events")
