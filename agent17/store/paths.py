"""Where the chapter's state lives, and the checks that keep it inside the workspace.

The store writes `<workspace>/.agent_tutorial/<name>`. Every part of that
path is resolved with realpath and checked, because a symlink or a hard link
planted there would let the database write outside the workspace (or into
someone else's file). What is refused is left untouched.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from agent17.domain import ErrorCode, Refusal, TaskError

STATE_DIRNAME = ".agent_tutorial"
TASK_DB_NAME = "tasks.sqlite3"
SQLITE_SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")

RefusalFactory = Callable[[str, str], Refusal]
"""Builds the caller's refusal (TaskError, MailboxError, ...) from a code and a message."""


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
    """Resolve and check `<workspace>/.agent_tutorial/<name>` and its SQLite side files."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not a plain state file name: {name!r}")
    root = resolve_workspace(workspace, refusal)
    path = state_dir(root, refusal) / name
    check_state_file(path, root, refusal)
    for suffix in SQLITE_SIDECAR_SUFFIXES:
        check_state_file(path.with_name(name + suffix), root, refusal)
    return path
