"""The one way agent17 talks to PostgreSQL: connect, reconnect, one transaction helper, errors.

The Postgres twin of `state_file.py`. Every state that lives in PostgreSQL
(the board, the team's mailbox) is one versioned schema file, opened here the
same way:

1. connect (psycopg 3, sync API), with the session settings every statement
   relies on: `search_path` = the board's own PostgreSQL schema (the SQL is
   unqualified), `TimeZone` UTC (times come back as UTC datetimes), a lock
   timeout like SQLite's busy timeout, an idle-in-transaction timeout (a frozen
   client cannot hold the board lock for ever) and, from PostgreSQL 14 on, a
   check that the client is still there while a statement waits;
2. the schema file is created in the database (unless the caller only wants
   to read one that exists), or the one there checked, in one transaction
   (`pg_schema.open_schema`).

Every later operation goes through `transaction()`: BEGIN (always at READ
COMMITTED, whatever the session's default), the work, COMMIT,
with BEGIN and everything after it inside one `try` that rolls back on any
BaseException (a Ctrl-C included). A connection the server dropped between
two operations (a restart, `pg_terminate_backend`, a network blip) is found by
the next BEGIN and replaced, and the operation runs on the new one: nothing
had been sent for it yet. A connection lost in the middle of an operation is
not retried: the server rolls the transaction back, and the caller gets
`store_unavailable` saying so (or, if the COMMIT itself went unanswered, saying
that its outcome is unknown, with an `OutcomeUnknown` cause: the board store
then looks a claim up in its token history). A Ctrl-C while a statement runs is cancelled in the
server by psycopg; a connection left in any state but idle or idle in a
transaction is discarded rather than reused. A transaction the server aborted
to break a deadlock or a serialization conflict kept nothing, so it runs again, a
few times with a random pause; then `store_unavailable`, nothing changed.

The driver is imported when a database is first opened, never at import time,
so `import agent17` works without the `postgres` extra.
"""

from __future__ import annotations

import random
import re
import select
import threading
import time
import urllib.parse
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Final, TypeVar

from agent17.armour.paths import RefusalFactory
from agent17.armour.pg_schema import PgSchema, open_schema
from agent17.armour.pg_transaction import (
    Conflict,
    ConnectionLost,
    ConstraintViolation,
    OutcomeUnknown,
    Params,
    PgTransaction,
    Row,
)
from agent17.armour.whole_import import import_whole
from agent17.domain import ErrorCode, Refusal

if TYPE_CHECKING:
    import psycopg

INSTALL_HINT: Final = "pip install 'agent17[postgres]'"
STORE_UNAVAILABLE: Final = ErrorCode.STORE_UNAVAILABLE
"""The refusal code when the server cannot be reached or the connection was lost mid-operation."""

LOCK_TIMEOUT_SECONDS: Final = 30.0
"""How long a writer waits for the board lock (SQLite's busy timeout is the same)."""
IDLE_IN_TRANSACTION_SECONDS: Final = 60.0
RECONNECT_SECONDS: Final = 10.0
"""How long a replaced connection keeps trying (a restarting server needs a moment)."""
CONNECT_TIMEOUT_SECONDS: Final = 10
CONFLICT_RETRIES: Final = 5
"""How often a transaction the server aborted for a deadlock or conflict runs again."""
CONFLICT_PAUSE_SECONDS: Final = 0.01
"""The longest first pause before it does (doubled each time, randomised: no lock step)."""
# Over TCP, a peer that vanished (a host powered off, a network partition) says
# nothing: without keepalives its session, with its locks, would live until the
# kernel gives up on the socket, which takes hours. With these each side notices
# in about KEEPALIVE_IDLE + KEEPALIVE_COUNT * KEEPALIVE_INTERVAL seconds. (A Unix
# socket ignores them: there the kernel tells the server at once.)
KEEPALIVE_IDLE_SECONDS: Final = 10
KEEPALIVE_INTERVAL_SECONDS: Final = 5
KEEPALIVE_COUNT: Final = 3
CLIENT_KEEPALIVES: Final = {
    "keepalives": 1,
    "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
    "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
    "keepalives_count": KEEPALIVE_COUNT,
}
SERVER_KEEPALIVES: Final = {
    "tcp_keepalives_idle": str(KEEPALIVE_IDLE_SECONDS),
    "tcp_keepalives_interval": str(KEEPALIVE_INTERVAL_SECONDS),
    "tcp_keepalives_count": str(KEEPALIVE_COUNT),
}

# SQLSTATEs: the lock timeout, a cancelled statement, objects that vanished under us,
# and the server aborting a transaction to let another go on (serialization, deadlock).
_LOCK_NOT_AVAILABLE: Final = "55P03"
_CONFLICTS: Final = frozenset({"40001", "40P01"})
_QUERY_CANCELED: Final = "57014"
_VANISHED: Final = frozenset({"42P01", "3F000", "42883", "42703"})
# The server refusing this session what it asked for, whatever the SQL: no privilege,
# a read-only server or role, and the classes of resources, limits, an operator, the
# system. Anything else is a statement of ours that is wrong: a bug, raised as it is.
_REFUSED: Final = frozenset({"42501", "25006"})
_REFUSED_CLASSES: Final = frozenset({"08", "53", "54", "57", "58"})

# Where a connection string may hold a password: a URL's `user:password@`, and a
# `password=` setting (a URL's query parameter, or key=value).
_USERINFO: Final = re.compile(r"(://[^:@/?#\s]*):(\S*)@")
_PASSWORD_SETTING: Final = re.compile(
    r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^&#\s\"']+)", re.IGNORECASE
)


def redact(text: str, dsn: str = "") -> str:
    """`text` with every password in it, or in `dsn` that it quotes in part, as ***.

    For messages about a connection string: a driver's message may quote the whole
    string, or just the token it could not read.
    """
    secrets: set[str] = set()
    for pattern in (_USERINFO, _PASSWORD_SETTING):
        for found in pattern.finditer(dsn):
            secret = found.group(2).strip("'")
            secrets |= {secret, urllib.parse.unquote(secret)}
    try:
        password = urllib.parse.urlsplit(dsn).password
    except ValueError:  # not a URL urllib can split (libpq may still read it)
        password = None
    if password:
        secrets |= {password, urllib.parse.unquote(password)}
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _USERINFO.sub(r"\1:***@", text)
    return _PASSWORD_SETTING.sub(r"\1***", text)


T = TypeVar("T")


def import_driver() -> ModuleType:
    """psycopg, or an ImportError that says which extra to install.

    Imported whole (whole_import.py): a Ctrl-C during the first import must not
    leave a half-made driver that fails every later open of the process.
    """
    try:
        return import_whole("psycopg")
    except ImportError as error:
        raise ImportError(
            f"the PostgreSQL store needs the psycopg driver: {INSTALL_HINT}"
        ) from error


class PgDatabase:
    """One checked, versioned PostgreSQL schema behind one connection and one lock.

    Safe to share between threads (calls are serialised by the lock); any number
    of instances, in one or many processes on one or many hosts, may open the same
    database. `refusal` builds the errors it raises (TaskError for the board).
    """

    def __init__(
        self, dsn: str, schema: PgSchema, refusal: RefusalFactory, *, create: bool = True
    ) -> None:
        self.driver = import_driver()
        self.schema = schema
        self._refusal = refusal
        self._dsn = dsn
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Row] | None = None
        self.where = self._describe(dsn)
        self._client_defaults = self._defaults(dsn)
        self._connection = self._connect(deadline=time.monotonic())
        try:
            self._run(
                lambda tx: open_schema(tx, schema, refusal, self.where, create=create),
                retry=False,
            )
        except BaseException:
            self._discard()
            raise

    # -- connecting ------------------------------------------------------------------

    def _describe(self, dsn: str) -> str:
        # Where the board is, for messages: never the password.
        try:
            parts = self.driver.conninfo.conninfo_to_dict(dsn)
        except self.driver.ProgrammingError as error:
            reason = redact(str(error), dsn)
            raise ValueError(f"not a PostgreSQL connection string: {reason}") from None
        shown = {key: parts[key] for key in ("host", "port", "dbname", "user") if key in parts}
        return "PostgreSQL " + (" ".join(f"{k}={v}" for k, v in shown.items()) or "(defaults)")

    def _defaults(self, dsn: str) -> dict[str, object]:
        """The connect timeout and keepalives, where the connection string gives none.

        A connect timeout of its own is honoured, but not 0 ("wait for ever"): ours
        bounds every connect.
        """
        given = self.driver.conninfo.conninfo_to_dict(dsn)
        defaults: dict[str, object] = {
            key: value for key, value in CLIENT_KEEPALIVES.items() if key not in given
        }
        timeout = str(given.get("connect_timeout", "")).strip()
        if not (timeout.isdigit() and int(timeout) > 0):
            defaults["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        return defaults

    def _connect(
        self, *, deadline: float, application_name: str = "agent17"
    ) -> psycopg.Connection[Row]:
        """A fresh, configured connection; retried until `deadline` (monotonic seconds)."""
        pause = 0.05
        while True:
            try:
                connection: psycopg.Connection[Row] = self.driver.connect(
                    self._dsn,
                    autocommit=True,  # every transaction is our explicit BEGIN
                    application_name=application_name,
                    **self._client_defaults,
                )
            except self.driver.OperationalError as error:
                failure = f"cannot connect to {self.where}: {_first_line(error)}"
            else:
                try:
                    self._configure(connection)
                except self.driver.Error as error:
                    lost = connection.broken or connection.closed
                    connection.close()
                    if not lost:
                        # The server refused a setting, or cancelled it (a tiny
                        # statement_timeout): asking again would get the same answer.
                        raise self._refusal(
                            STORE_UNAVAILABLE,
                            redact(
                                f"{self.where} refused the session's settings"
                                f" ({_first_line(error)}); nothing was changed",
                                self._dsn,
                            ),
                        ) from None
                    # Dropped right after it was let in (a server going down, a
                    # terminated backend): the same as a refused connect.
                    failure = (
                        f"the connection to {self.where} was lost while it was being set up:"
                        f" {_first_line(error)}"
                    )
                except BaseException:
                    connection.close()
                    raise
                else:
                    return connection
            if time.monotonic() + pause > deadline:
                raise self._refusal(STORE_UNAVAILABLE, redact(failure, self._dsn)) from None
            time.sleep(pause)  # a server that is restarting refuses for a moment
            pause = min(pause * 2, 0.5)

    def _configure(self, connection: psycopg.Connection[Row]) -> None:
        settings = {
            "search_path": self.schema.namespace,
            "TimeZone": "UTC",
            "lock_timeout": f"{LOCK_TIMEOUT_SECONDS * 1000:.0f}ms",
            "idle_in_transaction_session_timeout": f"{IDLE_IN_TRANSACTION_SECONDS:.0f}s",
            # Every BEGIN says READ COMMITTED; this is for the statements a dedicated
            # session (a name's lock, a LISTEN) runs outside one.
            "default_transaction_isolation": "read committed",
        }
        if connection.info.server_version >= 140000:
            settings["client_connection_check_interval"] = "1000ms"
        settings.update(SERVER_KEEPALIVES)
        for name, value in settings.items():
            connection.execute("SELECT set_config(%s, %s, false)", (name, value))

    def session(self, purpose: str) -> psycopg.Connection[Row]:
        """A dedicated connection, configured like this one's, that the caller owns.

        For what must live on one server session and never be silently replaced by
        a reconnect: a session-level lock (a teammate's name), a LISTEN. One
        attempt, bounded by the connect timeout: `store_unavailable` otherwise.
        """
        return self._connect(deadline=time.monotonic(), application_name=f"agent17 {purpose}")

    def _discard(self) -> None:
        # Closing the socket ends the server session: its transaction and locks go with it.
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    # -- the one transaction helper -----------------------------------------------------

    def transaction(
        self,
        operation: Callable[[PgTransaction], T],
        *,
        opening: str | None = None,
        params: Params = None,
        commit: bool = False,
    ) -> T:
        """Run `operation` in one transaction: commit, or roll back on anything.

        `opening`, one statement (its `params` bound in the client), goes with the
        BEGIN in one message (one round trip less); its rows are `tx.rows`. A whole
        operation can be the opening (a server-side function), and with `commit` its
        COMMIT goes in the same message: one round trip, and `operation` only reads
        the rows of a transaction that has already ended (so everything that must
        refuse it has to happen on the server).
        """
        return self._run(operation, retry=True, opening=opening, params=params, commit=commit)

    def _run(
        self,
        operation: Callable[[PgTransaction], T],
        *,
        retry: bool,
        opening: str | None = None,
        params: Params = None,
        commit: bool = False,
    ) -> T:
        with self._lock:
            reconnected = False
            conflicts = 0
            while True:
                # Backstop: an interrupt that escaped the clean-up below (a third signal
                # between its retries) may have left the last transaction open.
                self._settle()
                if commit and self._connection is not None and _has_news(self._connection):
                    # A message that commits can never be sent again blindly, so a
                    # session the server has already ended is replaced before, not after.
                    self._discard()
                if self._connection is None:
                    self._connection = self._connect(deadline=time.monotonic() + RECONNECT_SECONDS)
                tx = PgTransaction(self._connection, self.driver, self.translate)
                try:
                    # BEGIN is inside the try: an interrupt while it waits, or right after,
                    # still reaches the clean-up below.
                    tx.begin(opening, params, commit=commit)
                    result = operation(tx)
                    tx.commit()
                    return result
                except BaseException as error:
                    # A second signal (Ctrl-C twice, SIGTERM turned into an exception) can
                    # land inside the clean-up: it is tried again until it has run, and the
                    # first error is the one raised. The loop is inline, so no signal can
                    # escape between this except and its try.
                    while True:
                        try:
                            self._settle()
                            break
                        except BaseException:
                            continue
                    if isinstance(error, Conflict):
                        if conflicts == CONFLICT_RETRIES:
                            raise self._refusal(
                                STORE_UNAVAILABLE,
                                f"{self.where} aborted the operation {conflicts + 1} times to"
                                f" let others go on ({error}); each time it was rolled back,"
                                " nothing was changed",
                            ) from None
                        conflicts += 1
                        # Random, so the transactions that collided do not collide again.
                        time.sleep(random.uniform(0, CONFLICT_PAUSE_SECONDS * 2**conflicts))
                        continue
                    if not isinstance(error, ConnectionLost):
                        raise
                    if tx.commit_sent:
                        # The cause says so, for a caller that can find out what happened.
                        raise self._lost(tx, error) from OutcomeUnknown(str(error))
                    if tx.began or not retry or reconnected:
                        raise self._lost(tx, error) from None
                    # Dropped between operations: nothing was sent for this one yet.
                    reconnected = True

    def _lost(self, tx: PgTransaction, lost: ConnectionLost) -> Refusal:
        if tx.commit_sent:
            outcome = "its outcome is unknown: read the board to see whether it happened"
        else:
            outcome = "the server rolled it back, nothing was changed"
        return self._refusal(
            STORE_UNAVAILABLE,
            f"the connection to {self.where} was lost during an operation ({lost}); {outcome}",
        )

    def _settle(self) -> None:
        """Leave the connection idle outside a transaction, or drop it."""
        connection = self._connection
        if connection is None:
            return
        if connection.closed or connection.broken:
            self._discard()
            return
        status = connection.info.transaction_status
        states = self.driver.pq.TransactionStatus
        if status == states.IDLE:
            return
        if status in (states.INTRANS, states.INERROR):
            try:
                connection.execute("ROLLBACK")
            except self.driver.Error:
                self._discard()
            return
        # A statement still running (its cancel was interrupted), or a state psycopg
        # cannot tell: never reuse it. Closing it ends the server session and its locks.
        self._discard()

    def translate(self, error: Exception, connection: psycopg.Connection[Row]) -> Exception:
        """The exception a driver error becomes: lost, a constraint, a refusal, or itself."""
        driver = self.driver
        if connection.broken or connection.closed:
            return ConnectionLost(_first_line(error))
        if isinstance(error, driver.IntegrityError):
            return ConstraintViolation(error.diag.constraint_name, _first_line(error))
        state = getattr(error, "sqlstate", None)
        if state in _CONFLICTS:
            # Even at COMMIT: the server answers it with this error only after rolling back.
            return Conflict(_first_line(error))
        if state == _LOCK_NOT_AVAILABLE:
            return self._refusal(
                STORE_UNAVAILABLE,
                f"the {self.schema.what} lock was held by another session for"
                f" {LOCK_TIMEOUT_SECONDS:g} s; nothing was changed",
            )
        if state == _QUERY_CANCELED:
            return self._refusal(
                STORE_UNAVAILABLE, "the server cancelled the operation; nothing was changed"
            )
        if state is not None and (state in _REFUSED or state[:2] in _REFUSED_CLASSES):
            # The transaction is rolled back (an error ends it, at COMMIT too).
            return self._refusal(
                STORE_UNAVAILABLE,
                f"{self.where} refused the operation ({_first_line(error)}); nothing was changed",
            )
        if state in _VANISHED:
            return self._refusal(
                ErrorCode.STORE_UNREADABLE,
                f"{self.where} schema {self.schema.namespace} no longer holds an intact"
                f" {self.schema.what} ({_first_line(error)}); open it again",
            )
        return error

    def close(self) -> None:
        """Close the connection; the board stays in the database."""
        with self._lock:
            self._discard()


def _has_news(connection: psycopg.Connection[Row]) -> bool:
    """Whether an idle connection has something to read: the goodbye of a server that
    ended the session (a restart, a terminated backend, an idle timeout) or its closing.
    The board's connection listens to nothing, so anything there means the session is
    over. A look that never waits (a poll of the socket), so it costs next to nothing.
    """
    readable, _, _ = select.select([connection.fileno()], [], [], 0)
    return bool(readable)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
