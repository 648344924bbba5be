"""PostgresTaskStore: the same leased task board, in a PostgreSQL database many hosts share.

The contract is SqliteTaskStore's (API.md); what the engine changes, and why:

- Where the board lives: its own PostgreSQL schema, `agent17`, in the database
  the DSN names. It never meets an application's own `tasks` in `public`, one
  name says what is ours (the version check looks there and nowhere else), and
  the team's mailbox lives beside it under its own version row (team/pg_mailbox.py).
- Why alice and bob can never both own C: every operation's first statement
  takes one transaction-level advisory lock for the board (`lock_board()`,
  sent with the BEGIN in one message); the server holds it to COMMIT or
  ROLLBACK, and drops it when the session dies (kill -9 of the client
  included). So the claims of all hosts are one queue and the claim statement
  reads a board that already shows the previous claim. Not FOR UPDATE SKIP
  LOCKED, the usual Postgres queue: it passes over the first ready task while
  another transaction has it locked (and may then roll back), and our contract
  says claim_next takes exactly the first ready task in creation order. Not
  SERIALIZABLE (claims would fail and retry by the thousand) and not LOCK TABLE
  (it queues behind autovacuum).
- Isolation: READ COMMITTED, said at every BEGIN whatever default the
  database, the role or the URL's options set. Each statement after the lock
  sees every commit made before the lock was granted; nothing else is needed
  once writers queue (a stricter level would read from before the lock wait).
- One clock: the injected clock, read once the lock is held; without one, the
  server's `clock_timestamp()`, read in the statement that takes the lock and
  after it (never `now()`, the transaction's start, which is before the lock
  wait; never the host's clock, which differs from host to host). Time moves
  in commit order for every host.
- Readiness: the unmet count and a partial index of ready tasks, so the claim
  is a seek whatever the board's size; the token history is a unique partial
  index; the event log is dense and in commit order because its sequence is
  assigned under the board lock (see postgres_schema.sql).

Every operation runs the same way (`_transact`): lock, clock, return expired
leases to pending, then the work. A refusal raised before the work wrote
anything keeps those releases; any other failure, or a refusal after a write,
rolls back all. Connecting, reconnecting and interrupts are `pg_connection`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple, TypeVar

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
    require_utc,
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
    lease_end,
    not_claimable,
    random_uuid,
    require_drafts,
    require_owner,
    require_status,
    require_task_id,
    stored_task,
    unreadable,
)
from agent17.store.pg_connection import STORE_UNAVAILABLE, PgDatabase
from agent17.store.pg_create import insert_drafts
from agent17.store.pg_log import PostgresBoardLog, utc
from agent17.store.pg_schema import PgSchema
from agent17.store.pg_statements import (
    CLAIM_NEXT_SQL,
    CLAIM_TASK_SQL,
    COLUMNS,
    COMPLETE_SQL,
    OPEN_ON_OWN_CLOCK,
    OPEN_ON_SERVER_CLOCK,
    RELEASE_DEPENDENTS_SQL,
    RELEASE_EXPIRED_SQL,
)
from agent17.store.pg_transaction import ConstraintViolation, OutcomeUnknown, PgTransaction

BOARD_SCHEMA: Final = PgSchema(
    package="agent17.store",
    sql_file="postgres_schema.sql",
    version="1",
    metadata_table="task_metadata",
    what="agent17 task board",
)

T = TypeVar("T")


class _Row(NamedTuple):
    sequence: int
    id: str
    subject: str
    description: str
    status: str
    owner: str | None
    unmet_dependencies: int
    claim_token: str | None
    lease_expires_at_utc: datetime | None
    edges: list[list[Any]]


class PostgresTaskStore(PostgresBoardLog):
    """The chapter's leased task board in the `agent17` schema of a PostgreSQL database."""

    claim_statement = CLAIM_NEXT_SQL

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
        self.lease = timedelta(seconds=check_lease_seconds(lease_seconds))
        # None: the server's clock, one for every host on the board.
        self._clock: Clock | None = clock
        self._new_task_id: IdFactory = new_task_id or random_uuid
        self._tokens = ClaimTokens(new_claim_token)
        # The token of this thread's claim in progress, to look up if its COMMIT is lost.
        self._in_flight = threading.local()
        # create=False: open a board that exists, or refuse (`store_not_found`), making nothing.
        self._db = PgDatabase(dsn, BOARD_SCHEMA, TaskError, create=create)
        self.where: str = self._db.where

    def close(self) -> None:
        """Close the connection; the board stays in the database."""
        self._db.close()

    def __enter__(self) -> PostgresTaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- every operation: lock, clock, release expired leases, work ---------------------

    def _transact(self, operation: Callable[[PgTransaction, datetime], T]) -> T:
        def run(tx: PgTransaction) -> tuple[T | None, TaskError | None]:
            assert tx.opened is not None
            if self._clock is None:
                now = utc(tx.opened[0])  # locked, read and released on the server already
            else:
                now = require_utc(self._clock())
                tx.execute(RELEASE_EXPIRED_SQL, {"now": now})
            before = tx.changes
            try:
                return operation(tx, now), None
            except TaskError as refusal:
                if tx.changes != before or tx.failed:
                    raise  # the work had started writing (or failed): roll it all back
                return None, refusal  # nothing but the releases was written: keep them

        opening = OPEN_ON_SERVER_CLOCK if self._clock is None else OPEN_ON_OWN_CLOCK
        try:
            result, refusal = self._db.transaction(run, opening=opening)
        except ConstraintViolation as violation:
            # Every constraint the store can meet is mapped where it can arise; any other
            # refusing one of its own writes means rows no store wrote (now rolled back).
            raise unreadable(
                f"the board refused a write ({violation.constraint}): {violation}; nothing"
                " was changed"
            ) from None
        if refusal is not None:
            raise refusal
        return result  # type: ignore[return-value]

    def _row(self, tx: PgTransaction, task_id: str) -> _Row:
        row = tx.execute(f"SELECT {COLUMNS} FROM tasks AS t WHERE t.id = %s", (task_id,)).fetchone()
        if row is None:
            raise TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        return _Row(*row)

    @staticmethod
    def _dependencies(row: _Row) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The task's dependency ids and the unfinished ones, every edge checked."""
        edges = [
            Edge(int(sequence), *(target if target is not None else (None, None)))
            for sequence, target in row.edges
        ]
        return check_edges(row.sequence, row.id, row.unmet_dependencies, edges)

    @staticmethod
    def _task(row: _Row, status: TaskStatus, owner: str | None, blocked_by: Iterable[str]) -> Task:
        return stored_task(row.id, row.subject, row.description, status, owner, tuple(blocked_by))

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
        return self._transact(lambda tx, now: insert_drafts(tx, now, checked, self._new_task_id))

    def get_task(self, task_id: str) -> Task:
        """One task by id."""
        require_task_id(task_id)

        def get(tx: PgTransaction, now: datetime) -> Task:
            row = self._row(tx, task_id)
            blocked_by, _ = self._dependencies(row)
            return self._task(row, require_status(row.status, task_id), row.owner, blocked_by)

        return self._transact(get)

    def list_tasks(self) -> list[Task]:
        """Every task in creation order; the whole graph is checked on the way."""

        def load(tx: PgTransaction, now: datetime) -> list[Task]:
            rows = tx.execute(
                "SELECT sequence, id, subject, description, status, owner, unmet_dependencies"
                " FROM tasks ORDER BY sequence"
            ).fetchall()
            edges = tx.execute(
                "SELECT task_sequence, dependency_sequence FROM task_dependencies"
                " ORDER BY task_sequence, position"
            ).fetchall()
            return assemble_board(rows, edges)

        return self._transact(load)

    # -- claiming ----------------------------------------------------------------------------

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        require_task_id(task_id)
        require_owner(owner)

        def claim(tx: PgTransaction, now: datetime) -> TaskClaim:
            row = self._row(tx, task_id)
            blocked_by, unfinished = self._dependencies(row)
            status = require_status(row.status, task_id)
            if status is not TaskStatus.PENDING:
                raise not_claimable(self._task(row, status, row.owner, blocked_by))
            if unfinished:
                raise blocked(task_id, unfinished)
            claimed = self._claim(tx, now, CLAIM_TASK_SQL, owner, row.sequence)
            if claimed is None:  # cannot happen under the board lock; refuse rather than guess
                raise not_claimable(self._task(row, status, row.owner, blocked_by))
            return claimed

        claimed = self._claiming(owner, lambda: self._transact(claim))
        assert claimed is not None  # claim_task refuses, it never returns None
        return claimed

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        require_owner(owner)
        return self._claiming(
            owner,
            lambda: self._transact(lambda tx, now: self._claim(tx, now, CLAIM_NEXT_SQL, owner)),
        )

    def _claiming(self, owner: str, claim: Callable[[], TaskClaim | None]) -> TaskClaim | None:
        """Run `claim`; if its COMMIT went unanswered, ask the board whether it happened.

        The token history says: a claimed event with the token this claim drew means
        the claim committed, and the caller gets it (or hears that it has ended since);
        none means it did not, and the token was never issued.
        """
        self._in_flight.token = None
        try:
            return claim()
        except TaskError as error:
            token = self._in_flight.token
            if token is None or not isinstance(error.__cause__, OutcomeUnknown):
                raise
            try:
                found = self._read(
                    "SELECT t.id FROM task_events AS e JOIN tasks AS t"
                    " ON t.sequence = e.task_sequence"
                    " WHERE e.kind = 'claimed' AND e.claim_token = %s",
                    (token,),
                )
            except TaskError:
                raise error from None  # still unreachable: the first answer stands
            if not found:
                self._tokens.give_back(token)
                raise TaskError(
                    STORE_UNAVAILABLE,
                    f"{error.message.split('; its outcome', 1)[0]}; the board shows no such"
                    " claim: nothing was changed",
                ) from None
            return self.verify_claim(found[0][0], owner, token)

    def _claim(
        self,
        tx: PgTransaction,
        now: datetime,
        statement: str,
        owner: str,
        sequence: int | None = None,
    ) -> TaskClaim | None:
        expires = lease_end(now, self.lease)  # before a token is drawn: a refusal spends none
        token = self._tokens.draw()
        params = {"owner": owner, "token": token, "now": now, "expires": expires}
        self._in_flight.token = token
        try:
            found = tx.execute(statement, {**params, "sequence": sequence}).fetchone()
        except ConstraintViolation as violation:
            if violation.constraint != "task_claim_tokens":
                raise
            raise TaskError(
                ErrorCode.CLAIM_TOKEN_COLLISION,
                f"claim token {token} was issued before; the claim was rolled back",
            ) from None
        except BaseException:
            # Lost or interrupted mid-statement: the transaction rolls back, so the token
            # was never issued (and the unique index would catch it if it had been).
            self._tokens.give_back(token)
            raise
        if found is None:
            self._tokens.give_back(token)
            return None
        row = _Row(*found)
        # The count said ready; the edges must agree (graph_corrupted rolls the claim back).
        blocked_by, _ = self._dependencies(row)
        task = self._task(row, TaskStatus.IN_PROGRESS, owner, blocked_by)
        return TaskClaim(task, token, utc(expires))

    # -- completing --------------------------------------------------------------------------

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        require_task_id(task_id)
        require_owner(owner)
        require_task_id(claim_token, "claim token")

        def complete(tx: PgTransaction, now: datetime) -> TaskCompletion:
            params = {"task_id": task_id, "owner": owner, "token": claim_token, "now": now}
            found = tx.execute(COMPLETE_SQL, params).fetchone()
            if found is None:
                raise self._completion_refusal(tx, now, task_id, owner, claim_token)
            row = _Row(*found)
            unblocked = self._release_dependents(tx, row.sequence)
            blocked_by, _ = self._dependencies(row)
            return TaskCompletion(
                self._task(row, TaskStatus.COMPLETED, owner, blocked_by), unblocked
            )

        return self._transact(complete)

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim:
        """The claim if `owner` still holds `task_id` with `claim_token`: the fence of an effect.

        Otherwise `lease_expired` (its lease ran out) or `claim_mismatch` (not its claim).
        """
        require_task_id(task_id)
        require_owner(owner)
        require_task_id(claim_token, "claim token")

        def verify(tx: PgTransaction, now: datetime) -> TaskClaim:
            row = self._row(tx, task_id)
            blocked_by, _ = self._dependencies(row)
            if (row.status, row.owner, row.claim_token) != (
                TaskStatus.IN_PROGRESS,
                owner,
                claim_token,
            ) or row.lease_expires_at_utc is None:
                raise self._completion_refusal(tx, now, task_id, owner, claim_token)
            task = self._task(row, TaskStatus.IN_PROGRESS, owner, blocked_by)
            return TaskClaim(task, claim_token, utc(row.lease_expires_at_utc))

        return self._transact(verify)

    def _release_dependents(self, tx: PgTransaction, sequence: int) -> tuple[str, ...]:
        try:
            dependents = [_Row(*row) for row in tx.execute(RELEASE_DEPENDENTS_SQL, (sequence,))]
        except ConstraintViolation:
            raise corrupted(
                f"completing task #{sequence} would push a dependent's unmet count below zero"
            ) from None
        unblocked = []
        for dependent in sorted(dependents, key=lambda item: item.sequence):
            # Each dependent's new count must agree with its edges, or claim_next could
            # hand it out too early or never.
            _, unfinished = self._dependencies(dependent)
            if not unfinished and dependent.status == TaskStatus.PENDING:
                unblocked.append(dependent.id)
        return tuple(unblocked)

    def _completion_refusal(
        self, tx: PgTransaction, now: datetime, task_id: str, owner: str, token: str
    ) -> TaskError:
        row = self._row(tx, task_id)
        issued = tx.execute(
            "SELECT task_sequence, owner, lease_expires_at_utc FROM task_events"
            " WHERE kind = 'claimed' AND claim_token = %s",
            (token,),
        ).fetchone()
        claim = None if issued is None else IssuedClaim(int(issued[0]), issued[1], utc(issued[2]))
        status = require_status(row.status, task_id)
        return completion_refusal(row.sequence, task_id, status, row.owner, owner, claim, now)
