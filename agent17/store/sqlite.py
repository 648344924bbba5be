"""SqliteTaskStore: the leased task board on one SQLite file, safe across processes.

The board's operations are TaskBoard's (board.py); this module runs them on
SQLite (engine.py says how, the same for both engines): the SQL of each, the
one transaction helper of agent17's SQLite state files, and the board's
write: `BEGIN IMMEDIATE`, which asks for SQLite's write lock before the first
read, so whoever comes second waits and then reads a board that already
shows the first claim. Opening and guarding the file is `StateFile`'s.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

from agent17.armour.paths import TASK_DB_NAME
from agent17.armour.schema_file import Schema
from agent17.armour.state_file import StateFile
from agent17.domain import (
    Clock,
    IdFactory,
    TaskError,
    check_lease_seconds,
    preview,
    require_utc,
    utc_now,
)
from agent17.store.board import TaskBoard, check_edges
from agent17.store.engine import BoardSql, Call, Edge, Outcome, Row, Statements
from agent17.store.rules import (
    Constraint,
    lease_end,
    refused_write,
    unreadable,
)

T = TypeVar("T")

BOARD_SCHEMA: Final = Schema(
    package="agent17.store",
    sql_file="schema.sql",
    version="2",
    metadata_table="task_metadata",
    what="agent17 task board",
)

# A task row and its dependency edges: [position, sequence, id, status] of each target
# (id and status NULL when the target row is missing), one primary-key lookup per edge.
_COLUMNS: Final = """sequence, id, subject, description, status, owner, unmet_dependencies,
       claim_token, lease_expires_at_utc,
       (SELECT json_group_array(json_array(d.position, d.dependency_sequence, dep.id, dep.status))
          FROM task_dependencies AS d LEFT JOIN tasks AS dep ON dep.sequence = d.dependency_sequence
         WHERE d.task_sequence = tasks.sequence) AS edges"""

# The claim, in one statement: seek the first ready task on tasks_by_state and
# take it. The schema's trigger logs the `claimed` event in the same statement
# and refuses a token that was ever issued before.
CLAIM_NEXT_SQL: Final = f"""
UPDATE tasks
   SET status = 'in_progress', owner = :owner, claim_token = :token,
       changed_at_utc = :now, lease_expires_at_utc = :expires
 WHERE sequence = (SELECT sequence FROM tasks
                    WHERE status = 'pending' AND unmet_dependencies = 0
                      AND lease_expires_at_utc IS NULL  -- always NULL when pending; makes it a seek
                    ORDER BY sequence LIMIT 1)
RETURNING {_COLUMNS}
"""


def transaction(
    connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], begin: str
) -> T:
    """BEGIN, the work, COMMIT; on any exception at all, ROLLBACK and raise it again.

    The one transaction of every SQLite state file (the board, the mailbox, the
    ledger), run through `StateFile.guarded`. Writes BEGIN IMMEDIATE, which takes
    the write lock before the first read; reads BEGIN a snapshot that takes none.
    """
    try:  # BEGIN inside the try: an interrupt right after it still rolls back
        connection.execute(begin)
        result = work(connection)
        connection.execute("COMMIT")
        return result
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


# The completion: only the owner, with the current token, of a task in progress.
# (The lease was checked a moment earlier: an expired one was already released.)
COMPLETE_SQL: Final = f"""
UPDATE tasks
   SET status = 'completed', claim_token = NULL,
       changed_at_utc = :now, lease_expires_at_utc = NULL
 WHERE id = :task_id AND status = 'in_progress' AND owner = :owner AND claim_token = :token
RETURNING {_COLUMNS}
"""

# Half-open lease [claimed_at, expires_at): at the expiry instant it is over. A seek
# on tasks_by_state; the trigger logs one lease_expired event per task.
RELEASE_EXPIRED_SQL: Final = """
UPDATE tasks SET status = 'pending', owner = NULL, claim_token = NULL,
                 changed_at_utc = :now, lease_expires_at_utc = NULL
 WHERE status = 'in_progress' AND unmet_dependencies = 0 AND lease_expires_at_utc <= :now
"""

_TASK_SQL: Final = f"SELECT {_COLUMNS} FROM tasks WHERE id = :task_id"
_REFUSAL_SQL: Final = """
SELECT t.sequence, t.status, t.owner, e.task_sequence AS issued_task_sequence,
       e.owner AS issued_owner, e.lease_expires_at_utc AS issued_lease_expires_at_utc
  FROM tasks AS t LEFT JOIN task_events AS e ON e.kind = 'claimed' AND e.claim_token = :token
 WHERE t.id = :task_id"""

SQLITE_SQL: Final = BoardSql(
    task=Call(_TASK_SQL),
    claim_next=Call(CLAIM_NEXT_SQL),
    claim_task=Call(
        f"""
UPDATE tasks
   SET status = 'in_progress', owner = :owner, claim_token = :token,
       changed_at_utc = :now, lease_expires_at_utc = :expires
 WHERE id = :task_id AND status = 'pending' AND unmet_dependencies = 0
RETURNING {_COLUMNS}""",
        explain=_TASK_SQL,
    ),
    complete=Call(
        COMPLETE_SQL,
        then=f"""
UPDATE tasks SET unmet_dependencies = unmet_dependencies - 1
 WHERE sequence IN (SELECT task_sequence FROM task_dependencies
                     WHERE dependency_sequence = :sequence)
RETURNING {_COLUMNS}""",
        explain=_REFUSAL_SQL,
    ),
    held=Call(
        f"""
SELECT {_COLUMNS} FROM tasks
 WHERE id = :task_id AND status = 'in_progress' AND owner = :owner AND claim_token = :token""",
        explain=_REFUSAL_SQL,
    ),
    tasks=f"SELECT {_COLUMNS} FROM tasks ORDER BY sequence",
    orphan_edges="SELECT DISTINCT task_sequence AS sequence FROM task_dependencies"
    " WHERE task_sequence NOT IN (SELECT sequence FROM tasks)",
    # json_each: one bound parameter for any number of ids (no variable limit).
    find_tasks="SELECT sequence, id, status FROM tasks"
    " WHERE id IN (SELECT value FROM json_each(:ids))",
    insert_task="INSERT INTO tasks"  # the trigger logs `created`
    " (id, subject, description, status, changed_at_utc, unmet_dependencies)"
    " VALUES (:task_id, :subject, :description, 'pending', :now, :unmet) RETURNING sequence",
    insert_edge="INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
    " VALUES (:task, :dependency, :position)",
    events="SELECT e.sequence, e.kind, t.id AS task_id, e.at_utc, e.owner, e.claim_token,"
    " e.lease_expires_at_utc"
    " FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
    " WHERE e.sequence > :after ORDER BY e.sequence",
    issued_tokens="SELECT claim_token FROM task_events WHERE kind = 'claimed' ORDER BY sequence",
    next_lease_expiry="SELECT min(lease_expires_at_utc) AS lease_expires_at_utc FROM tasks"
    " WHERE status = 'in_progress' AND unmet_dependencies = 0",
)

# Which rule of schema.sql a refused write broke, by the column SQLite names.
_CONSTRAINTS: Final = (
    ("task_events.claim_token", Constraint.CLAIM_TOKEN_REUSED),
    ("tasks.id", Constraint.TASK_ID_TAKEN),
    ("unmet_dependencies >= 0", Constraint.UNMET_BELOW_ZERO),
)


class SqliteTaskStore(TaskBoard):
    """The chapter's leased task board in `<workspace>/.agent_tutorial/tasks.sqlite3`."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
    ) -> None:
        lease = timedelta(seconds=check_lease_seconds(lease_seconds))  # before opening a file
        self._clock: Clock = clock if clock is not None else utc_now
        self._file = StateFile(workspace, TASK_DB_NAME, BOARD_SCHEMA, TaskError)
        self.path: Path = self._file.path
        self.workspace: Path = self._file.workspace
        super().__init__(
            SQLITE_SQL, lease=lease, new_task_id=new_task_id, new_claim_token=new_claim_token
        )

    def _write(self, call: Call, params: Mapping[str, object]) -> Outcome:
        """One BEGIN IMMEDIATE transaction: the clock, run-out leases, the call, COMMIT."""

        def run(connection: sqlite3.Connection) -> Outcome:
            now, stamp = self._open(connection)
            bound = {**params, "now": stamp}
            lease = bound.pop("lease", None)
            if isinstance(lease, timedelta):
                bound["expires"] = db_time(lease_end(now, lease))
            rows = _execute(connection, call.statement, bound)
            then: list[Row] = []
            explained: list[Row] = []
            if rows and call.then is not None:
                then = _execute(connection, call.then, {"sequence": rows[0]["sequence"]})
            elif not rows and call.explain is not None:
                explained = _execute(connection, call.explain, bound)
            for row in (*rows, *then):  # a broken graph is refused before it commits
                check_edges(row)
            return Outcome(now, rows, then, explained)

        return self._file.guarded(transaction, run, "BEGIN IMMEDIATE")

    def _transaction(self, work: Callable[[Statements, datetime], T]) -> T:
        """One BEGIN IMMEDIATE transaction: the clock, run-out leases, `work`, COMMIT."""

        def run(connection: sqlite3.Connection) -> T:
            return work(_Statements(connection), self._open(connection)[0])

        return self._file.guarded(transaction, run, "BEGIN IMMEDIATE")

    def _open(self, connection: sqlite3.Connection) -> tuple[datetime, str]:
        # The clock is read once we hold the write lock, so time moves in commit order.
        now = require_utc(self._clock())
        stamp = db_time(now)
        connection.execute(RELEASE_EXPIRED_SQL, {"now": stamp})
        return now, stamp

    def _read(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """One read-only statement in a read transaction (a consistent snapshot, no lock)."""
        return self._file.guarded(
            transaction, lambda connection: _execute(connection, statement, params), "BEGIN"
        )

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the file."""
        return self._file.data_version()

    def explain_claim_next(self) -> list[str]:
        """SQLite's query plan for the claim statement, one line per step."""
        dummy = dict.fromkeys(("owner", "token", "now", "expires"), "x")
        rows = self._file.guarded(
            transaction,
            lambda connection: connection.execute(
                f"EXPLAIN QUERY PLAN {CLAIM_NEXT_SQL}", dummy
            ).fetchall(),
            "BEGIN",
        )
        return [str(row[3]) for row in rows]

    @property
    def total_changes(self) -> int:
        """Rows this store instance has changed since it opened (proves "zero writes")."""
        return self._file.total_changes

    def close(self) -> None:
        """Close the connection; the file stays for the next store."""
        self._file.close()


_DB_TIME_LENGTH: Final = len("2026-01-01T09:00:00.000000")


def db_time(moment: datetime) -> str:
    """A datetime as the store writes it: UTC, microseconds, fixed width, trailing Z."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:_DB_TIME_LENGTH] + "Z"


def parse_db_time(text: object) -> datetime:
    """The inverse of db_time; anything else is a row no store wrote."""
    try:
        return datetime.fromisoformat(text).astimezone(UTC)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise unreadable(f"the board holds a malformed time {text!r}") from None


def _edges(text: str) -> list[Edge]:
    if text == "[]":
        return []
    return [
        Edge(sequence, task_id, status) for _, sequence, task_id, status in sorted(json.loads(text))
    ]


# The row contract's text columns (engine.py). A column's affinity turns a number into
# text, but a blob stays a blob: refused as the row is read, inside the transaction, so
# that a write that reads one back never commits.
_TEXT_COLUMNS: Final = frozenset({"id", "subject", "description", "owner"})

Reader = Callable[[Any], Any]
Shape = tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, Reader], ...]]
"""A statement's column names, its text columns, and its columns read into objects."""
_SHAPES: dict[str, Shape] = {}  # by statement: they never change


def _shape(cursor: sqlite3.Cursor) -> Shape:
    names = tuple(name for name, *_ in cursor.description)
    readers: tuple[tuple[str, Reader], ...] = tuple(
        (name, parse_db_time) for name in names if name.endswith("at_utc")
    )
    readers += tuple((name, _edges) for name in names if name == "edges")
    return names, tuple(name for name in names if name in _TEXT_COLUMNS), readers


def _adapted(statement: str, cursor: sqlite3.Cursor) -> list[Row]:
    """Rows as column name -> value: times as datetimes, edges as Edges, text as text."""
    rows: list[sqlite3.Row] = cursor.fetchall()
    if not rows:
        return []
    shape = _SHAPES.get(statement)
    if shape is None:
        shape = _SHAPES[statement] = _shape(cursor)
    names, texts, readers = shape
    adapted: list[Row] = []
    for row in rows:  # one row, mostly: the hot path reads it with no call per column
        values = dict(zip(names, row, strict=True))
        for name in texts:
            value = values[name]
            if value is not None and not isinstance(value, str):
                raise unreadable(f"a task row has a {name} that is not text: {preview(value)}")
        for name, read in readers:
            value = values[name]
            if value is not None:
                values[name] = read(value)
        adapted.append(values)
    return adapted


def _execute(
    connection: sqlite3.Connection, statement: str, params: Mapping[str, Any]
) -> list[Row]:
    try:
        return _adapted(statement, connection.execute(statement, params))
    except sqlite3.IntegrityError as error:
        broken = next((rule for text, rule in _CONSTRAINTS if text in str(error)), Constraint.OTHER)
        raise refused_write(broken, str(error)) from None


def _bound(params: Mapping[str, object]) -> dict[str, object]:
    return {
        name: db_time(value)
        if isinstance(value, datetime)
        else json.dumps(value)
        if isinstance(value, list)
        else value
        for name, value in params.items()
    }


class _Statements:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def rows(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        return _execute(self._connection, statement, _bound(params))

    def many(self, statement: str, params: Sequence[Mapping[str, object]]) -> None:
        try:
            self._connection.executemany(statement, [_bound(each) for each in params])
        except sqlite3.IntegrityError as error:
            raise refused_write(Constraint.OTHER, str(error)) from None
