"""How agent17 opens a SQLite state file and guards its transactions: the armour.

The task board, the team's mailbox (with its plans) and the idempotency
ledger are each one SQLite file under `<workspace>/.agent_tutorial/`, and
each is opened here, the same way (`StateFile`):

1. the path is checked (realpath, no links, one hard link: `paths.py`);
2. a -wal beside it that was written for another file (the one a restored
   backup replaced) is refused, or set aside, before anything reads it
   (`wal_owner.py`);
3. a file that already has content is probed on a *read-only* connection: it
   must be SQLite, carry this schema's version and hold exactly the schema's
   tables, indexes and triggers (`schema_file.py`), and pass `PRAGMA
   quick_check`. Anything else is refused and left byte-identical (a
   read-write connection would fold a crashed writer's WAL into the file when
   it closed);
4. the read-write connection: autocommit (we write BEGIN ourselves), a busy
   timeout, foreign keys on, WAL with synchronous=FULL and agent17's own
   checkpoints; the file is recorded beside it before its first frame
   (`wal_owner.py`); an empty file gets the whole schema file in one
   transaction.

A file of 0 bytes counts as a new, empty database and gets the schema. That
is a judgement call: 0 bytes hold no data to protect, it is exactly what a
process killed between creating the file and writing its first page leaves
behind, and SQLite itself reads a zero-length file as an empty database (and
discards a -wal beside it, whose frames cannot belong to it). Refusing it
would strand every workspace whose first run was interrupted at that moment.

Every later transaction is the plain one (`store/sqlite.py`'s `transaction`),
run through `guarded()`: it holds the connection's lock, ends a transaction an earlier
interrupt left open, checks inside the transaction that the state folder and
the file are still the ones opened and unchanged (`_check_identity`), keeps rolling
back through a second interrupt, and turns a failure of the machine rather
than of the file (a full or read-only disk, an I/O error, a file this user
may not open, a lock held past the busy timeout) into `store_unavailable`
(`file_failures.py`), with the message saying whether anything changed. After
a write, it runs agent17's checkpoint when one is due.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from agent17.armour.file_failures import (
    NOT_OPENED,
    NOTHING_CHANGED,
    os_failure,
    read_failure,
    sqlite_failure,
    transaction_failure,
)
from agent17.armour.held_files import held
from agent17.armour.paths import RefusalFactory, check_state_file, safe_state_file
from agent17.armour.schema_file import Schema, schema_objects
from agent17.armour.wal_file import state_of
from agent17.armour.wal_owner import WalOwner
from agent17.domain import ErrorCode, Refusal

BUSY_TIMEOUT_SECONDS: Final = 30.0
"""How long a writer waits for another's BEGIN IMMEDIATE before "database is locked"."""

SQLITE_HEADER: Final = b"SQLite format 3\x00"
# Primary result codes that mean "this file is not an intact database".
_UNREADABLE_CODES: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
# What Python's sqlite3 says (no SQLite code) when a TEXT value is not UTF-8:
# a row written by hand, since every value we bind is valid UTF-8.
_UNDECODABLE_TEXT: Final = "Could not decode to UTF-8"

_LOCK_KEY: Final = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

T = TypeVar("T")
Helper = Callable[[sqlite3.Connection, Callable[[sqlite3.Connection], T], str], T]
"""The plain transaction helper: (connection, operation, BEGIN statement) -> result."""


_pause: Callable[[float], None] = time.sleep
"""How the WAL switch waits between tries (a test replaces it to order events)."""


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    # Leaving the rollback journal for WAL needs the file's exclusive lock, and when
    # several processes open a new file at once SQLite may answer "database is
    # locked" at once instead of calling the busy handler (waiting there could
    # deadlock against another opener's shared lock). The switch changes nothing
    # until it succeeds, so it is tried again until the busy timeout has passed.
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    wait = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            busy = getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() + wait > deadline:
                raise
        _pause(wait)
        wait = min(wait * 2, 0.1)


class StateFile:
    """One checked, versioned SQLite state file behind one connection and one lock.

    Safe to share between threads (calls are serialised by the lock); any
    number of instances, in one or many processes, may open the same file.
    `refusal` is the error class its refusals are raised as (TaskError for
    the board, MailboxError for the mailbox), with the store's codes.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        file_name: str,
        schema: Schema,
        refusal: RefusalFactory,
    ) -> None:
        self.schema = schema
        self._refusal = refusal
        self.path: Path = safe_state_file(workspace, file_name, refusal)
        self.workspace: Path = self.path.parent.parent
        self._lock = threading.Lock()
        try:
            self._open()
        except OSError as error:
            raise os_failure(refusal, self.path, error, NOT_OPENED) from None
        except sqlite3.Error as error:
            failure = sqlite_failure(refusal, self.path, error, NOT_OPENED)
            if failure is None:
                raise
            raise failure from None

    # -- opening ---------------------------------------------------------------------

    def _open(self) -> None:
        refusal = self._refusal
        self._folder_identity = self._state_folder_identity()
        self._folder_text, self._path_text = os.fspath(self.path.parent), os.fspath(self.path)
        self._owner = owner = WalOwner(self.path, self.schema.what, refusal)
        # Before the probe: a read-only connection reads WAL frames too.
        owner.admit(probe_alone=lambda: self._probe_read_only(alone=True))
        before = self._probe_read_only()
        self._connection = sqlite3.connect(
            self.path,
            isolation_level=None,  # autocommit: every transaction is our explicit BEGIN
            check_same_thread=False,  # shared between threads behind self._lock
            timeout=BUSY_TIMEOUT_SECONDS,
        )
        try:
            owner.hold_database()  # before the first statement takes a lock on it
            opened = check_state_file(self.path, self.workspace, refusal)
            # The file may have been swapped between the check and the open.
            if opened is None or (
                before is not None and (before.st_dev, before.st_ino) != _identity(opened)
            ):
                raise refusal(ErrorCode.UNSAFE_STORE_PATH, f"{self.path} changed while opening")
            self._identity = _identity(opened)
            self._check_identity()  # and the folder may have been swapped meanwhile
            self._connection.row_factory = sqlite3.Row  # rows are read by column name
            self._connection.execute("PRAGMA foreign_keys = ON")
            # agent17 checkpoints itself, recording what it wrote (wal_owner.py).
            self._connection.execute("PRAGMA wal_autocheckpoint = 0")
            # WAL: readers never block the writer. FULL: a commit survives a power cut,
            # so a claim the store reported is never forgotten (README, "Durability").
            _switch_to_wal(self._connection)
            self._connection.execute("PRAGMA synchronous = FULL")
            (mode,) = self._connection.execute("PRAGMA journal_mode").fetchone()
            owner.adopt(wal=str(mode).lower() == "wal")  # before this connection's first frame
            self._create_or_verify()
            owner.hold_shm()
        except BaseException:
            owner.close(self._connection)  # never folds a -wal into a file it was not written for
            raise
        # A store dropped without close() closes as after a crash (WalOwner.drop).
        self._dropped = weakref.finalize(self, owner.drop, self._connection)

    def _probe_read_only(self, *, alone: bool = False) -> os.stat_result | None:
        """Check a file with content on a read-only connection (`alone`: without its -wal).

        Returns the file's lstat (None: there is no file yet).
        """
        info = check_state_file(self.path, self.workspace, self._refusal)
        if info is None or info.st_size == 0:
            return info
        with held(self.path) as database:
            header = b"" if database is None else os.pread(database.descriptor, 16, 0)
        if header != SQLITE_HEADER:
            raise self._refusal(
                ErrorCode.SCHEMA_VERSION_MISMATCH,
                f"{self.path} exists but is not a SQLite database, so not {self.schema.what};"
                " it was left untouched",
            )
        sidecars = [self.path.with_name(self.path.name + end) for end in ("-wal", "-shm")]
        existed = [sidecar.exists() for sidecar in sidecars]
        mode = "immutable=1" if alone else "mode=ro"
        probe = sqlite3.connect(
            f"{self.path.as_uri()}?{mode}", uri=True, timeout=BUSY_TIMEOUT_SECONDS
        )
        try:
            self.schema.verify(probe, self.path, self._refusal, deep=True)
        except sqlite3.DatabaseError as error:
            probe.close()
            self._remove_probe_sidecars(sidecars, existed)
            # A probe the machine stopped (no -shm can be made in a read-only folder,
            # an I/O error) says nothing about the file: not "damaged".
            failure = sqlite_failure(self._refusal, self.path, error, NOT_OPENED)
            raise (failure or self._unreadable(error)) from None
        except BaseException:
            probe.close()
            self._remove_probe_sidecars(sidecars, existed)
            raise
        probe.close()
        return info

    @staticmethod
    def _remove_probe_sidecars(sidecars: list[Path], existed: list[bool]) -> None:
        # Opening a WAL database, even read-only, makes SQLite create its -shm (and
        # an empty -wal when there was none). A refusal promises the file is left as
        # it was found, and the folder with it: whoever inspects or copies it next
        # should see what was there, not files that suggest a connection used it. So
        # what the probe created goes again. A -wal or -shm that was there before
        # may be a crashed writer's (or a live one's) and stays, as does any -wal
        # with frames in it.
        # A file that cannot be removed (the folder went read-only) stays: the refusal
        # being raised says more than this failure would.
        wal, shm = sidecars
        with contextlib.suppress(OSError):
            if not existed[0] and wal.exists() and wal.stat().st_size == 0:
                wal.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if not existed[1]:
                shm.unlink(missing_ok=True)

    def _create_or_verify(self) -> None:
        connection = self._connection
        if not schema_objects(connection):
            try:
                # The schema file whole, in one transaction of its own: a crash leaves no
                # half schema.
                connection.executescript(f"BEGIN IMMEDIATE;\n{self.schema.sql}\nCOMMIT;")
            except sqlite3.OperationalError as error:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                # Another process created the schema between our look and our BEGIN.
                if "already exists" not in str(error):
                    raise
        # One read transaction; whatever escapes it closes the connection (`_open`).
        connection.execute("BEGIN")
        self.schema.verify(connection, self.path, self._refusal, deep=False)
        connection.execute("ROLLBACK")

    def _unreadable(self, error: sqlite3.DatabaseError) -> Refusal:
        # A failing disk can make SQLite call a sound file "malformed" (its view of the
        # -wal went stale when a write failed): only a file the OS reads back whole is
        # called damaged, which sends the user to a backup.
        failed = read_failure(self.path, self.path.with_name(self.path.name + "-wal"))
        if failed is not None:
            return os_failure(self._refusal, *failed, NOTHING_CHANGED)
        return self._refusal(
            ErrorCode.STORE_UNREADABLE,
            f"{self.path} is not an intact {self.schema.what} ({error}); it was left untouched",
        )

    # -- the guard around every transaction --------------------------------------------

    def guarded(
        self, helper: Helper[T], operation: Callable[[sqlite3.Connection], T], begin: str
    ) -> T:
        """Run `helper(connection, operation, begin)` (the plain transaction), guarded.

        Inside the transaction the identity of the folder and the file is checked
        before `operation` runs; whatever escapes is rolled back and explained. After
        a write, agent17's checkpoint runs when one is due.
        """
        with self._lock:
            result = self._guarded(helper, operation, begin)
            if begin != "BEGIN" and self._owner.checkpoint_due():

                def checkpoint(connection: sqlite3.Connection) -> T:
                    self._owner.checkpoint(connection)
                    return result

                # The write is done and durable; a checkpoint that cannot run now runs later.
                with contextlib.suppress(Refusal):
                    self._guarded(helper, checkpoint, "BEGIN IMMEDIATE")
            return result

    def _guarded(
        self, helper: Helper[T], operation: Callable[[sqlite3.Connection], T], begin: str
    ) -> T:
        self._refuse_if_stopped()
        connection = self._connection
        done, first = False, None

        def checked(connection: sqlite3.Connection) -> T:
            nonlocal done, first
            now = self._check_identity()
            if state_of(now) != self._owner.known:
                self._owner.check(now, writing=begin != "BEGIN")
            try:
                result = operation(connection)
            except BaseException as error:
                first = error  # raised to the caller, whatever interrupts the rollback
                raise
            done = True  # what fails after this is the COMMIT
            return result

        try:
            if connection.in_transaction:
                # Backstop: an interrupt that escaped the rollback below (a third
                # signal landing between its retries) left the last transaction
                # open. Nothing of it was committed: it is rolled back first.
                connection.execute("ROLLBACK")
            return helper(connection, checked, begin)
        except BaseException as error:
            # Python raises a pending signal at the next check between bytecodes: a
            # second Ctrl-C, or SIGTERM turned into KeyboardInterrupt, can land in
            # the helper's rollback and leave the transaction open, holding the
            # write lock against every other process. So the rollback is tried
            # again here, inline (on entry to a helper function a third signal
            # would escape before any try), with a try that holds only the C call.
            while True:
                try:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    break
                except sqlite3.Error:
                    break  # the connection is unusable; SQLite ends its transaction
                except BaseException:  # another interrupt: roll back all the same
                    continue
            if self._owner.broken is not None:
                self._close()  # the file changed under it: closed without a checkpoint
            error = first or error
            if isinstance(error, sqlite3.DatabaseError) and _is_unreadable(error):
                raise self._unreadable(error) from None
            failure = transaction_failure(self._refusal, self.path, error, done)
            if failure is not None:
                raise failure from None
            raise error

    def _refuse_if_stopped(self) -> None:
        if self._owner.broken is not None:
            raise self._refusal(ErrorCode.FOREIGN_WAL, self._owner.broken)

    def _check_identity(self) -> os.stat_result:
        """Refuse to go on if the state folder or the file is no longer the one opened; its lstat.

        SQLite keeps the descriptors it opened, whatever happens to the names. After
        a swap (a backup restored with `os.replace`, the folder moved away and a
        symlink left in its place, a second hard link) this connection would go on
        writing to the old file (deleted, or somewhere else, maybe outside the
        workspace) while every process that opens the path now gets another board:
        two boards, and a task can be claimed on each. The check runs inside the
        transaction, after BEGIN, so a lock wait of any length cannot hide a swap
        that happened before this transaction started. The folder is checked with
        lstat first, because lstat of the file follows a symlink in its parent. (A
        file whose state changed is `WalOwner.check`'s: a checkpoint, or a backup
        copied over it in place.)
        """
        try:  # on str paths, and no tuples built: this runs in every transaction
            folder = os.lstat(self._folder_text)
            now = os.lstat(self._path_text)
        except FileNotFoundError:
            raise self._refusal(
                ErrorCode.UNSAFE_STORE_PATH, f"{self.path} was removed while open"
            ) from None
        folder_device, folder_inode = self._folder_identity
        if (
            folder.st_ino != folder_inode
            or folder.st_dev != folder_device
            or stat.S_ISLNK(folder.st_mode)
        ):
            raise self._refusal(
                ErrorCode.UNSAFE_STORE_PATH,
                f"{self.path.parent} is no longer the state folder this {self.schema.what}"
                " opened (moved, replaced or made a symbolic link); open it again",
            )
        device, inode = self._identity
        if now.st_ino != inode or now.st_dev != device or now.st_nlink != 1:
            raise self._refusal(
                ErrorCode.UNSAFE_STORE_PATH,
                f"{self.path} is no longer the file this {self.schema.what} opened"
                " (replaced, moved or linked); open it again",
            )
        return now

    def _state_folder_identity(self) -> tuple[int, int]:
        folder = self.path.parent
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode):  # swapped since paths.py checked it
            raise self._refusal(ErrorCode.UNSAFE_STORE_PATH, f"{folder} changed while opening")
        return _identity(info)

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to this file.

        SQLite keeps it per connection, so it is a cheap way to notice the work of
        other processes (a new task, a completion, a message) without reading any row.
        """
        with self._lock:
            self._refuse_if_stopped()
            try:
                (version,) = self._connection.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error as error:
                failure = sqlite_failure(self._refusal, self.path, error, NOTHING_CHANGED)
                if failure is None:
                    raise
                raise failure from None
        return int(version)

    def hold_exclusive(self, key: str) -> ExclusiveHold:
        """Hold `<state folder>/<key>.lock` until released or until this process ends.

        The kernel drops the lock when the process dies, even by kill -9, so holding
        it means "a live process holds this key". A key held by anyone else is
        refused at once with the refusal code `already_held`.
        """
        if not _LOCK_KEY.fullmatch(key):
            raise ValueError(f"not a lock key: {key!r}")
        path = safe_state_file(self.workspace, f"{key}.lock", self._refusal)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            descriptor = os.open(path, flags, 0o600)
        except OSError as error:
            raise os_failure(self._refusal, path, error, "nothing was held") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            held = f"{key} is held by another live process"
            raise self._refusal(ErrorCode.ALREADY_HELD, held) from None
        except OSError as error:
            os.close(descriptor)
            raise os_failure(self._refusal, path, error, "nothing was held") from None
        except BaseException:
            os.close(descriptor)
            raise
        return ExclusiveHold(key, descriptor)

    @property
    def total_changes(self) -> int:
        """Rows this connection has changed since it opened (proves "zero writes")."""
        with self._lock:
            return self._connection.total_changes

    def close(self) -> None:
        """Close the connection; the file stays for the next opener."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._dropped.detach() is not None:  # not closed yet
            self._owner.close(self._connection)


class ExclusiveHold:
    """A held lock file; `release()` (or the end of the process) lets it go."""

    def __init__(self, key: str, descriptor: int) -> None:
        self.key = key
        self._descriptor: int | None = descriptor

    def release(self) -> None:
        """Let the lock go (idempotent)."""
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the file drops the flock
            self._descriptor = None


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _is_unreadable(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None) or 0
    return code & 0xFF in _UNREADABLE_CODES or str(error).startswith(_UNDECODABLE_TEXT)
