"""One open PostgreSQL transaction: its statements and its savepoints.

Used through `PgDatabase.transaction()` only (pg_connection.py), which begins,
commits and cleans up; the driver's errors come out of `execute` already
translated (a lost connection, a named constraint, a conflict the server broke
by aborting the transaction, a refusal with a code).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import psycopg

Row = tuple[Any, ...]
Params = Sequence[Any] | Mapping[str, Any] | None
Translate = Callable[[Exception, "psycopg.Connection[Row]"], Exception]

# Said at every BEGIN, never left to a default: the board and the mailbox queue their
# writers on an advisory lock, and only READ COMMITTED lets each statement after the
# lock see the commits made before it was granted. A stricter level (a database's or
# a role's default, a URL's `options`) reads a snapshot from before the lock wait and
# fails with serialization errors instead.
BEGIN: Final = "BEGIN ISOLATION LEVEL READ COMMITTED"


class ConstraintViolation(Exception):
    """A statement broke a constraint; `constraint` names it (the store decides what it means)."""

    def __init__(self, constraint: str | None, message: str) -> None:
        super().__init__(message)
        self.constraint = constraint


class ConnectionLost(Exception):
    """The connection died under a statement (becomes a retry or a refusal, never escapes)."""


class Conflict(Exception):
    """The server aborted the transaction to break a deadlock or a serialization conflict.

    Nothing of it was kept, so it can run again from the start (pg_connection retries it).
    """


class OutcomeUnknown(Exception):
    """The cause of a `store_unavailable` whose COMMIT was sent but never answered."""


class PgTransaction:
    """One open transaction: statements, savepoints."""

    def __init__(
        self, connection: psycopg.Connection[Row], driver: ModuleType, translate: Translate
    ) -> None:
        self._connection = connection
        self._driver = driver
        self._translate = translate
        self.driver_error: type[Exception] = driver.Error
        self.server_version: int = connection.info.server_version
        self.began = False
        self.opened: Row | None = None
        """The first row of the statement sent with BEGIN, if there was one."""
        self.reply: Any = None
        """The cursor of the statement sent with BEGIN (its column names), if there was one."""
        self.rows: list[Row] = []
        self.commit_sent = False

    def begin(
        self, opening: str | None = None, params: Params = None, *, commit: bool = False
    ) -> None:
        """BEGIN, and `opening` with it in one message: a simple query, so `params` are
        bound in the client (quoted by the driver). `rows` are its rows, `opened` the first,
        `reply` its cursor. With `commit`, the COMMIT goes in that message too: the whole
        transaction in one round trip, `opening` being all of it.
        """
        if opening is not None and params:
            opening = self._driver.ClientCursor(self._connection).mogrify(opening, params)
        message = BEGIN if opening is None else f"{BEGIN}; {opening}"
        if commit:
            assert opening is not None
            message = f"{message}; COMMIT"
            self.commit_sent = True  # from here on, an unanswered message may have committed
        cursor = self._send(message)
        self.began = True
        if opening is not None:
            cursor.nextset()  # past BEGIN's empty result
            self.reply = cursor
            self.rows = cursor.fetchall()
            self.opened = self.rows[0] if self.rows else None

    def commit(self) -> None:
        if self.commit_sent:
            return  # sent with the BEGIN
        self.commit_sent = True
        self._send("COMMIT")

    def execute(self, sql: str, params: Params = None) -> Any:
        """Run one statement; returns the cursor (fetchone/fetchall)."""
        return self._send(sql, params)

    def savepoint(self, *, rollback: bool = False) -> Any:
        """A nested transaction: undone if its block raises (always, with `rollback`)."""
        return _Savepoint(self, rollback)

    def _send(self, sql: str, params: Params = None) -> Any:
        try:
            return self._connection.execute(sql, params)
        except self._driver.Error as error:
            raise self._translate(error, self._connection) from None


class _Savepoint:
    def __init__(self, tx: PgTransaction, rollback: bool) -> None:
        self._tx = tx
        self._rollback = rollback
        self._name = f"agent17_{secrets.token_hex(4)}"

    def __enter__(self) -> None:
        self._tx.execute(f"SAVEPOINT {self._name}")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None and not issubclass(kind, Exception):
            # An interrupt (Ctrl-C, SystemExit) may have landed inside a libpq call: the
            # connection's state is unknown, and a ROLLBACK TO SAVEPOINT on it could fail
            # ("another command is already in progress") and hide the interrupt. The
            # transaction's own clean-up drops the whole transaction, or the connection.
            return
        if kind is not None or self._rollback:
            self._tx.execute(f"ROLLBACK TO SAVEPOINT {self._name}")
        self._tx.execute(f"RELEASE SAVEPOINT {self._name}")
