"""SqliteTaskStore: the leased task board on one SQLite file, safe across processes.

Why alice and bob can never both own C: finding a ready task and taking it
are one statement (`CLAIM_NEXT_SQL`) inside one `BEGIN IMMEDIATE`
transaction. BEGIN IMMEDIATE asks for SQLite's write lock before the first
read, so whoever comes second waits (SQLite's busy handler sleeps and
retries, up to the busy timeout; it is not a queue) and then reads a board
that already shows the first claim.

Every operation runs the same way (`_transact`): take the write lock, read
the clock, return expired leases to pending (S8), then do the work. A
refusal (a TaskError) raised before the work wrote anything keeps those
releases; any other failure, or a refusal after a write, rolls back all.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, TypeVar

from agent17.domain import (
    Clock,
    ErrorCode,
    IdFactory,
    Task,
    TaskClaim,
    TaskCompletion,
    TaskError,
    TaskStatus,
    check_lease_seconds,
    is_canonical_uuid,
    require_utc,
    utc_now,
)
from agent17.store.board import (
    ClaimTokens,
    Edge,
    IssuedClaim,
    assemble_board,
    blocked,
    check_edges,
    completion_refusal,
    corrupted,
    dependencies_not_found,
    invalid,
    lease_end,
    not_claimable,
    random_uuid,
    require_drafts,
    require_owner,
    require_status,
    require_task_id,
    stored_task,
)
from agent17.store.database import Schema, StateDatabase
from agent17.store.paths import TASK_DB_NAME
from agent17.store.sqlite_log import SqliteBoardLog, db_time, parse_db_time

BOARD_SCHEMA: Final = Schema(
    package="agent17.store",
    sql_file="schema.sql",
    version="2",
    metadata_table="task_metadata",
    what="agent17 task board",
)

# The claim, in one statement: seek the first ready task on tasks_by_state and
# take it. The schema's trigger logs the `claimed` event in the same statement
# and refuses a token that was ever issued before.
CLAIM_NEXT_SQL: Final = """
UPDATE tasks
   SET status = 'in_progress', owner = :owner, claim_token = :token,
       changed_at_utc = :now, lease_expires_at_utc = :expires
 WHERE sequence = (SELECT sequence FROM tasks
                    WHERE status = 'pending' AND unmet_dependencies = 0
                      AND lease_expires_at_utc IS NULL  -- always NULL when pending; makes it a seek
                    ORDER BY sequence LIMIT 1)
RETURNING sequence, id, subject, description, unmet_dependencies
"""

# The manual claim: the same conditional update on one named task.
CLAIM_TASK_SQL: Final = """
UPDATE tasks
   SET status = 'in_progress', owner = :owner, claim_token = :token,
       changed_at_utc = :now, lease_expires_at_utc = :expires
 WHERE sequence = :sequence AND status = 'pending' AND unmet_dependencies = 0
RETURNING sequence, id, subject, description, unmet_dependencies
"""

# The completion: only the owner, with the current token, of a task in progress.
# (The lease was checked a moment earlier: an expired one was already released.)
COMPLETE_SQL: Final = """
UPDATE tasks
   SET status = 'completed', claim_token = NULL,
       changed_at_utc = :now, lease_expires_at_utc = NULL
 WHERE id = :task_id AND status = 'in_progress' AND owner = :owner AND claim_token = :token
RETURNING sequence, id, subject, description, unmet_dependencies
"""

_EDGES_SQL: Final = """
SELECT d.dependency_sequence, t.id, t.status
  FROM task_dependencies AS d LEFT JOIN tasks AS t ON t.sequence = d.dependency_sequence
 WHERE d.task_sequence = ? ORDER BY d.position
"""

_TASK_COLUMNS: Final = (
    "sequence, id, subject, description, status, owner, unmet_dependencies,"
    " claim_token, lease_expires_at_utc"
)

T = TypeVar("T")
Row = sqlite3.Row


class SqliteTaskStore(SqliteBoardLog):
    """The chapter's leased task board in `<workspace>/.agent_tutorial/tasks.sqlite3`."""

    claim_statement = CLAIM_NEXT_SQL

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        new_task_id: IdFactory | None = None,
        new_claim_token: IdFactory | None = None,
        lease_seconds: float = 300.0,
    ) -> None:
        self.lease = timedelta(seconds=check_lease_seconds(lease_seconds))
        self._clock: Clock = clock if clock is not None else utc_now
        self._new_task_id: IdFactory = new_task_id or random_uuid
        self._tokens = ClaimTokens(new_claim_token)
        self._db = StateDatabase(workspace, TASK_DB_NAME, BOARD_SCHEMA, TaskError)
        self.path: Path = self._db.path
        self.workspace: Path = self._db.workspace

    def close(self) -> None:
        """Close the connection; the file stays for the next store."""
        self._db.close()

    def __enter__(self) -> SqliteTaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- every operation: lock, clock, release expired leases, work ---------------------

    def _transact(self, operation: Callable[[sqlite3.Connection, datetime], T]) -> T:
        def run(connection: sqlite3.Connection) -> tuple[T | None, TaskError | None]:
            # The clock is read once we hold the write lock, so time moves in commit order.
            now = require_utc(self._clock())
            self._release_expired(connection, now)
            before = connection.total_changes
            try:
                return operation(connection, now), None
            except TaskError as refusal:
                if connection.total_changes != before:
                    raise  # the work had started writing: roll it all back
                return None, refusal  # nothing but the releases was written: keep them

        result, refusal = self._db.transaction(run)
        if refusal is not None:
            raise refusal
        return result  # type: ignore[return-value]

    def _release_expired(self, connection: sqlite3.Connection, now: datetime) -> None:
        # Half-open lease [claimed_at, expires_at): at the expiry instant it is over.
        # A seek on tasks_by_state; the trigger logs one lease_expired event per task.
        connection.execute(
            "UPDATE tasks SET status = 'pending', owner = NULL, claim_token = NULL,"
            " changed_at_utc = :now, lease_expires_at_utc = NULL"
            " WHERE status = 'in_progress' AND unmet_dependencies = 0"
            " AND lease_expires_at_utc <= :now",
            {"now": db_time(now)},
        )

    def _row(self, connection: sqlite3.Connection, task_id: str) -> Row:
        row: Row | None = connection.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        return row

    def _dependencies(
        self, connection: sqlite3.Connection, row: Row
    ) -> tuple[tuple[str, ...], ...]:
        """The task's dependency ids and the unfinished ones, every edge checked."""
        edges = [Edge(*edge) for edge in connection.execute(_EDGES_SQL, (row["sequence"],))]
        return check_edges(row["sequence"], row["id"], row["unmet_dependencies"], edges)

    def _task(
        self, row: Row, status: TaskStatus, owner: str | None, blocked_by: Iterable[str]
    ) -> Task:
        return stored_task(
            row["id"], row["subject"], row["description"], status, owner, tuple(blocked_by)
        )

    # -- creating --------------------------------------------------------------------------

    def create_task(
        self, subject: str, description: str = "", blocked_by: Sequence[str] | Iterable[str] = ()
    ) -> Task:
        """Add a pending task; `blocked_by` names existing tasks that must complete first."""
        (task,) = self.create_tasks([(subject, description, blocked_by)])
        return task

    def create_tasks(
        self, drafts: Iterable[tuple[str, str, Sequence[str] | Iterable[str]]]
    ) -> list[Task]:
        """Add several tasks in one transaction, all or none: (subject, description, blocked_by).

        Each draft may name tasks that exist already or that come earlier in the batch.
        """
        checked = require_drafts(drafts)

        def create(connection: sqlite3.Connection, now: datetime) -> list[Task]:
            return [self._insert(connection, now, *draft) for draft in checked]

        return self._transact(create)

    def _insert(
        self,
        connection: sqlite3.Connection,
        now: datetime,
        subject: str,
        description: str,
        dependencies: tuple[str, ...],
    ) -> Task:
        task_id = self._new_task_id()
        if not is_canonical_uuid(task_id):
            raise ValueError(f"new_task_id returned a non-canonical UUID: {task_id!r}")
        if task_id in dependencies:
            raise invalid(f"task {task_id} cannot depend on itself")
        found: dict[str, Row] = {}
        if dependencies:
            # json_each: one bound parameter for any number of ids (no variable limit).
            found = {
                row["id"]: row
                for row in connection.execute(
                    "SELECT sequence, id, status FROM tasks"
                    " WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(dependencies),),
                )
            }
            missing = [dep for dep in dependencies if dep not in found]
            if missing:
                raise dependencies_not_found(missing)
        unmet = sum(1 for row in found.values() if row["status"] != TaskStatus.COMPLETED)
        try:
            (sequence,) = connection.execute(  # the trigger logs `created`
                "INSERT INTO tasks"
                " (id, subject, description, status, changed_at_utc, unmet_dependencies)"
                " VALUES (?, ?, ?, 'pending', ?, ?) RETURNING sequence",
                (task_id, subject, description, db_time(now), unmet),
            ).fetchone()
        except sqlite3.IntegrityError:
            raise invalid(f"a task with id {task_id} already exists") from None
        if dependencies:
            connection.executemany(
                "INSERT INTO task_dependencies (task_sequence, dependency_sequence, position)"
                " VALUES (?, ?, ?)",
                [(sequence, found[dep]["sequence"], n) for n, dep in enumerate(dependencies)],
            )
        return Task(task_id, subject, description, TaskStatus.PENDING, None, dependencies)

    def get_task(self, task_id: str) -> Task:
        """One task by id."""
        require_task_id(task_id)

        def get(connection: sqlite3.Connection, now: datetime) -> Task:
            row = self._row(connection, task_id)
            blocked_by, _ = self._dependencies(connection, row)
            return self._task(row, require_status(row["status"], task_id), row["owner"], blocked_by)

        return self._transact(get)

    def list_tasks(self) -> list[Task]:
        """Every task in creation order; the whole graph is checked on the way."""
        return self._transact(lambda connection, now: _load_board(connection))

    # -- claiming ----------------------------------------------------------------------------

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        require_task_id(task_id)
        require_owner(owner)

        def claim(connection: sqlite3.Connection, now: datetime) -> TaskClaim:
            row = self._row(connection, task_id)
            blocked_by, unfinished = self._dependencies(connection, row)
            status = require_status(row["status"], task_id)
            if status is not TaskStatus.PENDING:
                raise not_claimable(self._task(row, status, row["owner"], blocked_by))
            if unfinished:
                raise blocked(task_id, unfinished)
            claim = self._claim(connection, now, CLAIM_TASK_SQL, owner, row["sequence"], blocked_by)
            if claim is None:  # cannot happen under BEGIN IMMEDIATE; refuse rather than guess
                raise not_claimable(self._task(row, status, row["owner"], blocked_by))
            return claim

        return self._transact(claim)

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        require_owner(owner)
        return self._transact(
            lambda connection, now: self._claim(connection, now, CLAIM_NEXT_SQL, owner)
        )

    def _claim(
        self,
        connection: sqlite3.Connection,
        now: datetime,
        statement: str,
        owner: str,
        sequence: int | None = None,
        checked_blocked_by: tuple[str, ...] | None = None,
    ) -> TaskClaim | None:
        expires = lease_end(now, self.lease)  # before a token is drawn: a refusal spends none
        token = self._tokens.draw()
        stamp, until = db_time(now), db_time(expires)
        params = {"owner": owner, "token": token, "now": stamp, "expires": until}
        try:
            row: Row | None = connection.execute(
                statement, {**params, "sequence": sequence}
            ).fetchone()
        except sqlite3.IntegrityError as error:
            if "task_events.claim_token" not in str(error):
                raise
            raise TaskError(
                ErrorCode.CLAIM_TOKEN_COLLISION,
                f"claim token {token} was issued before; the claim was rolled back",
            ) from None
        if row is None:
            self._tokens.give_back(token)
            return None
        blocked_by = checked_blocked_by
        if blocked_by is None:
            # The count said ready; the edges must agree (graph_corrupted rolls the claim back).
            blocked_by, _ = self._dependencies(connection, row)
        task = self._task(row, TaskStatus.IN_PROGRESS, owner, blocked_by)
        return TaskClaim(task, token, expires.astimezone(UTC))

    # -- completing --------------------------------------------------------------------------

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        require_task_id(task_id)
        require_owner(owner)
        require_task_id(claim_token, "claim token")

        def complete(connection: sqlite3.Connection, now: datetime) -> TaskCompletion:
            params = {"task_id": task_id, "owner": owner, "token": claim_token}
            row: Row | None = connection.execute(
                COMPLETE_SQL, {**params, "now": db_time(now)}
            ).fetchone()
            if row is None:
                raise self._completion_refusal(connection, now, task_id, owner, claim_token)
            unblocked = self._release_dependents(connection, row["sequence"])
            blocked_by, _ = self._dependencies(connection, row)
            task = self._task(row, TaskStatus.COMPLETED, owner, blocked_by)
            return TaskCompletion(task, unblocked)

        return self._transact(complete)

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim:
        """The claim if `owner` still holds `task_id` with `claim_token`: the fence of an effect.

        Otherwise `lease_expired` (its lease ran out) or `claim_mismatch` (not its claim).
        """
        require_task_id(task_id)
        require_owner(owner)
        require_task_id(claim_token, "claim token")

        def verify(connection: sqlite3.Connection, now: datetime) -> TaskClaim:
            row = self._row(connection, task_id)
            blocked_by, _ = self._dependencies(connection, row)
            held = (row["status"], row["owner"], row["claim_token"])
            if held != (TaskStatus.IN_PROGRESS, owner, claim_token):
                raise self._completion_refusal(connection, now, task_id, owner, claim_token)
            task = self._task(row, TaskStatus.IN_PROGRESS, owner, blocked_by)
            return TaskClaim(task, claim_token, parse_db_time(row["lease_expires_at_utc"]))

        return self._transact(verify)

    def _release_dependents(self, connection: sqlite3.Connection, sequence: int) -> tuple[str, ...]:
        try:
            dependents = connection.execute(
                "UPDATE tasks SET unmet_dependencies = unmet_dependencies - 1"
                " WHERE sequence IN (SELECT task_sequence FROM task_dependencies"
                " WHERE dependency_sequence = ?)"
                f" RETURNING {_TASK_COLUMNS}",
                (sequence,),
            ).fetchall()
        except sqlite3.IntegrityError:
            raise corrupted(
                f"completing task #{sequence} would push a dependent's unmet count below zero"
            ) from None
        unblocked = []
        for dependent in sorted(dependents, key=lambda item: int(item["sequence"])):
            # Each dependent's new count must agree with its edges, or claim_next could
            # hand it out too early or never.
            _, unfinished = self._dependencies(connection, dependent)
            if not unfinished and dependent["status"] == TaskStatus.PENDING:
                unblocked.append(str(dependent["id"]))
        return tuple(unblocked)

    def _completion_refusal(
        self, connection: sqlite3.Connection, now: datetime, task_id: str, owner: str, token: str
    ) -> TaskError:
        row = self._row(connection, task_id)
        issued = connection.execute(
            "SELECT task_sequence, owner, lease_expires_at_utc FROM task_events"
            " WHERE kind = 'claimed' AND claim_token = ?",
            (token,),
        ).fetchone()
        claim = (
            None if issued is None else IssuedClaim(issued[0], issued[1], parse_db_time(issued[2]))
        )
        status = require_status(row["status"], task_id)
        return completion_refusal(row["sequence"], task_id, status, row["owner"], owner, claim, now)


def _load_board(connection: sqlite3.Connection) -> list[Task]:
    rows = connection.execute(
        "SELECT sequence, id, subject, description, status, owner, unmet_dependencies"
        " FROM tasks ORDER BY sequence"
    ).fetchall()
    edges = connection.execute(
        "SELECT task_sequence, dependency_sequence FROM task_dependencies"
        " ORDER BY task_sequence, position"
    ).fetchall()
    return assemble_board([tuple(row) for row in rows], [tuple(edge) for edge in edges])
