"""Whether the -wal beside a state file belongs to it: the one fact SQLite does not record.

Why. SQLite replays every frame of a -wal whose checksums hold, whatever file
the -wal lies beside: nothing in it names its database. A backup put in place
of a board (renamed onto it, copied over it in place, copied in after `rm`)
leaves the old file's -wal beside it, and replaying that lays the old file's
last pages over the restored ones: a mixed board, often damaged for good. A
copy or move of the whole workspace (cp -a, tar, rsync -a, mv to another disk)
gives every file a new inode but keeps the file and its -wal together, and
there replaying is exactly right. Inodes cannot tell the two apart (the record
once held one, and refused every copy); the content can.

The rule. `<file>-wal-owner` records a hash of each page of the file as agent17
last left it, with the file's inode, size, mtime and ctime (any write, rename
or copy changes one; no user tool sets a ctime). A file whose four are the
recorded ones is taken as it is (no hashing: the check every transaction can
afford). Any other is hashed, and the -wal is its own when every page SQLite
will read from the file itself is the recorded one, and every page the -wal
holds is the recorded one, one of its versions there, or a hole past the
recorded end: a copy (the same pages), or the file after a checkpoint,
agent17's cut short or another program's (a checkpoint writes nothing else,
and skips a page whose last version a reader still needs). Another page means
another file, and its -wal is never replayed.

Keeping the record true. In WAL mode only a checkpoint writes the file, so
agent17 turns SQLite's automatic checkpoint off and runs its own, every
CHECKPOINT_FRAMES frames and before a store closes: under SQLite's write lock
(no writer can start the -wal over meanwhile), on a second connection (SQLite
refuses one inside a transaction), rehashing only the pages the -wal held.
SQLite's own checkpoint when the last connection closes then finds nothing
left to copy. Every hashing of the file and every write of the record holds
`<file>-wal-owner.lock`, so no opener hashes a file a checkpoint is writing. A
record also carries a lineage, drawn afresh whenever a file is recorded
without proof (changed, beside a -wal without frames): an open store that
meets another lineage stops, because its page cache holds the old file.

What each one does.
- An opener, before anything reads the file: no record (an older agent17, a
  board made by hand), the file as recorded, or a -wal without frames:
  SQLite's own behaviour. A -wal that is its own: replayed, and the record
  follows the file to its new place. One that is not: `foreign_wal`, touching
  nothing, while a process still has the file or its -shm open (SQLite's
  locks, seen with F_OFD_GETLK; where those cannot be seen, always); otherwise
  the file is probed alone, the -wal and -shm go into `<file>-replaced-<UTC
  time>/`, never deleted, a `WalSetAside` warning says so, and the file opens
  as it is. A non-empty -journal beside a changed file holds old pages, not new
  ones, and cannot be judged: `foreign_wal`, saying what to do either way.
- A running store compares the file's state with the one it last vouched for
  in every transaction (from the lstat it makes anyway). The
  record explains most differences (another process checkpointed). Otherwise
  a write, which holds the write lock and so sees no agent17 checkpoint under
  way, hashes the file; if the -wal is no longer its own, that call and every
  later one is refused (`foreign_wal`) and the connection closes without a
  checkpoint (a read-only connection holds its shared lock meanwhile, so
  SQLite sees another connection and folds nothing in). A read cannot tell a
  checkpoint under way in another process from a copy, so only writes stop.

What it cannot see. A file written over in place, to the same size, within the
same clock tick as the last checkpoint (a few ms on ext4; a second where times
are whole seconds). A backup of this board taken since its last checkpoint,
page for page (`.backup`, or the file copied alone), is the file at an earlier
moment of the same -wal: the -wal is replayed and the board is as last left,
not as backed up. Another program that checkpoints the file and starts the
-wal over (RESTART, TRUNCATE, or its next write) while agent17 runs leaves a
file no -wal proves: agent17's writers stop with `foreign_wal`, and the next
opener records the file afresh (or sets a -wal of that program's aside:
README, how to take it back).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import itertools
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from agent17.armour import wal_advice as advice
from agent17.armour.file_failures import RefusalFactory
from agent17.armour.held_files import Held, held, hold, locked
from agent17.armour.paths import SQLITE_SIDECAR_SUFFIXES
from agent17.armour.wal_file import (
    HASH_BYTES,
    FileState,
    Frames,
    Record,
    database_page_size,
    page_hash,
    page_hashes,
    read_frames,
    read_record,
    rehashed,
    state_of,
    sync_folder,
    wal_counts,
    wal_pages,
    write_record,
)
from agent17.domain import ErrorCode

CHECKPOINT_FRAMES: Final = 1000
"""Frames the -wal holds before a writer copies them back: SQLite's own default, so the
-wal file grows no larger than before (while it grows, every fsync writes its size too)."""
WRITES_PER_LOOK: Final = 16
"""A write adds a few frames: looking at the -shm's count after every 16th is enough."""

SET_ASIDE_INFIX: Final = "-replaced-"
# SQLite's locks (unix VFS): the database file's pending, reserved and shared bytes,
# and the -shm's eight lock bytes with the byte every connection holds while open.
_DATABASE_LOCKS: Final = (0x40000000, 512)
_SHM_LOCKS: Final = (120, 9)
_DEFAULT_PAGE_SIZE: Final = 4096


class WalSetAside(UserWarning):
    """A -wal written for the file a state file replaced was set aside, never deleted."""


@dataclasses.dataclass(frozen=True)
class _Survey:
    """The file as hashed now, and whether the -wal beside it fits it."""

    state: FileState
    page_size: int
    hashes: bytes
    fits: bool


class WalOwner:
    """The -wal of one state file: judged at open, checked in writes, kept true by checkpoints."""

    def __init__(self, path: Path, what: str, refusal: RefusalFactory) -> None:
        self.path = path
        self._what = what
        self._refusal = refusal
        self._wal, self._shm_path, self._journal, self._record_path, self._lock_path = (
            path.with_name(path.name + suffix) for suffix in SQLITE_SIDECAR_SUFFIXES
        )
        self.known: FileState | None = None
        """The file's state (inode, size, mtime, ctime) this store last vouched for."""
        self.broken: str | None = None
        """Why this store takes no more calls, once its file changed under it."""
        self.watching = False
        """Whether the file is in WAL mode, so its -wal has an owner to check."""
        self._lineage = b""
        self._database: Held | None = None
        self._shm: Held | None = None
        self._surveyed: _Survey | None = None
        self._tried_at = -CHECKPOINT_FRAMES
        self._writes = 0
        self._copier: sqlite3.Connection | None = None

    # -- opening ---------------------------------------------------------------------

    def admit(self, probe_alone: Callable[[], object]) -> None:
        """Before anything reads the file: refuse, or set aside, a -wal it cannot be shown to own.

        `probe_alone` checks the file without its -wal, before that -wal is set aside.
        """
        if self._as_recorded():
            return
        with self._exclusive():
            record = read_record(self._record_path)
            if record is None or record.state == _state(self.path):
                return
            if _non_empty(self._journal):
                raise self._refusal(ErrorCode.FOREIGN_WAL, advice.journal(self.path, self._journal))
            frames = read_frames(self._wal)
            if frames is None:
                return  # nothing to replay: adopt() records the file as it is
            survey = self._survey(record, frames)
            if survey is not None and survey.fits:
                self._surveyed = survey
                return
            if self._in_use():
                raise self._refusal(ErrorCode.FOREIGN_WAL, advice.in_use(self.path, self._wal))
            probe_alone()
            folder = self._set_aside()
        warnings.warn(WalSetAside(advice.set_aside(self.path, self._wal, folder)), stacklevel=2)

    def hold_database(self) -> None:
        """Hold the file's descriptor while connected (from before the first statement)."""
        self._database = hold(self.path)

    def adopt(self, *, wal: bool) -> None:
        """Before the read-write connection writes its first frame: take the record, or make it.

        Not `wal` (a SQLite without shared memory, as in some browser builds): there is no
        -wal to own, and the file changes with every commit, so nothing is watched.
        """
        self.watching = wal
        if not wal:
            return
        record = read_record(self._record_path)
        if record is None or record.state != _state(self.path):
            with self._exclusive():
                record = self._recorded_afresh()
        self._lineage, self.known = record.lineage, record.state
        self._surveyed = None

    def hold_shm(self) -> None:
        """Hold the -shm's descriptor while connected (once a transaction has made it)."""
        if self.watching and self._shm is None:
            self._shm = hold(self._shm_path)

    def _recorded_afresh(self) -> Record:
        record = read_record(self._record_path)
        state = _state(self.path)
        if record is not None and record.state == state:
            return record
        frames = read_frames(self._wal)
        survey = self._surveyed
        if survey is None or survey.state != state:
            survey = self._survey(record, frames)
        if survey is None or (record is not None and frames is not None and not survey.fits):
            raise self._refusal(
                ErrorCode.FOREIGN_WAL, advice.changed_while_opening(self.path, self._wal)
            )
        lineage = record.lineage if record is not None and survey.fits else os.urandom(8)
        fresh = Record(lineage, survey.page_size, survey.state, survey.hashes)
        write_record(self._record_path, fresh)
        return fresh

    # -- a transaction that finds the file's state not the known one ------------------

    def check(self, now: os.stat_result, writing: bool) -> None:
        """Find out why the file changed under this store; if not by a checkpoint, stop for good."""
        if not self.watching:
            return
        record = read_record(self._record_path)
        if record is not None and record.lineage == self._lineage:
            if record.state == state_of(now):
                self.known = record.state  # another process's checkpoint
                return
            if not writing:
                return  # a checkpoint may be under way elsewhere; the next write tells
            with self._exclusive():
                if self._refit():
                    return
        self.broken = advice.changed_under_store(self.path, self._wal, self._what)
        raise self._refusal(ErrorCode.FOREIGN_WAL, self.broken)

    def _refit(self) -> bool:
        record = read_record(self._record_path)
        if record is None or record.lineage != self._lineage:
            return False
        state = _state(self.path)
        if record.state != state:
            survey = self._survey(record, read_frames(self._wal))
            if survey is None or not survey.fits:
                return False
            state = survey.state
            write_record(
                self._record_path,
                Record(self._lineage, survey.page_size, state, survey.hashes),
            )
        self.known = state
        return True

    # -- checkpoints ---------------------------------------------------------------------

    def checkpoint_due(self) -> bool:
        """Whether the -wal holds enough frames not yet copied back for a checkpoint.

        Asked after each write; the -shm is read at every WRITES_PER_LOOK-th.
        """
        self._writes += 1
        if self._writes % WRITES_PER_LOOK:
            return False
        counts = wal_counts(self._shm) if self._shm is not None else None
        if counts is None:
            return False
        frames, copied = counts
        # Readers on old snapshots can hold a checkpoint back: try again only as the -wal grows.
        retried_too_soon = self._tried_at <= frames < self._tried_at + CHECKPOINT_FRAMES // 4
        return frames - copied >= CHECKPOINT_FRAMES and not retried_too_soon

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        """Copy the -wal's frames back into the file, and record the pages it wrote.

        Runs inside a BEGIN IMMEDIATE of `connection` (whose checks passed), so no
        writer can start the -wal over before the record is true again.
        """
        shm, database = self._shm, self._database
        counts = None if shm is None else wal_counts(shm)
        if shm is None or database is None or counts is None or counts[0] == counts[1]:
            return  # nothing to copy back
        with self._exclusive():
            record = read_record(self._record_path)
            if record is None or record.lineage != self._lineage or record.state != self.known:
                return  # the next write finds out why
            pages = wal_pages(shm, counts[0])
            if self._copier is None:  # SQLite refuses a checkpoint inside a transaction
                self._copier = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False
                )
            (_, self._tried_at, _) = self._copier.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
            state = state_of(os.fstat(database.descriptor))
            if state != record.state:
                hashes = rehashed(record, database, pages, state[1])
                write_record(
                    self._record_path, Record(self._lineage, record.page_size, state, hashes)
                )
                self.known = state

    # -- closing -------------------------------------------------------------------------

    def close(self, connection: sqlite3.Connection) -> None:
        """Close `connection`: checkpointed first if the file is still its own, else not at all."""
        vouched = False
        try:
            if self.broken is None:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                # Under the write lock no frame is added and no agent17 checkpoint runs, so
                # the record stays true: SQLite's own closing checkpoint finds nothing left.
                connection.execute("BEGIN IMMEDIATE")
                vouched = self._vouched()
                if vouched:
                    self.checkpoint(connection)
                    self._close_copier()
                    connection.close()
        except (sqlite3.Error, OSError):
            vouched = False  # closed without a checkpoint, as after a crash
        finally:
            self._close_copier()
            if not vouched:  # an interrupt included: the connection is closed all the same
                _close_without_checkpoint(connection, self.path)
            self._let_go()

    def drop(self, connection: sqlite3.Connection) -> None:
        """Close `connection` of a store dropped without close(), as a crash would: no checkpoint.

        Garbage collection runs this at any moment, maybe while this thread holds a
        lock a checkpoint needs (the -wal-owner lock, the descriptors' registry),
        so it takes none: the -wal stays for the next opener, as after a kill -9.
        """
        self._close_copier()
        _close_without_checkpoint(connection, self.path, wait=False)
        self._let_go(later=True)

    def _close_copier(self) -> None:
        # First: while the store's own connection is open it is not the last, so its
        # close checkpoints nothing, and the store's close can be the last.
        if self._copier is not None:
            self._copier.close()
            self._copier = None

    def _let_go(self, *, later: bool = False) -> None:
        for share in (self._shm, self._database):
            if share is not None:
                share.release(later=later)  # after the connection: closing drops its locks
        self._shm = self._database = None

    def _vouched(self) -> bool:
        now = _lstat(self.path)
        if now is None or self._database is None or self.known is None:
            return False
        if (now.st_dev, now.st_ino) != self._database.key:
            return False
        if state_of(now) != self.known:
            record = read_record(self._record_path)
            if record is None or record.lineage != self._lineage:
                return False
            if record.state != state_of(now):
                return False
            self.known = record.state  # another process's checkpoint
        return True

    # -- helpers -------------------------------------------------------------------------

    def _as_recorded(self) -> bool:
        record = read_record(self._record_path)
        return record is None or record.state == _state(self.path)

    def _survey(self, record: Record | None, frames: Frames | None) -> _Survey | None:
        """Hash every page of the file now, and tell whether the -wal fits it (None: no file)."""
        with held(self.path) as database:
            if database is None:
                return None
            info = os.fstat(database.descriptor)
            page_size = database_page_size(database)
            if page_size is None:
                page_size = frames.page_size if frames else _DEFAULT_PAGE_SIZE
            hashes = page_hashes(database, page_size)
        fits = (
            record is not None
            and record.page_size == page_size
            and info.st_size % page_size == 0
            and _fits(record, frames, hashes)
        )
        return _Survey(state_of(info), page_size, hashes, fits)

    def _in_use(self) -> bool:
        return locked(self.path, *_DATABASE_LOCKS) or locked(self._shm_path, *_SHM_LOCKS)

    def _set_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        base = f"{self.path.name}{SET_ASIDE_INFIX}{stamp}"
        for number in itertools.count(1):
            folder = self.path.with_name(base if number == 1 else f"{base}-{number}")
            try:
                folder.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        for sidecar in (self._wal, self._shm_path):
            with contextlib.suppress(FileNotFoundError):
                os.rename(sidecar, folder / sidecar.name)
        sync_folder(folder)
        sync_folder(self.path.parent)
        return folder

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold `<file>-wal-owner.lock`: one agent17 at a time hashes, checkpoints or closes."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(self._lock_path, flags, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)  # closing the descriptor lets it go
            yield
        finally:
            os.close(descriptor)


def _fits(record: Record, frames: Frames | None, hashes: bytes) -> bool:
    """Whether a file hashed to `hashes` is the one the -wal beside it was written for."""
    if hashes == record.hashes:
        return True  # the file agent17 left: a copy, a move, a touch
    if frames is None or frames.page_size != record.page_size:
        return False
    # A checkpoint (agent17's cut short, another program's) writes only the -wal's
    # versions of pages it holds, and skips those whose last version it may not copy
    # yet (a hole, if that grew the file). So each page of the file the -wal holds is
    # the recorded one, such a version or such a hole; every other page is recorded.
    hole = page_hash(bytes(frames.page_size))
    for page in range(1, frames.database_pages + 1):
        now = hashes[(page - 1) * HASH_BYTES : page * HASH_BYTES]
        recorded = record.hashes[(page - 1) * HASH_BYTES : page * HASH_BYTES]
        if page not in frames.pages:
            if now != recorded:
                return False
            continue
        known = now in (b"", recorded) or now in frames.versions[page]
        if not known and (now != hole or page <= record.pages):
            return False
    return True


def _close_without_checkpoint(
    connection: sqlite3.Connection, path: Path, *, wait: bool = True
) -> None:
    """Close a read-write connection so that SQLite's closing checkpoint cannot run."""
    # SQLite checkpoints on close only when it can lock the file exclusively, that is
    # when no other connection is open. A read-only connection that has read holds its
    # shared lock meanwhile, and when it closes in turn it checkpoints nothing (it may
    # not write). One that cannot lock at once means another connection has the file.
    guard = None
    with contextlib.suppress(sqlite3.Error):
        guard = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5.0 if wait else 0)
        guard.execute("PRAGMA schema_version").fetchone()
    connection.close()
    if guard is not None:
        guard.close()


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _state(path: Path) -> FileState | None:
    info = _lstat(path)
    return None if info is None else state_of(info)


def _non_empty(path: Path) -> bool:
    info = _lstat(path)
    return info is not None and info.st_size > 0
