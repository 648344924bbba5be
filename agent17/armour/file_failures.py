"""An OS-level failure of a state file becomes a `store_unavailable` that says what to do.

A full disk, a read-only mount, an immutable folder, a file this user may not
open, an I/O error: none of these is a bug in agent17 nor damage to the
board, and none may surface as a driver traceback. Each becomes one refusal,
the code PostgreSQL already uses for a server that is out of disk, read-only
or refusing privileges (`store_unavailable`): the situation is the same to the
caller on either engine (the store is intact, the machine will not let us use
it now; fix the machine, run again), so a teammate, a tool or a notebook
handles it once. `store_unreadable` would be wrong: it tells the user the file
is damaged and sends them to a backup they do not need.

The message names the file, the failure, whether anything changed, and the
one thing to do about it; it is one line, because the teammate process prints
a refusal as its last line.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from agent17.armour.held_files import held
from agent17.domain import ErrorCode, Refusal

RefusalFactory = Callable[[ErrorCode, str], Refusal]
"""Builds the caller's refusal (TaskError, MailboxError, ...) from a code and a message."""

UNAVAILABLE: Final = ErrorCode.STORE_UNAVAILABLE

NOTHING_CHANGED: Final = "nothing was changed"
NOT_OPENED: Final = "nothing was opened or changed"
COMMIT_UNKNOWN: Final = (
    "the write may or may not have reached the disk: read it again to see whether it happened"
)

_FULL: Final = "free space on the file system that holds it (or raise its quota), then run again"
_READ_ONLY: Final = (
    "make it writable (remount the file system read-write, or let this user write the folder"
    " and its files), or use a workspace on a writable disk"
)
_DENIED: Final = (
    "let this user (uid {uid}) read and write the folder and its files, and check that none"
    " is immutable (lsattr, chattr -i)"
)
_IO: Final = (
    "the disk may be failing: check the system log (dmesg), and copy the workspace to a"
    " healthy disk before going on"
)
_LOCKED: Final = "find the program holding it (fuser FILE) and stop it, or try again later"
_ELSEWHERE: Final = "use a workspace on a writable local disk"

# Path errors that mean "no state file can live there", as opposed to the
# machine refusing us (permissions, a full or read-only disk).
UNUSABLE_PATH_ERRNOS: Final = frozenset({errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP})

_ERRNO_ADVICE: Final = {
    errno.ENOSPC: _FULL,
    errno.EDQUOT: _FULL,
    errno.EFBIG: _FULL,
    errno.EROFS: _READ_ONLY,
    errno.EACCES: _DENIED,
    errno.EPERM: _DENIED,
    errno.EIO: _IO,
}

# SQLite's primary result codes for a file the machine will not let us use. Only
# the primary code is read: SQLite reports no errno, and the extended codes (which
# system call failed) change nothing about what the user should do.
_SQLITE_ADVICE: Final = {
    sqlite3.SQLITE_FULL: ("the disk is full", _FULL),
    sqlite3.SQLITE_READONLY: ("it cannot be written", _READ_ONLY),
    sqlite3.SQLITE_CANTOPEN: ("it cannot be opened", _DENIED),
    sqlite3.SQLITE_PERM: ("permission denied", _DENIED),
    sqlite3.SQLITE_AUTH: ("permission denied", _DENIED),
    sqlite3.SQLITE_IOERR: ("an I/O error", _IO),
    sqlite3.SQLITE_NOLFS: ("the file is too large for this file system", _FULL),
    # After the busy timeout: another process held the write lock all along (what
    # PostgreSQL's lock timeout is too). Nothing is wrong with the file.
    sqlite3.SQLITE_BUSY: ("another process held its lock too long", _LOCKED),
    sqlite3.SQLITE_LOCKED: ("another process held its lock too long", _LOCKED),
}
# Codes SQLite gives for a file it may not open or write, without saying why (an
# I/O error included: a write to an immutable -wal is one), so the OS is asked.
_ACCESS_CODES: Final = frozenset(
    {
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_AUTH,
        sqlite3.SQLITE_IOERR,
    }
)
# Writes refused because the file was moved or replaced under the connection:
# that is the path changing, not the machine failing.
_READONLY_DBMOVED: Final = sqlite3.SQLITE_READONLY | (4 << 8)


def os_failure(refusal: RefusalFactory, path: Path, error: OSError, outcome: str) -> Refusal:
    """The refusal for an OSError met while using the state file `path`.

    `store_unavailable`, except for a path no state file can live at (a symbolic
    link met with O_NOFOLLOW, a file where a folder should be): `unsafe_store_path`.
    """
    where = error.filename if isinstance(error.filename, str) else str(path)
    reason = error.strerror or type(error).__name__
    if error.errno in UNUSABLE_PATH_ERRNOS:
        return refusal(ErrorCode.UNSAFE_STORE_PATH, f"{where}: {reason}; {outcome}")
    advice = _ERRNO_ADVICE.get(error.errno or 0, _ELSEWHERE).format(uid=os.geteuid())
    return refusal(UNAVAILABLE, f"{where}: {reason}; {outcome}. To go on: {advice}")


def sqlite_failure(
    refusal: RefusalFactory, path: Path, error: sqlite3.Error, outcome: str
) -> Refusal | None:
    """The refusal for an OS-level SQLite failure on `path`, or None when it is not one."""
    code = getattr(error, "sqlite_errorcode", None) or 0
    if code == _READONLY_DBMOVED:
        return refusal(
            ErrorCode.UNSAFE_STORE_PATH,
            f"{path} was moved or replaced while open; {NOTHING_CHANGED}. Open it again",
        )
    known = _SQLITE_ADVICE.get(code & 0xFF)
    if code == sqlite3.SQLITE_IOERR_SHMSIZE:  # the -shm could not grow: a full disk, mostly
        known = ("its -shm could not grow (a full disk?)", _FULL)
    if known is None:
        return None
    what, advice = known
    if code & 0xFF in _ACCESS_CODES:
        what, advice = _access_problem(path) or known
    return refusal(
        UNAVAILABLE,
        f"{path}: {what} ({error}); {outcome}. To go on: {advice.format(uid=os.geteuid())}",
    )


def transaction_failure(
    refusal: RefusalFactory, path: Path, error: BaseException, committing: bool
) -> Refusal | None:
    """The refusal for a failure of the machine during a transaction on `path`, else None."""
    if isinstance(error, OSError):  # the identity check's lstat
        return os_failure(refusal, path, error, NOTHING_CHANGED)
    if not isinstance(error, sqlite3.Error):
        return None
    code = getattr(error, "sqlite_errorcode", None) or 0
    # An I/O error on COMMIT may come after the commit frame was written: a later
    # opener's recovery can still find it, so its outcome is unknown.
    unknown = committing and code & 0xFF == sqlite3.SQLITE_IOERR
    return sqlite_failure(refusal, path, error, COMMIT_UNKNOWN if unknown else NOTHING_CHANGED)


def _access_problem(path: Path) -> tuple[str, str] | None:
    """Why this process may not write `path`, as the OS sees it; None if it cannot tell."""
    folder = path.parent
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    if read_only:
        return "its file system is mounted read-only", _READ_ONLY
    files = [path.with_name(path.name + end) for end in ("", "-wal", "-shm")]
    for each, needs in [(folder, os.W_OK | os.X_OK)] + [(f, os.R_OK | os.W_OK) for f in files]:
        if each.exists() and not os.access(each, needs):
            return f"this user may not write {each}", _DENIED
    return None


def read_failure(*paths: Path) -> tuple[Path, OSError] | None:
    """The first OSError met reading `paths` whole (a missing one is skipped), or None."""
    for path in paths:
        try:
            # Through the shared descriptor: closing another one would drop SQLite's locks.
            with held(path) as share:
                offset = 0
                while share is not None and (data := os.pread(share.descriptor, 1 << 20, offset)):
                    offset += len(data)
        except OSError as error:
            return path, error
    return None
