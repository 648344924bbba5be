"""The board's engine on PostgreSQL: its SQL, its board lock and one clock, its rows.

What differs from SQLite, and why:

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
- One message per operation: the hot operations (claim_next, claim_task,
  complete_task, verify_claim, get_task) are server-side functions of the
  schema that lock, read the clock, release run-out leases, do the work and
  refuse whatever must not commit (a broken graph too); on the server's clock
  the engine sends BEGIN, the function and COMMIT as one message, one round
  trip, and the board reads the rows of a transaction already committed. The
  board lock is held only while the server works, never across a round trip.
  An interrupt while that message is out may find it committed: an
  interrupted claim is then given back at once (the schema's `give_back`).
  The others (creating, listing) send `open_board` with the BEGIN and their
  statements after it.
- Connections: `PgDatabase` (pg_connection.py) reconnects, retries a conflict
  the server broke, and turns a lost answer into `store_unavailable`; a claim
  whose COMMIT went unanswered is looked up in the token history here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from agent17.domain import Clock, ErrorCode, TaskError, require_utc
from agent17.store.engine import BoardSql, Constraint, ConstraintViolated, Operation, Outcome, Row
from agent17.store.pg_connection import STORE_UNAVAILABLE, PgDatabase
from agent17.store.pg_schema import PgSchema
from agent17.store.pg_transaction import ConstraintViolation, OutcomeUnknown, PgTransaction
from agent17.store.rules import Edge, corrupted, lease_end

# The board's schema file (package data), its version in the task_metadata table.
BOARD_SCHEMA: Final = PgSchema(
    "agent17.store", "postgres_schema.sql", "3", "task_metadata", "agent17 task board"
)

T = TypeVar("T")

_COLUMNS: Final = """t.sequence, t.id, t.subject, t.description, t.status, t.owner,
       t.unmet_dependencies, t.claim_token, t.lease_expires_at_utc,
       (row_of('rows', NULL, t)).edges"""

# The parts of a board function's reply (the schema's board_row).
_PARTS: Final = ("rows", "then", "explained")

POSTGRES_SQL: Final = BoardSql(
    release_expired="SELECT release_expired(%(now)s)",
    # The board functions: `clock` is the injected clock's reading, or NULL.
    task="SELECT * FROM get_task(%(clock)s, %(task_id)s)",
    claim_next="SELECT * FROM claim_next(%(clock)s, %(lease)s, %(owner)s, %(token)s)",
    claim_task="SELECT * FROM claim_task(%(clock)s, %(lease)s, %(task_id)s, %(owner)s, %(token)s)",
    complete="SELECT * FROM complete_task(%(clock)s, %(task_id)s, %(owner)s, %(token)s)",
    held="SELECT * FROM verify_claim(%(clock)s, %(task_id)s, %(owner)s, %(token)s)",
    # Steps of complete_task() and verify_claim() in the schema: no statement of their own.
    release_dependents="-- complete_task() releases them",
    refusal="-- refused() in the schema explains them",
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

# The statements that are board functions: one message with the BEGIN, all of a-d.
_FUNCTIONS: Final = frozenset(
    {POSTGRES_SQL.task, POSTGRES_SQL.claim_next, POSTGRES_SQL.claim_task}
    | {POSTGRES_SQL.complete, POSTGRES_SQL.held}
)
_CLAIMS: Final = frozenset({POSTGRES_SQL.claim_next, POSTGRES_SQL.claim_task})

# How every other write opens, sent with its BEGIN as one message: the board lock, the
# server's clock read after it, the release of run-out leases.
_OPEN_ON_SERVER_CLOCK: Final = "SELECT open_board(NULL)"
_OPEN_ON_OWN_CLOCK: Final = "SELECT open_board(%s)"

# The SQLSTATE of the schema's `checked`: a task's edges break the graph's rules.
GRAPH_BROKEN: Final = "A17GC"

# Which rule of the schema a refused write broke, by the constraint's name.
_CONSTRAINTS: Final = {
    "task_claim_tokens": Constraint.CLAIM_TOKEN_REUSED,
    "tasks_id_key": Constraint.TASK_ID_TAKEN,
    "tasks_unmet_is_not_negative": Constraint.UNMET_BELOW_ZERO,
}


def _nothing(tx: PgTransaction) -> None:
    return None


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


class _Statements:
    """The open transaction, for an operation's `finish`."""

    def __init__(self, tx: PgTransaction) -> None:
        self._tx = tx

    def rows(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        cursor = _execute(self._tx, statement, params)
        if cursor.description is None:
            return []
        return _adapted([column.name for column in cursor.description], cursor.fetchall())

    def many(self, statement: str, params: Sequence[Mapping[str, object]]) -> None:
        for each in params:
            _execute(self._tx, statement, each)


def _execute(tx: PgTransaction, statement: str, params: Mapping[str, object]) -> Any:
    try:
        return tx.execute(statement, dict(params))
    except ConstraintViolation as violation:
        raise _violated(violation) from None


def _violated(violation: ConstraintViolation) -> ConstraintViolated:
    rule = _CONSTRAINTS.get(violation.constraint or "", Constraint.OTHER)
    return ConstraintViolated(rule, f"{violation.constraint}: {violation}")


class PostgresEngine:
    """The board's engine in the `agent17` schema of a PostgreSQL database."""

    sql: Final = POSTGRES_SQL

    def __init__(self, dsn: str, clock: Clock | None, *, create: bool = True) -> None:
        self._clock = clock  # None: the server's, one for every host on the board
        self._columns: list[str] = []
        # create=False: open a board that exists, or refuse (`store_not_found`), making nothing.
        self.db = PgDatabase(dsn, BOARD_SCHEMA, TaskError, create=create)
        self.where: str = self.db.where

    def write(self, operation: Operation[T]) -> T:
        """One transaction: a board function with its BEGIN, or open_board and statements."""
        if operation.statement in _FUNCTIONS:
            return self._call(operation)
        return self._steps(operation)

    def _call(self, operation: Operation[T]) -> T:
        """A board function: with the server's clock, BEGIN, it and COMMIT in one message.

        The board's `finish` then reads rows already committed: the function refuses on
        the server whatever must not commit (a broken graph: the schema's `checked`).
        With an injected clock the BEGIN takes the board lock first and the clock is
        read once it is held, as on every engine; then the function and the COMMIT.
        """
        statement = operation.statement
        assert statement is not None
        params = {**operation.params, "clock": None, "lease": operation.lease}

        def bind(now: datetime | None) -> dict[str, object]:
            if now is not None and operation.lease is not None:
                lease_end(now, operation.lease)  # a lease that cannot end spends no token
            if operation.token is not None:
                params["token"] = operation.token()
            return {**params, "clock": now}

        def finish(tx: PgTransaction) -> T:
            if self._clock is None:
                cursor, rows = tx.reply, tx.rows
            else:
                cursor = tx.execute(statement, bind(require_utc(self._clock())))
                rows = cursor.fetchall()
            replies = _adapted(self._reply_columns(cursor), rows)
            parts = {part: [row for row in replies if row["part"] == part] for part in _PARTS}
            now = replies[0]["at_utc"]
            outcome = Outcome(now, parts["rows"], parts["then"], parts["explained"])
            return operation.finish(_Statements(tx), outcome)

        if self._clock is None:
            opening, bound = statement, bind(None)
        else:
            opening, bound = "SELECT lock_board()", None
        try:
            # On the server's clock, BEGIN, the function and COMMIT are one message.
            return self.db.transaction(
                finish, opening=opening, params=bound, commit=self._clock is None
            )
        except ConstraintViolation as violation:
            raise _violated(violation) from None
        except self.db.driver.Error as error:
            if getattr(error, "sqlstate", None) != GRAPH_BROKEN:
                raise
            raise corrupted(error.diag.message_primary) from None
        except TaskError as error:
            lost = isinstance(error.__cause__, OutcomeUnknown)
            if not lost or statement not in _CLAIMS:
                raise
            return self._claim_outcome(error, operation, params)
        except BaseException:
            # An interrupt (Ctrl-C, SIGTERM as an exception): a claim sent with its COMMIT
            # may have committed, and its caller will never hold it.
            if self._clock is None and statement in _CLAIMS and "token" in params:
                self._give_back(params)
            raise

    def _give_back(self, params: Mapping[str, object]) -> None:
        """End the lease of an interrupted claim now, if it committed (the schema's give_back).

        Best effort, on the way out of an interrupt: if it cannot run (a second
        interrupt, a lost connection), the claim's lease ends when it runs out.
        """
        with contextlib.suppress(BaseException):
            self.db.transaction(
                _nothing,
                opening="SELECT give_back(%(owner)s, %(token)s)",
                params={"owner": params["owner"], "token": params["token"]},
                commit=True,
            )

    def _reply_columns(self, cursor: Any) -> list[str]:
        # Every board function returns a board_row: its names, read once (the driver
        # builds its column descriptions anew on every look, a noticeable cost per call).
        if not self._columns:
            self._columns = [column.name for column in cursor.description]
        return self._columns

    def _claim_outcome(
        self, error: TaskError, operation: Operation[T], params: Mapping[str, object]
    ) -> T:
        """A claim whose COMMIT went unanswered: the token history says if it happened.

        A claimed event with its token means it did: the claim is read back (or, if its
        lease has run out since, refused as such). None means it did not.
        """
        try:
            found = self.read(
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

        def claimed(statements: Any, outcome: Outcome) -> T:
            if not outcome.rows:
                raise TaskError(
                    ErrorCode.LEASE_EXPIRED,
                    f"the claim on task {task_id} was made, but its lease has ended since",
                )
            return operation.finish(statements, outcome)

        return self.write(Operation("verify_claim", self.sql.held, held, claimed))

    def _steps(self, operation: Operation[T]) -> T:
        def run(tx: PgTransaction) -> T:
            if self._clock is None:
                assert tx.opened is not None
                now = utc(tx.opened[0])  # locked, read and released on the server already
            else:
                now = require_utc(self._clock())
                tx.execute(_OPEN_ON_OWN_CLOCK, (now,))
            statements = _Statements(tx)
            rows: list[Row] = []
            if operation.statement is not None:
                assert operation.then is None and operation.explain is None  # functions'
                rows = statements.rows(operation.statement, {**operation.params, "now": now})
            return operation.finish(statements, Outcome(now, rows))

        opening = _OPEN_ON_SERVER_CLOCK if self._clock is None else None
        try:
            return self.db.transaction(run, opening=opening)
        except ConstraintViolation as violation:
            raise _violated(violation) from None

    def read(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """One read-only statement in its own transaction (a consistent snapshot, no lock)."""

        def run(tx: PgTransaction) -> list[Row]:
            return _Statements(tx).rows(statement, params)

        return self.db.transaction(run)

    def data_version(self) -> int:
        """The last event's sequence: every change writes an event, in commit order."""
        (row,) = self.read("SELECT coalesce(max(sequence), 0) AS last FROM task_events", {})
        return int(row["last"])

    def seconds_left(self) -> float | None:
        """Until the first lease now held runs out, on the server's clock (None: none)."""
        (row,) = self.read(
            "SELECT extract(epoch FROM min(lease_expires_at_utc) - clock_timestamp())::float8"
            " AS seconds FROM tasks WHERE status = 'in_progress'",
            {},
        )
        return None if row["seconds"] is None else float(row["seconds"])

    def query_plan(self, statement: str) -> list[str]:
        """PostgreSQL's plan for `statement`, one line per step (nothing is run).

        A board function's own statements are planned inside it: its plan is one step.
        """
        names = ("clock", "lease", "owner", "token", "task_id", "now", "expires", "sequence")
        rows = self.read(f"EXPLAIN {statement}", dict.fromkeys(names))
        return [str(row["QUERY PLAN"]) for row in rows]

    def close(self) -> None:
        """Close the connection; the board stays in the database."""
        self.db.close()
