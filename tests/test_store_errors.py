"""Every error code of the store, each provoked on purpose, and what a refusal leaves behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_fixtures import (
    ManualClock,
    db_path,
    digest,
    fixed_ids,
    new_store,
    raises_code,
    raw_connection,
    sequence_of,
    task_id,
    token,
)

from agent17 import SqliteTaskStore, TaskError, TaskStatus
from agent17.deterministic import uuid_sequence


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> SqliteTaskStore:
    return new_store(tmp_path, clock=clock)


# -- task_not_found, invalid_task_input, dependency_not_found -------------------------


def test_an_unknown_id_is_task_not_found_for_every_operation(store: SqliteTaskStore) -> None:
    ghost = task_id(42)
    raises_code("task_not_found", lambda: store.get_task(ghost))
    raises_code("task_not_found", lambda: store.claim_task(ghost, "alice"))
    raises_code("task_not_found", lambda: store.complete_task(ghost, "alice", token(1)))


@pytest.mark.parametrize("subject", ["", "   ", "\n\t"])
def test_an_empty_subject_is_invalid_task_input(store: SqliteTaskStore, subject: str) -> None:
    raises_code("invalid_task_input", lambda: store.create_task(subject))
    assert store.list_tasks() == []


LETTERED_ID = "abcdef01-2345-4678-89ab-cdef01234567"


@pytest.mark.parametrize(
    "bad_id",
    [
        LETTERED_ID.upper(),  # the id of an existing task, spelt in uppercase
        "abcdef01-2345-4678-89ab-cdef0123456A",  # one uppercase digit
        "{abcdef01-2345-4678-89ab-cdef01234567}",
        "abcdef012345467889abcdef01234567",  # no hyphens
        "urn:uuid:abcdef01-2345-4678-89ab-cdef01234567",
        " abcdef01-2345-4678-89ab-cdef01234567",
        "A",
        "",
    ],
)
def test_a_non_canonical_id_is_invalid_task_input_everywhere(tmp_path: Path, bad_id: str) -> None:
    store = new_store(tmp_path, new_task_id=fixed_ids(LETTERED_ID))
    store.create_task("A")
    raises_code("invalid_task_input", lambda: store.get_task(bad_id))
    raises_code("invalid_task_input", lambda: store.claim_task(bad_id, "alice"))
    raises_code("invalid_task_input", lambda: store.complete_task(bad_id, "alice", token(1)))
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=[bad_id]))
    assert [t.id for t in store.list_tasks()] == [LETTERED_ID]
    assert store.get_task(LETTERED_ID).status == TaskStatus.PENDING


def test_a_non_canonical_claim_token_is_invalid_task_input(tmp_path: Path) -> None:
    store = new_store(tmp_path, new_claim_token=fixed_ids(LETTERED_ID))
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code(
        "invalid_task_input", lambda: store.complete_task(a.id, "alice", claim.claim_token.upper())
    )
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    store.complete_task(a.id, "alice", claim.claim_token)


def test_a_duplicate_dependency_is_invalid_task_input(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=[a.id, a.id]))
    assert len(store.list_tasks()) == 1


def test_a_self_dependency_is_invalid_task_input(tmp_path: Path) -> None:
    # The only way to name yourself is to know your id in advance: inject it.
    me = task_id(5)
    store = new_store(tmp_path, new_task_id=fixed_ids(me))
    raises_code("invalid_task_input", lambda: store.create_task("me", blocked_by=[me]))
    assert store.list_tasks() == []
    assert store.events() == []


def test_blocked_by_given_as_a_string_is_invalid_task_input(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    raises_code("invalid_task_input", lambda: store.create_task("B", blocked_by=a.id))
    assert len(store.list_tasks()) == 1


def test_an_empty_owner_is_invalid_task_input(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    raises_code("invalid_task_input", lambda: store.claim_task(a.id, ""))
    raises_code("invalid_task_input", lambda: store.claim_next("  "))


def test_a_missing_dependency_is_dependency_not_found(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    error = raises_code(
        "dependency_not_found", lambda: store.create_task("B", blocked_by=[a.id, task_id(77)])
    )
    assert task_id(77) in str(error)
    assert [t.id for t in store.list_tasks()] == [a.id]


# -- task_not_claimable, task_blocked ------------------------------------------------


def test_claiming_a_task_in_progress_or_completed_is_task_not_claimable(
    store: SqliteTaskStore,
) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "alice"))
    store.complete_task(a.id, "alice", claim.claim_token)
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "bob"))
    assert store.get_task(a.id).owner == "alice"


def test_claiming_a_task_with_unfinished_dependencies_is_task_blocked(
    store: SqliteTaskStore,
) -> None:
    a = store.create_task("A")
    b = store.create_task("B", blocked_by=[a.id])
    error = raises_code("task_blocked", lambda: store.claim_task(b.id, "alice"))
    assert a.id in str(error)
    assert store.get_task(b.id).status == TaskStatus.PENDING


# -- claim_mismatch ------------------------------------------------------------------


def test_completing_with_the_wrong_owner_is_claim_mismatch(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "bob", claim.claim_token))
    assert store.get_task(a.id).status == TaskStatus.IN_PROGRESS
    store.complete_task(a.id, "alice", claim.claim_token)  # alice still holds it


def test_completing_with_the_wrong_token_is_claim_mismatch(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    b = store.create_task("B")
    claim_a = store.claim_task(a.id, "alice")
    claim_b = store.claim_task(b.id, "alice")
    # A real token, but of another task.
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", claim_b.claim_token))
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", token(50)))
    store.complete_task(a.id, "alice", claim_a.claim_token)


def test_completing_a_pending_task_is_claim_mismatch(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    raises_code("claim_mismatch", lambda: store.complete_task(a.id, "alice", token(1)))
    assert store.get_task(a.id).status == TaskStatus.PENDING


def test_completing_twice_is_claim_mismatch(store: SqliteTaskStore) -> None:
    a = store.create_task("A")
    claim = store.claim_task(a.id, "alice")
    store.complete_task(a.id, "alice", claim.claim_token)
    error = raises_code(
        "claim_mismatch", lambda: store.complete_task(a.id, "alice", claim.claim_token)
    )
    assert "already completed" in str(error)
    assert [e.kind.value for e in store.events()].count("completed") == 1


# -- graph_corrupted (planted with raw writes the store would never make) -----------


def _abc(store: SqliteTaskStore) -> tuple[str, str, str]:
    a = store.create_task("A")
    b = store.create_task("B")
    c = store.create_task("C", blocked_by=[a.id, b.id])
    return a.id, b.id, c.id


def test_a_dependency_on_a_deleted_task_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a, _, c = _abc(store)
    path = db_path(tmp_path)
    with raw_connection(path, unchecked=True) as connection:
        connection.execute("DELETE FROM tasks WHERE id = ?", (a,))
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(c))
    raises_code("graph_corrupted", lambda: store.claim_task(c, "alice"))


def test_a_dependency_row_of_a_deleted_task_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    _, _, c = _abc(store)
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("DELETE FROM tasks WHERE id = ?", (c,))
    raises_code("graph_corrupted", store.list_tasks)


def test_a_self_edge_is_graph_corrupted(store: SqliteTaskStore, tmp_path: Path) -> None:
    a, _, _ = _abc(store)
    path = db_path(tmp_path)
    sequence = sequence_of(path, a)
    with raw_connection(path, unchecked=True) as connection:
        connection.execute("INSERT INTO task_dependencies VALUES (?, ?, 0)", (sequence, sequence))
        connection.execute(
            "UPDATE tasks SET unmet_dependencies = 1 WHERE sequence = ?", (sequence,)
        )
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(a))
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_a_self_edge_with_a_zero_count_is_caught_by_claim_next(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    # The count says "ready", the edge says "waits for itself": claim_next must not pick it.
    a, _, _ = _abc(store)
    path = db_path(tmp_path)
    sequence = sequence_of(path, a)
    with raw_connection(path, unchecked=True) as connection:
        connection.execute("INSERT INTO task_dependencies VALUES (?, ?, 0)", (sequence, sequence))
    raises_code("graph_corrupted", lambda: store.claim_next("alice"))
    assert store.events()[-1].kind == "created"  # nothing was claimed


def test_an_edge_to_a_newer_task_forming_a_cycle_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    # C already waits for A; make A wait for C as well: A -> C -> A.
    a, _, c = _abc(store)
    path = db_path(tmp_path)
    with raw_connection(path, unchecked=True) as connection:
        connection.execute(
            "INSERT INTO task_dependencies VALUES (?, ?, 0)",
            (sequence_of(path, a), sequence_of(path, c)),
        )
        connection.execute("UPDATE tasks SET unmet_dependencies = 1 WHERE id = ?", (a,))
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.get_task(a))
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_an_unmet_count_below_the_edges_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a, b, c = _abc(store)
    store.claim_task(a, "alice")
    store.claim_task(b, "bob")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("UPDATE tasks SET unmet_dependencies = 0 WHERE id = ?", (c,))
    raises_code("graph_corrupted", lambda: store.claim_next("carol"))
    raises_code("graph_corrupted", lambda: store.claim_task(c, "carol"))
    raises_code("graph_corrupted", store.list_tasks)
    assert [e.owner for e in store.events() if e.kind == "claimed"] == ["alice", "bob"]


def test_an_unmet_count_above_the_edges_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a, _, _ = _abc(store)
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("UPDATE tasks SET unmet_dependencies = 1 WHERE id = ?", (a,))
    raises_code("graph_corrupted", store.list_tasks)
    raises_code("graph_corrupted", lambda: store.claim_task(a, "alice"))


def test_completing_into_a_negative_unmet_count_is_graph_corrupted(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a, _, c = _abc(store)
    claim = store.claim_task(a, "alice")
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("UPDATE tasks SET unmet_dependencies = 0 WHERE id = ?", (c,))
    raises_code("graph_corrupted", lambda: store.complete_task(a, "alice", claim.claim_token))
    # The completion was rolled back whole: alice still holds A.
    with raw_connection(db_path(tmp_path)) as connection:
        row = connection.execute("SELECT status, owner FROM tasks WHERE id = ?", (a,)).fetchone()
    assert row == ("in_progress", "alice")


# -- claim_token_collision --------------------------------------------------------------


def test_a_colliding_claim_token_rolls_the_whole_claim_back(tmp_path: Path) -> None:
    store = new_store(tmp_path, new_claim_token=fixed_ids(token(1), token(1), token(2)))
    a = store.create_task("A")
    b = store.create_task("B")
    store.claim_task(a.id, "alice")
    events_before = store.events()

    raises_code("claim_token_collision", lambda: store.claim_task(b.id, "bob"))
    assert store.get_task(b.id).status == TaskStatus.PENDING
    assert store.get_task(b.id).owner is None
    assert store.events() == events_before
    with raw_connection(db_path(tmp_path)) as connection:
        history = connection.execute(
            "SELECT token, task_sequence, owner FROM task_claim_tokens"
        ).fetchall()
    assert history == [(token(1), 1, "alice")]

    # The next claim draws a fresh token and succeeds.
    claim = store.claim_next("bob")
    assert claim is not None and claim.task.id == b.id and claim.claim_token == token(2)


def test_a_token_reused_after_completion_still_collides(tmp_path: Path) -> None:
    # Tokens are unique for the database's lifetime, not just among live claims.
    store = new_store(tmp_path, new_claim_token=fixed_ids(token(1), token(1)))
    a = store.create_task("A")
    b = store.create_task("B")
    store.complete_task(a.id, "alice", store.claim_task(a.id, "alice").claim_token)
    raises_code("claim_token_collision", lambda: store.claim_next("bob"))
    assert store.get_task(b.id).status == TaskStatus.PENDING


# -- schema_version_mismatch (also for foreign files): nothing changed -------------------


def _files_in(folder: Path) -> dict[str, str]:
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir()) if entry.is_file()}


def test_a_schema_version_mismatch_leaves_the_file_byte_identical(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    store.close()
    path = db_path(tmp_path)
    with raw_connection(path) as connection:
        connection.execute("UPDATE task_metadata SET value = '2' WHERE key = 'schema_version'")
        # Fold the WAL back so the main file alone holds everything.
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = digest(path)
    stat_before = os.stat(path)

    error = raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert "'2'" in str(error)

    assert digest(path) == before
    assert os.stat(path).st_mtime_ns == stat_before.st_mtime_ns
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    with raw_connection(path) as connection:
        assert connection.execute("SELECT value FROM task_metadata").fetchall() == [("2",)]


def test_a_schema_mismatch_still_in_the_wal_of_a_crashed_writer_leaves_both_files_untouched(
    tmp_path: Path,
) -> None:
    # A newer agent17 wrote version 2 and was killed before any checkpoint: the
    # change lives only in the -wal file. Refusing must not fold that WAL into
    # the main file (a read-write connection does so when it closes).
    new_store(tmp_path).close()
    path = db_path(tmp_path)
    writer = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "connection.execute(\"UPDATE task_metadata SET value = '2'\")\n"
        "os._exit(0)  # die like kill -9: no close, no checkpoint\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(path)], check=True, timeout=60)
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 0
    main_before, wal_before = digest(path), digest(wal)

    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert digest(path) == main_before
    assert wal.exists() and digest(wal) == wal_before


def test_a_missing_schema_version_row_is_a_mismatch(tmp_path: Path) -> None:
    new_store(tmp_path).close()
    path = db_path(tmp_path)
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
    assert path.read_text() == "my shopping list\nmilk\n"


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    path.parent.mkdir()
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE recipes (name TEXT)")
    foreign.execute("INSERT INTO recipes VALUES ('soup')")
    foreign.commit()
    foreign.close()
    before = digest(path)

    raises_code("schema_version_mismatch", lambda: new_store(tmp_path))
    assert digest(path) == before
    assert not path.with_name(path.name + "-journal").exists()
    with raw_connection(path) as connection:
        names = [name for (name,) in connection.execute("SELECT name FROM sqlite_master")]
    assert names == ["recipes"]


def test_every_refusal_is_a_task_error_with_a_string_code(store: SqliteTaskStore) -> None:
    with pytest.raises(TaskError) as caught:
        store.get_task(task_id(3))
    assert isinstance(caught.value.code, str)
    assert isinstance(caught.value, Exception)


def test_a_second_store_on_the_same_file_sees_the_same_board(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a = store.create_task("A")
    other = new_store(tmp_path, new_claim_token=uuid_sequence(72))
    claim = other.claim_task(a.id, "bob")
    raises_code("task_not_claimable", lambda: store.claim_task(a.id, "alice"))
    assert store.get_task(a.id).owner == "bob"
    store.complete_task(a.id, "bob", claim.claim_token)


def test_an_inflated_unmet_count_is_caught_when_its_last_dependency_completes(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    a, b, c = _abc(store)
    with raw_connection(db_path(tmp_path), unchecked=True) as connection:
        connection.execute("UPDATE tasks SET unmet_dependencies = 3 WHERE id = ?", (c,))
    claim_a = store.claim_task(a, "alice")
    claim_b = store.claim_task(b, "bob")
    # The check runs on every completion, so the first one already notices the drift
    # instead of leaving C invisible to claim_next forever.
    raises_code("graph_corrupted", lambda: store.complete_task(a, "alice", claim_a.claim_token))
    raises_code("graph_corrupted", lambda: store.complete_task(b, "bob", claim_b.claim_token))
    assert store.get_task(a).status is TaskStatus.IN_PROGRESS


def test_blocked_by_that_is_not_a_list_is_invalid_task_input(store: SqliteTaskStore) -> None:
    raises_code("invalid_task_input", lambda: store.create_task("X", blocked_by=None))  # type: ignore[arg-type]
    raises_code("invalid_task_input", lambda: store.create_task("X", blocked_by=7))  # type: ignore[arg-type]
    assert store.list_tasks() == []
