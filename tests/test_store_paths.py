"""Path safety: every way of pointing the database outside the workspace is refused untouched."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from store_fixtures import db_path, digest, new_store, raises_code

from agent17 import Mailbox, SqliteTaskStore
from agent17.domain import Refusal


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace, holding somebody else's file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "precious.txt").write_bytes(b"somebody else's bytes\n")
    return path


def test_the_database_lives_under_the_workspace_state_folder(workspace: Path) -> None:
    store = new_store(workspace)
    assert store.path == db_path(workspace).resolve()
    assert store.workspace == workspace.resolve()
    assert store.path.is_file()


def test_a_missing_workspace_is_created(tmp_path: Path) -> None:
    store = new_store(tmp_path / "new" / "ws")
    assert store.path.is_file()


def test_the_database_as_a_symlink_to_an_outside_file_is_refused(
    workspace: Path, outside: Path
) -> None:
    target = outside / "precious.txt"
    before = digest(target)
    db_path(workspace).parent.mkdir()
    db_path(workspace).symlink_to(target)

    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert digest(target) == before
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_a_symlink_to_an_outside_sqlite_database_is_refused(workspace: Path, outside: Path) -> None:
    # Even a valid task board elsewhere must not be written through a link.
    elsewhere = new_store(outside)
    elsewhere.create_task("theirs")
    elsewhere.close()
    before = digest(elsewhere.path)
    db_path(workspace).parent.mkdir()
    db_path(workspace).symlink_to(elsewhere.path)

    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert digest(elsewhere.path) == before


def test_the_state_folder_as_a_symlink_to_an_outside_folder_is_refused(
    workspace: Path, outside: Path
) -> None:
    (workspace / ".agent_tutorial").symlink_to(outside, target_is_directory=True)
    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_the_database_as_a_hard_link_to_an_outside_file_is_refused(
    workspace: Path, outside: Path
) -> None:
    target = outside / "precious.txt"
    before = digest(target)
    db_path(workspace).parent.mkdir()
    os.link(target, db_path(workspace))
    assert os.stat(db_path(workspace)).st_nlink == 2

    error = raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert "hard link" in str(error)
    assert digest(target) == before


def test_a_hard_linked_database_is_refused_even_inside_the_workspace(workspace: Path) -> None:
    store = new_store(workspace)
    store.create_task("A")
    store.close()
    os.link(store.path, workspace / "copy.sqlite3")
    raises_code("unsafe_store_path", lambda: new_store(workspace))


def test_a_directory_at_the_database_path_is_refused(workspace: Path) -> None:
    db_path(workspace).mkdir(parents=True)
    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert list(db_path(workspace).iterdir()) == []


def test_a_fifo_at_the_database_path_is_refused(workspace: Path) -> None:
    db_path(workspace).parent.mkdir()
    os.mkfifo(db_path(workspace))
    # Opening a FIFO would block forever; the check must happen before any open.
    raises_code("unsafe_store_path", lambda: new_store(workspace))


def test_a_file_at_the_state_folder_path_is_refused(workspace: Path) -> None:
    (workspace / ".agent_tutorial").write_text("not a folder")
    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert (workspace / ".agent_tutorial").read_text() == "not a folder"


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", "-wal-owner"])
def test_a_sidecar_file_that_is_a_symlink_is_refused(
    workspace: Path, outside: Path, suffix: str
) -> None:
    target = outside / "precious.txt"
    before = digest(target)
    db_path(workspace).parent.mkdir()
    db_path(workspace).with_name("tasks.sqlite3" + suffix).symlink_to(target)

    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert digest(target) == before
    assert not db_path(workspace).exists()  # refused before SQLite created anything


def test_a_wal_symlink_planted_next_to_an_existing_board_is_refused(
    workspace: Path, outside: Path
) -> None:
    store = new_store(workspace)
    store.create_task("A")
    store.close()
    before = digest(store.path)
    store.path.with_name("tasks.sqlite3-wal").symlink_to(outside / "precious.txt")
    raises_code("unsafe_store_path", lambda: new_store(workspace))
    assert digest(store.path) == before
    assert (outside / "precious.txt").read_bytes() == b"somebody else's bytes\n"


def test_a_workspace_reached_through_a_symlink_is_resolved_to_its_real_path(
    tmp_path: Path, workspace: Path
) -> None:
    # A link to the workspace itself is fine: everything is resolved, then kept inside.
    alias = tmp_path / "alias"
    alias.symlink_to(workspace, target_is_directory=True)
    store = new_store(alias)
    assert store.workspace == workspace.resolve()
    assert store.path == db_path(workspace).resolve()


def test_a_workspace_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    raises_code("unsafe_store_path", lambda: SqliteTaskStore(not_a_folder))


@pytest.mark.parametrize(
    "name",
    ["a\x00b", "half \ud800", "x" * 300, "file/below"],
    ids=["nul", "surrogate", "long", "file"],
)
@pytest.mark.parametrize("opener", [SqliteTaskStore, Mailbox], ids=["board", "mailbox"])
def test_a_workspace_path_no_state_file_can_live_in_is_unsafe_store_path(
    tmp_path: Path, name: str, opener: Callable[[Path], object]
) -> None:
    # A NUL or a surrogate cannot reach the file system or SQLite's UTF-8 file name;
    # a name past NAME_MAX, or a path through a regular file, cannot be a folder.
    (tmp_path / "file").write_text("x")
    with pytest.raises(Refusal) as refused:
        opener(tmp_path / name)
    assert refused.value.code == "unsafe_store_path"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["file"]
