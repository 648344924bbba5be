"""Where the chapter's state lives, and the checks that keep it inside the workspace.

The store writes `<workspace>/.agent_tutorial/<name>`. Every part of that
path is resolved with realpath and checked, because a symlink or a hard link
planted there would let the database write outside the workspace (or into
someone else's file). What is refused is left untouched.

A workspace the machine will not let us use (a read-only or full disk, a
folder this user may not write, `/proc/1`) is `store_unavailable`, through
`file_failures`, like every other OS-level failure of a state file; a path
no state file can live in at all is `unsafe_store_path`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from agent17.domain import ErrorCode, TaskError
from agent17.store.file_failures import (
    NOT_OPENED,
    UNUSABLE_PATH_ERRNOS,
    RefusalFactory,
    os_failure,
)

__all__ = ["RefusalFactory"]  # defined beside the failures, used by every store through here

STATE_DIRNAME = ".agent_tutorial"
TASK_DB_NAME = "tasks.sqlite3"
WAL_OWNER_SUFFIX = "-wal-owner"
SQLITE_SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal", WAL_OWNER_SUFFIX)
"""The files beside a state file that are written with it: SQLite's, and agent17's record."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_workspace(
    workspace: str | os.PathLike[str], refusal: RefusalFactory = TaskError
) -> Path:
    """The workspace as a real, existing directory (created if missing)."""
    raw = Path(workspace)
    if not raw.exists():
        raw.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(raw))
    if not real.is_dir():
        raise refusal(ErrorCode.UNSAFE_STORE_PATH, f"workspace is not a directory: {raw}")
    return real


def state_dir(workspace: Path, refusal: RefusalFactory = TaskError) -> Path:
    """`<workspace>/.agent_tutorial`, created on first use; refused if it is a link or a file."""
    path = workspace / STATE_DIRNAME
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        # Another process may create it first; what it is gets checked below.
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        info = os.lstat(path)
    unsafe = ErrorCode.UNSAFE_STORE_PATH
    if stat.S_ISLNK(info.st_mode):
        raise refusal(unsafe, f"{path} is a symbolic link; the state folder must be a directory")
    if not stat.S_ISDIR(info.st_mode):
        raise refusal(unsafe, f"{path} is not a directory")
    real = Path(os.path.realpath(path))
    if not _inside(real, workspace):
        raise refusal(unsafe, f"{path} resolves outside the workspace")
    return real


def check_state_file(
    path: Path, workspace: Path, refusal: RefusalFactory = TaskError
) -> os.stat_result | None:
    """Refuse a state file that is a link, not regular, hard-linked, or outside the workspace.

    Returns its lstat result, or None when it does not exist yet.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    unsafe = ErrorCode.UNSAFE_STORE_PATH
    if stat.S_ISLNK(info.st_mode):
        raise refusal(unsafe, f"{path} is a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise refusal(unsafe, f"{path} is not a regular file")
    if info.st_nlink != 1:
        raise refusal(unsafe, f"{path} has {info.st_nlink} hard links; it must have exactly one")
    if not _inside(Path(os.path.realpath(path)), workspace):
        raise refusal(unsafe, f"{path} resolves outside the workspace")
    return info


def safe_state_file(
    workspace: str | os.PathLike[str], name: str, refusal: RefusalFactory = TaskError
) -> Path:
    """Resolve and check `<workspace>/.agent_tutorial/<name>` and its side files.

    The workspace and the state folder are created when missing. A path no state
    file can live in is `unsafe_store_path`; a machine that will not let us use
    it (permissions, a read-only or full disk) is `store_unavailable`.
    """
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not a plain state file name: {name!r}")
    text = os.fspath(workspace)  # TypeError for what is not a path at all: a wiring bug
    if isinstance(text, str):
        if "\x00" in text:
            raise refusal(ErrorCode.UNSAFE_STORE_PATH, "the workspace path contains a NUL")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # SQLite opens a file by its UTF-8 name; a surrogate (an undecodable byte
            # of a file name, or a lone half of a pair) has none.
            raise refusal(
                ErrorCode.UNSAFE_STORE_PATH, f"the workspace path is not valid Unicode: {text!r}"
            ) from None
    try:
        root = resolve_workspace(workspace, refusal)
        path = state_dir(root, refusal) / name
        check_state_file(path, root, refusal)
        for suffix in SQLITE_SIDECAR_SUFFIXES:
            check_state_file(path.with_name(name + suffix), root, refusal)
    except OSError as error:
        if error.errno in UNUSABLE_PATH_ERRNOS:
            raise refusal(
                ErrorCode.UNSAFE_STORE_PATH,
                f"no state file can live in {text!r}: {error.strerror}",
            ) from None
        raise os_failure(refusal, Path(text) / STATE_DIRNAME / name, error, NOT_OPENED) from None
    return path
