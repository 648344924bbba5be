"""PostgresMailbox: the team's mailbox, plans and members in the board's PostgreSQL database.

The same tables as the SQLite mailbox (team/postgres_schema.sql), in the
board's PostgreSQL schema with a version row of their own, and the same SQL:
`TeamMailbox` runs every operation, this class only supplies the engine.

- Writes queue on one transaction-level advisory lock for the team's state,
  taken in the statement sent with the BEGIN (as SQLite's BEGIN IMMEDIATE makes
  writers queue), so the oldest queued message goes to exactly one claimer and
  a plan gets one verdict. Reads take no lock; each of the team's reads is one
  statement, so READ COMMITTED gives it one consistent snapshot.
- Wake-ups across hosts: the schema's trigger sends a NOTIFY (channel
  `agent17_mail`, the recipient as payload) in the transaction that queues a
  message; `listen()` opens the dedicated session that hears it
  (team/pg_wakeups.py). The in-process WakeRegistry works as with SQLite.
- One live worker per name per board: `hold_member(name)` takes a session-level
  advisory lock, keyed by the name, on a connection of the worker's own that
  lives as long as the worker. The server drops the lock when that session
  ends: a clean exit, a crash, kill -9 (the kernel closes the socket and the
  server sees it at once). A network partition is the case to know: the server
  cannot tell a silent client from a dead one, so the lock stays until TCP
  keepalives give up on the connection (about 25 s with pg_connection's
  settings), and only then can another worker take the name. Meanwhile the
  worker cut off cannot reach the board either, and any task it held comes back
  when its lease runs out: the lease, not the name, bounds the damage. A worker
  whose own session was lost finds out at its next pass (`Membership.ensure`)
  and stops rather than run as a second worker of its name.

The connections go through the one plumbing (`PgDatabase`, pg_connection.py):
reconnecting between operations, interrupts, error mapping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agent17.armour.pg_connection import PgDatabase
from agent17.armour.pg_schema import PgSchema
from agent17.armour.pg_transaction import ConstraintViolation, PgTransaction, Row
from agent17.domain import ErrorCode
from agent17.team.mailbox import MailboxError, NameHold, SqlRunner, TeamMailbox
from agent17.team.wakeups import WakeRegistry

if TYPE_CHECKING:
    import psycopg

    from agent17.team.pg_wakeups import NotificationListener

TEAM_PG_SCHEMA: Final = PgSchema(
    package="agent17.team",
    sql_file="postgres_schema.sql",
    version="2",
    metadata_table="team_metadata",
    what="agent17 team mailbox",
)
LOCK_TEAM: Final = "SELECT pg_advisory_xact_lock(team_lock_key())"
MAIL_CHANNEL: Final = "agent17_mail"
BOARD_CHANNEL: Final = "agent17_board"
"""The NOTIFY channels of the two schema files (one board per database, so plain names)."""

T = TypeVar("T")


def member_lock_key(name: str) -> int:
    """The advisory lock key of teammate `name`: 64 bits of a hash of the name.

    The one-bigint key space, like the board's and the team's lock keys, which
    are two fixed values; two names sharing a key is a 1 in 2**64 chance.
    """
    digest = hashlib.blake2b(f"agent17 teammate {name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class _QmarkRunner:
    """The team's SQL (qmark parameters) on an open PostgreSQL transaction."""

    def __init__(self, tx: PgTransaction) -> None:
        self._tx = tx

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        # The team's statements hold no literal ? or %: each ? is one parameter.
        if "%" in sql:
            raise ValueError("the team's SQL must not contain a literal %")
        return self._tx.execute(sql.replace("?", "%s"), parameters)


class _SessionLock:
    """A teammate's name held as a session-level advisory lock on a connection of its own."""

    def __init__(self, connection: psycopg.Connection[Row], driver: Any) -> None:
        self._connection: psycopg.Connection[Row] | None = connection
        self._driver = driver

    def release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            # Closing alone ends the session, but the server lets the lock go a moment
            # later, when its backend notices: a reader right after would still see it.
            connection.execute("SELECT pg_advisory_unlock_all()")
        except self._driver.Error:
            pass  # the session is gone already, and its lock with it
        finally:
            connection.close()

    def lost(self) -> str | None:
        connection = self._connection
        if connection is None:
            return "it was released"
        try:
            connection.execute("SELECT 1")
        except self._driver.Error as error:
            return f"its session is gone: {str(error).strip().splitlines()[0]}"
        return None


class PostgresMailbox(TeamMailbox):
    """The team's mailbox, plans and members in the `agent17` schema of a PostgreSQL database."""

    def __init__(
        self, dsn: str, *, wakeups: WakeRegistry | None = None, create: bool = True
    ) -> None:
        self._dsn = dsn
        # create=False: open the team's tables that exist, or refuse (`store_not_found`).
        self._db = PgDatabase(dsn, TEAM_PG_SCHEMA, MailboxError, create=create)
        self.where = self._db.where
        self.wakeups: WakeRegistry = wakeups if wakeups is not None else WakeRegistry()

    def _write(self, operation: Callable[[SqlRunner], T]) -> T:
        try:
            return self._db.transaction(lambda tx: operation(_QmarkRunner(tx)), opening=LOCK_TEAM)
        except ConstraintViolation as violation:
            # The team's inputs are checked before they are written: a constraint that
            # refuses one means rows no mailbox wrote (the transaction was rolled back).
            raise MailboxError(
                ErrorCode.STORE_UNREADABLE,
                f"{self.where}: the team's tables refused a write ({violation.constraint}):"
                f" {violation}; nothing was changed",
            ) from None

    def snapshot(self, operation: Callable[[SqlRunner], T]) -> T:
        """Run read-only `operation` (READ COMMITTED: each statement is one snapshot)."""
        return self._db.transaction(lambda tx: operation(_QmarkRunner(tx)))

    def hold_member(self, name: str) -> NameHold:
        """Take `name`'s advisory lock on a new session that lives as long as this worker."""
        connection = self._db.session(f"teammate {name}")
        try:
            ((taken,),) = connection.execute(
                "SELECT pg_try_advisory_lock(%s)", (member_lock_key(name),)
            ).fetchall()
        except self._db.driver.OperationalError as error:
            connection.close()  # a lock taken on a lost session went with it
            raise MailboxError(
                ErrorCode.STORE_UNAVAILABLE,
                f"the session that was to hold teammate {name}'s name was lost"
                f" ({str(error).strip().splitlines()[0] if str(error).strip() else 'closed'});"
                " the name is not held",
            ) from None
        except BaseException:
            connection.close()
            raise
        if not taken:
            connection.close()
            held = f"teammate {name} is held by another live worker"
            raise MailboxError(ErrorCode.ALREADY_HELD, held)
        return _SessionLock(connection, self._db.driver)

    def member_is_held(self, name: str) -> bool:
        """Look the name's lock up in pg_locks (held by any session of this database)."""
        key = member_lock_key(name) & 0xFFFF_FFFF_FFFF_FFFF
        rows = self.snapshot(
            lambda connection: connection.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND classid = ?::bigint::oid AND objid = ?::bigint::oid AND objsubid = 1",
                (key >> 32, key & 0xFFFF_FFFF),
            ).fetchall()
        )
        return bool(rows[0][0])

    def listen(self) -> NotificationListener:
        """A dedicated LISTEN session on this database's board and mail channels."""
        from agent17.team.pg_wakeups import NotificationListener

        return NotificationListener(
            lambda: self._db.session("listener"), (BOARD_CHANNEL, MAIL_CHANNEL), self._db.driver
        )

    def close(self) -> None:
        """Close the connection (the messages stay in the database)."""
        self._db.close()
