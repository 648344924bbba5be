"""PostgresTaskStore: the same leased task board, in a PostgreSQL database many hosts share.

The board's operations are TaskBoard's (board.py); this module runs them on
PostgreSQL the way engine.py says, and what differs from SQLite is why:

- The lock: every write takes one transaction-level advisory lock for the
  board (the schema's `open_board`), sent with the BEGIN; the server holds it
  to COMMIT or ROLLBACK and drops it when the session dies. So the writes of
  every host are one queue, and each statement after the lock sees every
  commit made before it (READ COMMITTED, said at every BEGIN). Not FOR UPDATE
  SKIP LOCKED, the usual queue: it passes over the first ready task while
  another transaction has it locked, and claim_next takes exactly the first.
- One clock: the injected one, or else the server's `clock_timestamp()`, read
  once the lock is held (never `now()`, the transaction's start, before the
  wait; never a host's own clock). Time moves in commit order for every host.
- One message per call: each `Call` is a server function of the schema that
  locks, reads the clock, releases run-out leases, does the work and refuses
  a broken graph itself; on the server's clock BEGIN, the function and COMMIT
  go as one message, one round trip, so the board lock is held only while the
  server works, never across a round trip. A claim whose message was out when
  an interrupt came may have committed: its lease is ended at once (the
  schema's `give_back`); a claim whose COMMIT went unanswered is looked up in
  the token history. `PgDatabase` (pg_connection.py) reconnects, retries a
  conflict the server broke, and turns a lost answer into `store_unavailable`.

The board lives in its own PostgreSQL schema, `agent17`, in the database the
DSN names: it never meets an application's own `tasks` in `public`, and the
team's mailbox lives beside it under its own version row (team/pg_mailbox.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeVar

from agent17.armour.pg_connection import STORE_UNAVAILABLE, PgDatabase
from agent17.armour.pg_schema import PgSchema
from agent17.armour.pg_transaction import ConstraintViolation, OutcomeUnknown, PgTransaction
from agent17.domain import (
    Clock,
    ErrorCode,
    IdFactory,
    TaskError,
    check_lease_seconds,
    require_utc,
)
from agent17.store.board import TaskBoard
from agent17.store.engine import BoardSql, Call, Edge, Outcome, Row, Statements
from agent17.store.rules import Constraint, corrupted, lease_end, refused_write

T = TypeVar("T")

# The board's schema file (package data), its version in the task_metadata table.
BOARD_SCHEMA: Final = PgSchema(
    "agent17.store", "postgres_schema.sql", "3", "task_metadata", "agent17 task board"
)

_COLUMNS: Final = """t.sequence, t.id, t.subject, t.description, t.status, t.owner,
       t.unmet_dependencies, t.claim_token, t.lease_expires_at_utc,
       (row_of('rows', NULL, t)).edges"""

# The board functions: `clock` is the injected clock's reading, or NULL for the server's.
POSTGRES_SQL: Final = BoardSql(
    task=Call("SELECT * FROM get_task(%(clock)s, %(task_id)s)"),
    claim_next=Call("SELECT * FROM claim_next(%(clock)s, %(lease)s, %(owner)s, %(token)s)"),
    claim_task=Call(
        "SELECT * FROM claim_task(%(clock)s, %(lease)s, %(task_id)s, %(owner)s, %(token)s)"
    ),
    complete=Call("SELECT * FROM complete_task(%(clock)s, %(task_id)s, %(owner)s, %(token)s)"),
    held=Call("SELECT * FROM verify_claim(%(clock)s, %(task_id)s, %(owner)s, %(token)s)"),
    tasks=f"SELECT {_COLUMNS} FROM tasks AS t ORDER BY t.sequence",
    orphan_edges="SELECT DISTINCT task_sequence AS sequence FROM task_dependencies"
    " WHERE task_sequence NOT IN (SELECT sequence FROM tasks)",
    find_tasks="SELECT sequence, id, status FROM tasks WHERE id = ANY(%(ids)s::text[])",
    insert_task="INSERT INTO tasks"  # the trigger logs `created`
    " (id, subject, description, status, changed_at_utc, unmet_dependencies)"
    " VALUES (%(task_id)s, %(subject)s, %(description)s, 'pending', %(now)s, %(unmet)s)"
    " RETURNING sequence",
    insert_edge="INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
    " VALUES (%(task)s, %(dependency)s, %(position)s)",
    events="SELECT e.sequence, e.kind, t.id AS task_id, e.at_utc, e.owner, e.claim_token,"
    " e.lease_expires_at_utc"
    " FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
    " WHERE e.sequence > %(after)s ORDER BY e.sequence",
    issued_tokens="SELECT claim_token FROM task_events WHERE kind = 'claimed' ORDER BY sequence",
    next_lease_expiry="SELECT min(lease_expires_at_utc) AS lease_expires_at_utc FROM tasks"
    " WHERE status = 'in_progress'",
)

# The SQLSTATE of the schema's `checked`: a task's edges break the graph's rules.
GRAPH_BROKEN: Final = "A17GC"

# Which rule of the schema a refused write broke, by the constraint's name.
_CONSTRAINTS: Final = {
    "task_claim_tokens": Constraint.CLAIM_TOKEN_REUSED,
    "tasks_id_key": Constraint.TASK_ID_TAKEN,
    "tasks_unmet_is_not_negative": Constraint.UNMET_BELOW_ZERO,
}


class PostgresTaskStore(TaskBoard):
    """The chapter's leased task board in the `agent17` schema of a PostgreSQL database."""

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
        create: bool = True,
    ) -> None:
        lease = timedelta(seconds=check_lease_seconds(lease_seconds))  # before connecting
        self._clock = clock  # None: the server's, one for every host on the board
        self._columns: list[str] = []
        # create=False: open a board that exists, or refuse (`store_not_found`), making nothing.
        self._db = PgDatabase(dsn, BOARD_SCHEMA, TaskError, create=create)
        self.where: str = self._db.where
        super().__init__(
            POSTGRES_SQL, lease=lease, new_task_id=new_task_id, new_claim_token=new_claim_token
        )

    def _write(self, call: Call, params: Mapping[str, object]) -> Outcome:
        """A board function: on the server's clock, BEGIN, it and COMMIT in one message.

        With an injected clock the BEGIN takes the board lock first and the clock is
        read once it is held, as on every engine; then the function and the COMMIT.
        """
        bound = {**params, "clock": None}
        claim = "lease" in params
        try:
            if self._clock is None:
                return self._db.transaction(
                    lambda tx: self._outcome(tx.reply, tx.rows),
                    opening=call.statement,
                    params=bound,
                    commit=True,
                )
            return self._db.transaction(
                lambda tx: self._on_own_clock(tx, call, bound), opening="SELECT lock_board()"
            )
        except ConstraintViolation as violation:
            raise _violated(violation) from None
        except self._db.driver.Error as error:
            if getattr(error, "sqlstate", None) != GRAPH_BROKEN:
                raise
            raise corrupted(error.diag.message_primary) from None
        except TaskError as error:
            if not claim or not isinstance(error.__cause__, OutcomeUnknown):
                raise
            return self._claim_outcome(error, params)
        except BaseException:
            # An interrupt (Ctrl-C, SIGTERM as an exception): a claim sent with its COMMIT
            # may have committed, and its caller will never hold it.
            if self._clock is None and claim:
                self._give_back(params)
            raise

    def _on_own_clock(self, tx: PgTransaction, call: Call, params: dict[str, object]) -> Outcome:
        assert self._clock is not None
        now = require_utc(self._clock())
        lease = params.get("lease")
        if isinstance(lease, timedelta):
            lease_end(now, lease)  # a lease that cannot end is the clock's bug, said as such
        cursor = tx.execute(call.statement, {**params, "clock": now})
        return self._outcome(cursor, cursor.fetchall())

    def _outcome(self, cursor: Any, rows: Sequence[tuple[Any, ...]]) -> Outcome:
        # Every board function returns board_rows: its column names are read once (the
        # driver builds its column descriptions anew on every look, a cost per call).
        if not self._columns:
            self._columns = [column.name for column in cursor.description]
        replies = _adapted(self._columns, rows)
        parts: dict[str, list[Row]] = {"rows": [], "then": [], "explained": [], "now": []}
        for reply in replies:
            parts[reply["part"]].append(reply)
        return Outcome(replies[0]["at_utc"], parts["rows"], parts["then"], parts["explained"])

    def _give_back(self, params: Mapping[str, object]) -> None:
        """End the lease of an interrupted claim now, if it committed (the schema's give_back).

        Best effort, on the way out of an interrupt: if it cannot run (a second
        interrupt, a lost connection), the claim's lease ends when it runs out.
        """
        with contextlib.suppress(BaseException):
            self._db.transaction(
                lambda tx: None,
                opening="SELECT give_back(%(owner)s, %(token)s)",
                params={"owner": params["owner"], "token": params["token"]},
                commit=True,
            )

    def _claim_outcome(self, error: TaskError, params: Mapping[str, object]) -> Outcome:
        """A claim whose COMMIT went unanswered: the token history says if it happened.

        A claimed event with its token means it did: the claim is read back (or, if its
        lease has run out since, refused as such). None means it did not.
        """
        try:
            found = self._read(
                "SELECT t.id FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
                " WHERE e.kind = 'claimed' AND e.claim_token = %(token)s",
                {"token": params["token"]},
            )
        except TaskError:
            raise error from None  # still unreachable: the first answer stands
        if not found:
            raise TaskError(
                STORE_UNAVAILABLE,
                f"{error.message.split('; its outcome', 1)[0]}; the board shows no such"
                " claim: nothing was changed",
            ) from None
        task_id = str(found[0]["id"])
        held = {"task_id": task_id, "owner": params["owner"], "token": params["token"]}
        outcome = self._write(self._sql.held, held)
        if not outcome.rows:
            raise TaskError(
                ErrorCode.LEASE_EXPIRED,
                f"the claim on task {task_id} was made, but its lease has ended since",
            )
        return outcome

    def _transaction(self, work: Callable[[Statements, datetime], T]) -> T:
        """open_board (lock, clock, releases) with the BEGIN, then `work`'s statements."""

        def run(tx: PgTransaction) -> T:
            if self._clock is None:
                assert tx.opened is not None
                now = utc(tx.opened[0])  # locked, read and released on the server already
            else:
                now = require_utc(self._clock())
                tx.execute("SELECT open_board(%s)", (now,))
            return work(_Statements(tx), now)

        opening = "SELECT open_board(NULL)" if self._clock is None else None
        return self._db.transaction(run, opening=opening)

    def _read(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """One read-only statement in its own transaction (a consistent snapshot, no lock)."""
        return self._db.transaction(lambda tx: _Statements(tx).rows(statement, params))

    def data_version(self) -> int:
        """The last event's sequence: every change writes an event, in commit order."""
        (row,) = self._read("SELECT coalesce(max(sequence), 0) AS last FROM task_events", {})
        return int(row["last"])

    def seconds_to_next_lease_expiry(self) -> float | None:
        """How long until the first lease now held runs out, on the board's clock (None: none).

        The board's clock is the injected one, or else the server's: a waiter on any
        host compares the deadline with the clock that will judge it, never its own.
        """
        if self._clock is not None:
            deadline = self.next_lease_expiry()
            return None if deadline is None else (deadline - self._clock()).total_seconds()
        (row,) = self._read(
            "SELECT extract(epoch FROM min(lease_expires_at_utc) - clock_timestamp())::float8"
            " AS seconds FROM tasks WHERE status = 'in_progress'",
            {},
        )
        return None if row["seconds"] is None else float(row["seconds"])

    def explain_claim_next(self) -> list[str]:
        """PostgreSQL's plan for the claim, one line per step (nothing is run).

        A board function's own statements are planned inside it: its plan is one step.
        """
        names = ("clock", "lease", "owner", "token")
        rows = self._read(f"EXPLAIN {self._sql.claim_next.statement}", dict.fromkeys(names))
        return [str(row["QUERY PLAN"]) for row in rows]

    def close(self) -> None:
        """Close the connection; the board stays in the database."""
        self._db.close()


def utc(moment: datetime) -> datetime:
    """A timestamptz from the server as an aware UTC datetime."""
    return moment.astimezone(UTC)


def _edges(edges: list[list[Any]]) -> list[Edge]:
    return [
        Edge(int(sequence), *(target if target is not None else (None, None)))
        for sequence, target in edges
    ]


def _adapted(names: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> list[Row]:
    """Rows as column name -> value: times in UTC, edges as Edges."""
    return [
        {
            name: value
            if value is None
            else utc(value)
            if name.endswith("at_utc")
            else _edges(value)
            if name == "edges"
            else value
            for name, value in zip(names, row, strict=True)
        }
        for row in rows
    ]


def _violated(violation: ConstraintViolation) -> TaskError:
    rule = _CONSTRAINTS.get(violation.constraint or "", Constraint.OTHER)
    return refused_write(rule, f"{violation.constraint}: {violation}")


class _Statements:
    """The open transaction, for the work of `_transaction`."""

    def __init__(self, tx: PgTransaction) -> None:
        self._tx = tx

    def rows(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        try:
            cursor = self._tx.execute(statement, dict(params))
        except ConstraintViolation as violation:
            raise _violated(violation) from None
        if cursor.description is None:
            return []
        return _adapted([column.name for column in cursor.description], cursor.fetchall())

    def many(self, statement: str, params: Sequence[Mapping[str, object]]) -> None:
        for each in params:
            self.rows(statement, each)
