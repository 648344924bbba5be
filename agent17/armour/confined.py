"""Files inside a workspace, found and opened in one walk that nothing can redirect.

A path checked by name (realpath) and then opened by name again loses a race:
between the two, another process can swap a folder of the path for a symlink
to somewhere else, and the open follows it. So no path is ever opened by its
full name here. The workspace is opened as a directory descriptor and each
component is opened beneath the one before it with O_NOFOLLOW: what was
checked is what is used, whatever happens to the names meanwhile.

The rules a path follows:

- `..` is taken by name, as `cd` takes it (`a/../b` is `b`); one that climbs
  above the workspace is `path_outside_workspace`, and so is an absolute path
  that does not start with the workspace's own;
- a symlink is never followed by the kernel: its target is read and the walk
  starts again from the workspace with the target in its place, by the same
  rules, so a link that stays inside works and one that leads out is refused
  like `..` out of the workspace;
- the board's folder `.agent_tutorial` is `protected_path`, by name and by
  identity (on a file system that ignores case, or when the name is a link);
- every error of the file system is a ToolError with a code, never a crash.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent17.domain import ToolError, WorkspaceCode, preview

PROTECTED_DIRECTORY: Final = ".agent_tutorial"
MAX_SYMLINKS: Final = 40
"""Links followed (and races lost) in one path before it is refused: the kernel's own bound."""
# O_PATH (Linux): a folder walked through need not be readable, as with a lookup by name.
_THROUGH: Final = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
# O_NONBLOCK: opening a FIFO must not wait for a writer (read_file refuses it after).
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What open(O_NOFOLLOW) answers for a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD.
_A_LINK: Final = frozenset({errno.ELOOP, errno.EMLINK})


def shown(path: str) -> str:
    """A model's path for a message: any length, so cut."""
    return preview(path, 80)


def file_system_refusal(path: str, error: OSError, code: WorkspaceCode) -> ToolError:
    """An OS error as the tool's refusal: a name too long is `invalid_path`, the rest `code`."""
    if error.errno == errno.ENAMETOOLONG:
        return ToolError(
            WorkspaceCode.INVALID_PATH, f"{shown(path)}: a name in the path is too long"
        )
    return ToolError(code, f"{shown(path)}: {error.strerror or error}")


@dataclass(frozen=True, slots=True)
class _Link:
    """The walk met a symlink at `index` (-1: the last component); None: it changed meanwhile."""

    index: int
    target: str | None


_Leaf = Callable[[int, str, str], int | _Link]
"""What is done with the last component: (its folder's descriptor, its name, the request)."""


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


class ConfinedRoot:
    """A workspace whose files read_file and write_file open; nothing outside it, ever.

    The workspace itself is opened at each call by its real path: that path is
    the operator's, not the model's, and a descriptor kept open would outlive
    the tools that hold it.
    """

    def __init__(self, workspace: Path) -> None:
        self.root = Path(os.path.realpath(workspace))
        if not self.root.is_dir():
            raise ValueError(f"workspace {str(workspace)!r} is not a directory")
        # An absolute path (a model's, or a link's target) may spell the workspace either way.
        spellings = {str(self.root), os.path.abspath(workspace)}
        self._spellings = [_components(spelling) for spelling in sorted(spellings)]
        try:
            self._path_max = os.pathconf(self.root, "PC_PATH_MAX")
        except (OSError, ValueError):
            self._path_max = 4096
        self._root_bytes = len(os.fsencode(str(self.root)))

    def open_to_read(self, path: str) -> tuple[int, str]:
        """A read-only descriptor of what `path` names (any kind), and its workspace path."""
        return self._walk(path, WorkspaceCode.FILE_UNREADABLE, False, _open_leaf)

    def replace(self, path: str, data: bytes) -> str:
        """Write `data` as the whole file `path`, making missing parents; its workspace path.

        A reader sees the old file or the new one, never half: the bytes go to a
        temporary file created beneath the same folder descriptor, which then
        replaces the file by name within that folder.
        """
        return self._walk(path, WorkspaceCode.FILE_UNWRITABLE, True, _writer(data))[1]

    def _walk(self, path: str, code: WorkspaceCode, create: bool, leaf: _Leaf) -> tuple[int, str]:
        if "\x00" in path:
            raise ToolError(WorkspaceCode.INVALID_PATH, "the path contains a NUL character")
        parts = self._inside(path, _components(path), path.startswith("/"))
        try:
            for _ in range(MAX_SYMLINKS):
                self._check(path, parts)
                found = self._walk_once(path, parts, code, create, leaf)
                if not isinstance(found, _Link):
                    return found, "/".join(parts)
                if found.target is not None:
                    parts = self._followed(path, parts, found.index, found.target)
        except OSError as error:
            raise file_system_refusal(path, error, code) from None
        raise ToolError(WorkspaceCode.INVALID_PATH, f"{shown(path)}: too many symbolic links")

    def _inside(self, path: str, components: list[str], absolute: bool) -> list[str]:
        """`components` as names below the workspace, `..` taken by name; refused if they leave."""
        if absolute:
            for spelling in self._spellings:
                if components[: len(spelling)] == spelling:
                    components = components[len(spelling) :]
                    break
            else:
                raise _outside(path)
        parts: list[str] = []
        for part in components:
            if part != "..":
                parts.append(part)
            elif parts:
                parts.pop()
            else:
                raise _outside(path)
        return parts

    def _followed(self, path: str, parts: list[str], index: int, target: str) -> list[str]:
        """`parts` with the symlink at `index` replaced by its target."""
        if target.startswith("/"):
            here = self._inside(path, _components(target), True)
        else:  # read from the link's own folder
            here = self._inside(path, [*parts[:index], *_components(target)], False)
        return here + parts[index + 1 :]

    def _check(self, path: str, parts: list[str]) -> None:
        if parts and parts[0] == PROTECTED_DIRECTORY:
            raise _protected(path)
        # Walked one name at a time, a path has no length limit: keep the system's.
        length = self._root_bytes + sum(len(os.fsencode(part)) + 1 for part in parts)
        if length >= self._path_max:
            raise ToolError(WorkspaceCode.INVALID_PATH, f"{shown(path)}: the path is too long")

    def _walk_once(
        self, path: str, parts: list[str], code: WorkspaceCode, create: bool, leaf: _Leaf
    ) -> int | _Link:
        directory = os.open(self.root, _THROUGH)
        try:
            protected = _identity(directory, PROTECTED_DIRECTORY)
            for index, name in enumerate(parts[:-1]):
                below = _open_folder(directory, name, path, code, create)
                if isinstance(below, str):
                    return _Link(index, below)
                os.close(directory)
                directory = below
                if protected is not None and _identity(directory, None) == protected:
                    raise _protected(path)  # the board's folder by another name
            if not parts:
                raise ToolError(WorkspaceCode.NOT_A_FILE, f"{shown(path)} is a directory")
            found = leaf(directory, parts[-1], path)
            if isinstance(found, _Link):
                return _Link(len(parts) - 1, found.target)
            return found
        finally:
            os.close(directory)


def _outside(path: str) -> ToolError:
    return ToolError(
        WorkspaceCode.PATH_OUTSIDE_WORKSPACE, f"{shown(path)} is outside the workspace"
    )


def _protected(path: str) -> ToolError:
    return ToolError(WorkspaceCode.PROTECTED_PATH, f"{shown(path)} is the task board's own storage")


def _identity(directory: int, name: str | None) -> tuple[int, int] | None:
    """(device, inode) of `name` in `directory` (of `directory` for None); None if unknown."""
    try:
        found = os.stat(directory) if name is None else os.stat(name, dir_fd=directory)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _link_target(directory: int, name: str) -> str | None:
    """The target of the symlink `name`, or None if `name` is no symlink (any more)."""
    try:
        return os.readlink(name, dir_fd=directory)
    except OSError as error:
        if error.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _open_folder(
    directory: int, name: str, path: str, code: WorkspaceCode, create: bool
) -> int | str:
    """A descriptor of the folder `name` in `directory`, or the target of the symlink it is.

    `create`: a missing folder is made. A name that changes kind while it is
    looked at is looked at again.
    """
    for _ in range(MAX_SYMLINKS):
        try:
            return os.open(name, _THROUGH, dir_fd=directory)
        except FileNotFoundError:
            if not create:
                raise ToolError(
                    WorkspaceCode.FILE_NOT_FOUND, f"{shown(path)} does not exist"
                ) from None
            # Made meanwhile by someone else: the next look says what it is.
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=directory)
            continue
        except OSError as error:
            if error.errno != errno.ENOTDIR and error.errno not in _A_LINK:
                raise
        target = _link_target(directory, name)
        if target is not None:
            return target
        try:
            kind = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(kind) or stat.S_ISLNK(kind):
            continue
        if create:
            raise ToolError(WorkspaceCode.NOT_A_FILE, f"a parent of {shown(path)} is a file")
        raise ToolError(
            WorkspaceCode.FILE_NOT_FOUND, f"{shown(path)} does not exist: a parent is a file"
        )
    raise ToolError(code, f"{shown(path)}: the path kept changing while it was opened")


def _open_leaf(directory: int, name: str, path: str) -> int | _Link:
    try:
        return os.open(name, _READ, dir_fd=directory)
    except FileNotFoundError:
        raise ToolError(WorkspaceCode.FILE_NOT_FOUND, f"{shown(path)} does not exist") from None
    except OSError as error:
        if error.errno not in _A_LINK:
            raise
    return _Link(-1, _link_target(directory, name))


def _writer(data: bytes) -> _Leaf:
    def write(directory: int, name: str, path: str) -> int | _Link:
        try:
            found = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        if found is not None and stat.S_ISLNK(found.st_mode):
            return _Link(-1, _link_target(directory, name))
        if found is not None and stat.S_ISDIR(found.st_mode):
            raise ToolError(WorkspaceCode.NOT_A_FILE, f"{shown(path)} is a directory")
        # A file replaced keeps its permissions (a script stays executable), not setuid.
        mode = None if found is None else stat.S_IMODE(found.st_mode) & 0o777
        _replace_in(directory, name, data, mode, path)
        return len(data)

    return write


def _replace_in(directory: int, name: str, data: bytes, mode: int | None, path: str) -> None:
    # Short and random: never an existing file's name, never too long for the file system.
    temp = f".{name[:50]}.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(temp, _CREATE, 0o666, dir_fd=directory)
    try:
        try:
            if mode is not None:
                os.fchmod(descriptor, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except IsADirectoryError:
            raise ToolError(WorkspaceCode.NOT_A_FILE, f"{shown(path)} is a directory") from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory)
        raise
