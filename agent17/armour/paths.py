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
from dataclasses import dataclass
from pathlib import Path

from agent17.armour.file_failures import (
    NOT_OPENED,
    UNUSABLE_PATH_ERRNOS,
    RefusalFactory,
    os_failure,
)
from agent17.domain import ErrorCode, TaskError

__all__ = ["RefusalFactory"]  # defined beside the failures, used by every store through here

STATE_DIRNAME = ".agent_tutorial"
TASK_DB_NAME = "tasks.sqlite3"
WAL_OWNER_SUFFIX = "-wal-owner"
SQLITE_SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal", WAL_OWNER_SUFFIX, WAL_OWNER_SUFFIX + ".lock")
"""The files beside a state file that are written with it: SQLite's, agent17's record and lock."""


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


@dataclass(frozen=True, slots=True)
class StateFolder:
    """A workspace whose state folder was resolved and checked: each state file opens in it.

    Opening a team visits the workspace's checks once, here, and hands this to
    the opener of each state file (board, mailbox, ledger, audit), which then
    checks only its own file. It is a path (`os.fspath` gives the workspace), so
    every opener that takes a workspace takes it.
    """

    workspace: Path
    """The real workspace."""
    path: Path
    """Its real `.agent_tutorial` folder."""

    @classmethod
    def open(
        cls, workspace: str | os.PathLike[str], refusal: RefusalFactory = TaskError
    ) -> StateFolder:
        """Resolve and check the workspace and its state folder (created when missing)."""
        try:
            return _open_folder(workspace, refusal)
        except OSError as error:
            raise _unusable(refusal, Path(workspace) / STATE_DIRNAME, error) from None

    def __fspath__(self) -> str:
        return os.fspath(self.workspace)


def _checked_text(workspace: str | os.PathLike[str], refusal: RefusalFactory) -> str:
    text = os.fspath(workspace)  # TypeError for what is not a path at all: a wiring bug
    if not isinstance(text, str):
        raise TypeError(f"a workspace is a str path, not {type(text).__name__}")
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
    return text


def _open_folder(workspace: str | os.PathLike[str], refusal: RefusalFactory) -> StateFolder:
    # What the OS refuses is raised as the OSError, for the caller to name its own path.
    if isinstance(workspace, StateFolder):
        return workspace
    _checked_text(workspace, refusal)
    root = resolve_workspace(workspace, refusal)
    return StateFolder(root, state_dir(root, refusal))


def _unusable(refusal: RefusalFactory, path: Path, error: OSError) -> Exception:
    """The refusal for an OSError met while opening `path`, a state file or the state folder."""
    if error.errno in UNUSABLE_PATH_ERRNOS:
        workspace = path.parent.parent if path.name != STATE_DIRNAME else path.parent
        return refusal(
            ErrorCode.UNSAFE_STORE_PATH,
            f"no state file can live in {os.fspath(workspace)!r}: {error.strerror}",
        )
    return os_failure(refusal, path, error, NOT_OPENED)


def safe_state_file(
    workspace: str | os.PathLike[str], name: str, refusal: RefusalFactory = TaskError
) -> Path:
    """Resolve and check `<workspace>/.agent_tutorial/<name>` and its side files.

    The workspace and the state folder are created when missing (and not checked
    again when `workspace` is a StateFolder). A path no state file can live in is
    `unsafe_store_path`; a machine that will not let us use it (permissions, a
    read-only or full disk) is `store_unavailable`.
    """
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"not a plain state file name: {name!r}")
    try:
        folder = _open_folder(workspace, refusal)
        path = folder.path / name
        check_state_file(path, folder.workspace, refusal)
        for suffix in SQLITE_SIDECAR_SUFFIXES:
            check_state_file(path.with_name(name + suffix), folder.workspace, refusal)
    except OSError as error:
        raise _unusable(refusal, Path(workspace) / STATE_DIRNAME / name, error) from None
    return path
