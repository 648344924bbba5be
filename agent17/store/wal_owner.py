"""Which file a -wal beside a state file was written for: the one fact SQLite does not record.

Why this exists. SQLite replays every frame of a -wal whose checksums hold,
whatever file the -wal lies beside: its header names a page size and random
salts, never the database. And a file replaced under an open connection (a
backup renamed onto the board, or copied over it after `rm`) keeps the old
file's -wal and -shm, because SQLite skips the closing checkpoint and the
deletion when its file has moved. The next opener, a read-only one included
(it reads WAL frames too), would lay the old file's last pages over the
restored one: the restored tasks vanish, the old ones come back, an index
points at rows that are not there, and every write after that makes it
permanent. So each opener of a state file records, in `<file>-wal-owner`
beside it, which file it opened read-write there (its inode), and every
opener checks that record before anything reads the file.

The rule: a -wal (or a non-empty -journal) beside a file that is not the
recorded one is refused (`foreign_wal`), and nothing is touched. Why:

- Only the database's inode is recorded, not the -wal's. A -wal is created by
  a connection to the file at the path at that moment, stays the same file
  while any connection is open, and every agent17 opener records its file
  before it writes a byte. So a -wal beside the recorded file was written for
  it: agent17's own after a kill -9, or another program's (a sqlite3 shell
  that crashed on the board), and it is replayed as SQLite would. A -wal
  beside any other file cannot be shown to belong to it: its inode says
  nothing (a new one every session), and that is the restore case. Recording
  the database alone also means the record changes only when the file does:
  an ordinary open reads a few bytes and writes nothing.
- The inode without the device: every file of one folder lives on one file
  system (a rename cannot cross one), and st_dev can be renumbered across a
  reboot (overlay, btrfs, NFS), which is exactly when a crashed writer's -wal
  must be replayed.
- Even an empty -wal is refused: a process still open on the replaced file
  shares that -wal and the -shm by name and may write its pages into them at
  any moment.
- No record (a folder no agent17 of this kind ever opened read-write: an older
  version, a board made by hand) means no evidence either way, and SQLite's
  own behaviour is kept: a crashed writer's -wal there is never stranded.
- Refuse rather than set the -wal aside: it is the only copy of the replaced
  file's last transactions, and whether they matter is the operator's call.
  The refusal says how to restore safely.
- Concurrent openers of one file write the same record. One that recorded a
  file replaced a moment later names the replaced file, so the next opener
  refuses: the safe side. The record is written whole or not at all (a
  temporary file, fsync, rename, fsync of the folder); a record that cannot
  be read counts as none.

What it cannot see: an inode number can be handed out again once its file
is deleted, so `rm tasks.sqlite3` followed by copying a backup in, after a
writer crashed, may give the copy the old number and the crashed writer's
-wal would be replayed. The restore procedure removes the -wal and -shm for
that reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Final

from agent17.domain import ErrorCode
from agent17.store.paths import WAL_OWNER_SUFFIX, RefusalFactory

_RECORD_BYTES: Final = 4096  # a record is a few dozen bytes; more is not ours


def owner_record(path: Path) -> Path:
    """`<file>-wal-owner`: where the inode of the file last opened read-write at `path` is kept."""
    return path.with_name(path.name + WAL_OWNER_SUFFIX)


def recorded_inode(path: Path) -> int | None:
    """The inode recorded for `path`, or None when there is no readable record."""
    # O_NONBLOCK: a FIFO swapped in after the path checks must not hang the open.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(owner_record(path), flags)
    except FileNotFoundError:
        return None
    try:
        data = os.read(descriptor, _RECORD_BYTES)
    finally:
        os.close(descriptor)
    try:
        value = json.loads(data)
    except ValueError:
        return None
    inode = value.get("database_inode") if isinstance(value, dict) else None
    return inode if isinstance(inode, int) and not isinstance(inode, bool) else None


def refuse_foreign_journals(
    path: Path, database: os.stat_result | None, refusal: RefusalFactory
) -> None:
    """Refuse (`foreign_wal`) a -wal or a hot -journal beside `path` written for another file.

    `database` is the lstat of `path` now (None: there is no file yet).
    """
    recorded = recorded_inode(path)
    if recorded is None or (database is not None and database.st_ino == recorded):
        return
    for suffix in ("-wal", "-journal"):
        journal = path.with_name(path.name + suffix)
        try:
            info = os.lstat(journal)
        except FileNotFoundError:
            continue
        if suffix == "-journal" and info.st_size == 0:
            continue  # SQLite ignores an empty rollback journal, and nobody shares one
        shm = path.with_name(path.name + "-shm")
        now = "is missing now" if database is None else "is another file now"
        raise refusal(
            ErrorCode.FOREIGN_WAL,
            f"{journal} was written for the file that was at {path} before, and {path.name}"
            f" {now} (a backup restored or a file replaced while a program had the old"
            " one open): replaying it would mix the old file's pages into this one, so"
            " nothing was opened and every file was left as it was. To go on: stop every"
            f" teammate and program using this workspace, then move {journal.name} and"
            f" {shm.name} out of {path.parent} (they hold the replaced file's last"
            " transactions) and open it again",
        )


def record_owner(path: Path, database: os.stat_result) -> None:
    """Record that the journals beside `path` belong to `database` (written when it changes)."""
    if recorded_inode(path) == database.st_ino:
        return
    folder = path.parent
    descriptor, temporary = tempfile.mkstemp(
        prefix=f"{path.name}{WAL_OWNER_SUFFIX}.", suffix=".tmp", dir=folder
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump({"database_inode": database.st_ino}, handle)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, owner_record(path))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    # Durable before this opener writes a frame: had a power cut kept the frames but
    # lost the rename, the old record would disown the crashed writer's own -wal.
    folder_descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(folder_descriptor)
    finally:
        os.close(folder_descriptor)
