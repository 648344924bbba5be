"""The connection a scheduled worker gets: a real `sqlite3.Connection` whose statements are points.

Every statement sent through it (its `execute`, `executemany`,
`executescript`, its cursors' too, `commit()`/`rollback()`, and the commit or
rollback of `with connection:`) first waits at a point for the scheduler, then
runs on the real file, and its result goes into the timeline (the rows a
SELECT handed back as they are fetched, the rows an UPDATE changed).

SQLite's real locking decides who may write, with the busy timeout at 0 so
that nothing ever blocks the scheduler; what SQLite's busy handler would do
with a timeout is played by the scheduler instead. SQLite calls that handler
only while the connection holds no read transaction yet (btree.c: it retries
only while `inTransaction == TRANS_NONE`): an autocommit statement or a
`BEGIN IMMEDIATE` that finds the write lock taken waits until it is free, and
is retried there; but a deferred transaction that has already read and then
tries to write is answered SQLITE_BUSY at once (SQLITE_BUSY_SNAPSHOT if
another writer committed since it read), and the candidate gets that error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, Self, TypeVar

from agent17.exercises.schedules.run import Run, Worker, WouldWait

T = TypeVar("T")

SHOWN_ROWS: Final = 3
LOCKED: Final = "the database is locked: SQLite's busy handler waits for the write lock"


def _busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return (code & 0xFF) == sqlite3.SQLITE_BUSY if isinstance(code, int) else "locked" in str(error)


def _stale(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY_SNAPSHOT


def statement_text(sql: str) -> str:
    """A statement on one line, as the timeline shows it."""
    return " ".join(sql.split())


def arguments_text(parameters: Any) -> str:
    """A statement's parameters as the timeline shows them: "with 'carol', 1" ("" if none)."""
    if parameters is None or (hasattr(parameters, "__len__") and len(parameters) == 0):
        return ""
    if isinstance(parameters, dict):
        return "with " + ", ".join(f":{key} = {value!r}" for key, value in parameters.items())
    try:
        return "with " + ", ".join(repr(value) for value in parameters)
    except TypeError:
        return f"with {parameters!r}"


def shown_row(row: Any) -> str:
    """A fetched row as text (a `sqlite3.Row` as the tuple it holds)."""
    return repr(tuple(row) if isinstance(row, sqlite3.Row) else row)


class WriteLock:
    """SQLite's write lock on one file, looked at through a connection of its own."""

    def __init__(self, path: Path) -> None:
        self._probe = sqlite3.connect(
            path, isolation_level=None, timeout=0, check_same_thread=False
        )
        self._probe.execute("PRAGMA synchronous = OFF")

    def is_free(self, worker: Worker) -> bool:
        """Whether a writer would get the write lock now (it takes it and lets go at once)."""
        try:
            self._probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return False
        self._probe.execute("ROLLBACK")
        return True

    def close(self) -> None:
        """Close the probing connection."""
        self._probe.close()


class ScheduledConnection(sqlite3.Connection):
    """A real connection whose every statement is a point of the schedule (see the module)."""

    schedule: Run | None = None
    write_lock: WriteLock | None = None
    missed_updates = 0  # UPDATEs that changed no row: the feedback tells "both wrote" apart
    _read = False  # this explicit transaction has read: SQLite would not wait for a lock now

    # Any: typeshed spells cursor() as two overloads, and one signature serves both here.
    def cursor(self, factory: Any = None) -> Any:
        return super().cursor(factory or ScheduledCursor)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor()
        return cursor.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor()
        return cursor.executemany(sql, parameters)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor()
        return cursor.executescript(script)

    def commit(self) -> None:
        self.statement("commit()", (), lambda: sqlite3.Connection.commit(self), None)

    def rollback(self) -> None:
        self.statement("rollback()", (), lambda: sqlite3.Connection.rollback(self), None)

    def __exit__(self, kind: object, error: object, trace: object) -> Literal[False]:
        # sqlite3's own __exit__ commits in C, past an overridden commit(): do it here.
        if kind is not None:
            self.rollback()
            return False
        try:
            self.commit()
        except BaseException:
            self.rollback()  # as sqlite3 does: a failed commit is rolled back, then raised
            raise
        return False

    def statement(
        self, sql: str, parameters: Any, do: Callable[[], T], cursor: ScheduledCursor | None
    ) -> T:
        """Run one statement at a point of its own, waiting where SQLite's busy handler would."""
        run = self.schedule
        if run is None or run.current is None:
            return do()  # the checker's own use, outside any worker's turn
        action, arguments = statement_text(sql), arguments_text(parameters)
        verb = action.split(" ", 1)[0].upper()
        had = self.in_transaction

        def once() -> T:
            waits = not (self.in_transaction and self._read)
            try:
                return do()
            except sqlite3.OperationalError as error:
                if _busy(error) and waits and not _stale(error) and self.write_lock is not None:
                    raise WouldWait(self.write_lock, LOCKED) from None
                run.record(action, arguments, f"{type(error).__name__}: {error}")
                if _busy(error):
                    run.give_way()  # refused at once: the others go first, as the OS would
                raise

        value = run.attempt(action, arguments, once)
        if not self.in_transaction or verb == "BEGIN" or (verb == "SAVEPOINT" and not had):
            self._read = False
        elif verb not in ("SAVEPOINT", "RELEASE"):
            self._read = True
        entry = run.record(action, arguments, "")
        if cursor is not None:
            cursor.follow(entry, verb)
            if verb == "UPDATE" and cursor.description is None and cursor.rowcount == 0:
                self.missed_updates += 1
        return value


class ScheduledCursor(sqlite3.Cursor):
    """A cursor of a `ScheduledConnection`: its statements are points, its fetches are shown."""

    _entry: Any = None
    _fetched: tuple[str, ...] = ()

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        connection = self.connection
        if not isinstance(connection, ScheduledConnection):
            return super().execute(sql, parameters)
        execute = super().execute
        return connection.statement(sql, parameters, lambda: execute(sql, parameters), self)

    def executemany(self, sql: str, parameters: Any, /) -> Self:
        connection = self.connection
        if not isinstance(connection, ScheduledConnection):
            return super().executemany(sql, parameters)
        rows = list(parameters)
        executemany = super().executemany
        return connection.statement(sql, rows, lambda: executemany(sql, rows), self)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        connection = self.connection
        if not isinstance(connection, ScheduledConnection):
            return super().executescript(script)
        executescript = super().executescript
        return connection.statement(script, (), lambda: executescript(script), self)

    def follow(self, entry: Any, verb: str) -> None:
        """Show this statement's outcome in `entry`: rows as they are fetched, or rows changed."""
        self._entry, self._fetched = entry, ()
        if self.description is not None:
            entry.result = "nothing fetched"
        elif self.rowcount >= 0 and verb in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            entry.result = f"{self.rowcount} row{'' if self.rowcount == 1 else 's'}"

    def _saw(self, rows: list[Any], done: bool) -> None:
        if self._entry is None:
            return
        self._fetched += tuple(shown_row(row) for row in rows)
        if self._fetched:
            shown = ", ".join(self._fetched[:SHOWN_ROWS])
            self._entry.result = shown + (", ..." if len(self._fetched) > SHOWN_ROWS else "")
        elif done:
            self._entry.result = "no row"

    def fetchone(self) -> Any:
        row = super().fetchone()
        self._saw([] if row is None else [row], row is None)
        return row

    def fetchmany(self, size: int | None = None) -> list[Any]:
        rows = super().fetchmany(self.arraysize if size is None else size)
        self._saw(rows, not rows)
        return rows

    def fetchall(self) -> list[Any]:
        rows = super().fetchall()
        self._saw(rows, True)
        return rows

    def __next__(self) -> Any:
        try:
            row = super().__next__()
        except StopIteration:
            self._saw([], True)
            raise
        self._saw([row], False)
        return row


def open_scheduled(path: Path, run: Run, write_lock: WriteLock) -> ScheduledConnection:
    """A worker's connection: autocommit, WAL, busy timeout 0, unordered SELECTs reversed.

    PRAGMA reverse_unordered_selects: "the lowest id" must be asked for (ORDER BY),
    not left to whatever order SQLite happens to read in. The file is a scratch copy
    played once, so nothing is synced to disk (synchronous OFF changes no locking).
    """
    connection = sqlite3.connect(
        path,
        isolation_level=None,
        timeout=0,
        factory=ScheduledConnection,
        check_same_thread=False,  # made by the scheduler, used in the worker's thread
    )
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("PRAGMA reverse_unordered_selects = ON")
    connection.schedule = run
    connection.write_lock = write_lock
    return connection
