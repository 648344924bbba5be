"""TaskBoard: every operation of the leased task board, written once over a BoardEngine.

Why alice and bob can never both own C: finding a ready task and taking it
are one statement (the engine's `claim_next`), run in a write transaction
that holds the board lock from its first statement (engine.py). Whoever
comes second waits for the lock, then reads a board that already shows the
first claim.

Every write starts the same way, inside the engine's transaction: the clock
is read once the lock is held, and leases that have run out go back to
pending. The board then reads what the statement returned and turns it into
a Task, a claim, a completion or a refusal. The SQL is the engine's; the
rules (input checks, edge checks, refusal reasons) are rules.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final, Self, TypeVar

from agent17.domain import (
    ErrorCode,
    IdFactory,
    Task,
    TaskClaim,
    TaskCompletion,
    TaskError,
    TaskEvent,
    TaskStatus,
    is_canonical_uuid,
)
from agent17.store.engine import (
    BoardEngine,
    Constraint,
    ConstraintViolated,
    Operation,
    Outcome,
    Row,
    Statements,
)
from agent17.store.rules import (
    ClaimTokens,
    IssuedClaim,
    blocked,
    check_edges,
    completion_refusal,
    corrupted,
    dependencies_not_found,
    invalid,
    not_claimable,
    random_uuid,
    require_drafts,
    require_event_kind,
    require_event_sequence,
    require_owner,
    require_status,
    require_task_id,
    stored_task,
    unreadable,
)

T = TypeVar("T")

# Refusals that answer a request on an intact board (as opposed to a board that
# cannot be read or reached); see `_write` for what follows one.
_ANSWERS: Final = frozenset(
    {
        ErrorCode.TASK_NOT_FOUND,
        ErrorCode.INVALID_TASK_INPUT,
        ErrorCode.DEPENDENCY_NOT_FOUND,
        ErrorCode.TASK_NOT_CLAIMABLE,
        ErrorCode.TASK_BLOCKED,
        ErrorCode.CLAIM_MISMATCH,
        ErrorCode.LEASE_EXPIRED,
    }
)


def _nothing(statements: Statements, outcome: Outcome) -> None:
    return None


class TaskBoard:
    """The chapter's leased task board over one engine (SQLite or PostgreSQL)."""

    def __init__(
        self,
        engine: BoardEngine,
        *,
        lease: timedelta,
        new_task_id: IdFactory | None,
        new_claim_token: IdFactory | None,
    ) -> None:
        self.lease = lease
        self._engine = engine
        self._sql = engine.sql
        self._new_task_id: IdFactory = new_task_id or random_uuid
        self._tokens = ClaimTokens(new_claim_token)

    def close(self) -> None:
        """Close the connection; the board stays for the next store."""
        self._engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- every write: one transaction of the engine -------------------------------------

    def _write(self, operation: Operation[T]) -> T:
        try:
            return self._engine.write(operation)
        except ConstraintViolated as violation:
            raise self._violation(operation.params, violation) from None
        except TaskError as refusal:
            if refusal.code in _ANSWERS:
                # The refusal rolled back the releases of run-out leases with everything
                # else (where the engine commits with the operation, they stand and this
                # finds none); they are made again in a transaction of their own. That is
                # safe: a release only ends leases that had run out, and a later clock
                # finds those (and perhaps more).
                self._engine.write(Operation("release_expired", None, {}, _nothing))
            raise

    @staticmethod
    def _violation(params: Mapping[str, object], violation: ConstraintViolated) -> TaskError:
        if violation.constraint is Constraint.CLAIM_TOKEN_REUSED:
            return TaskError(ErrorCode.CLAIM_TOKEN_COLLISION, "the claim token was issued before")
        if violation.constraint is Constraint.UNMET_BELOW_ZERO:
            return corrupted(
                f"completing task {params.get('task_id')} would push a dependent's unmet"
                " count below zero"
            )
        # Every constraint the board can meet is named above; any other refusing one of
        # its own writes means rows no store wrote (the write was rolled back).
        return unreadable(f"the board refused a write ({violation.detail}); nothing was changed")

    @staticmethod
    def _edges(row: Row) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A task row's dependency ids and the unfinished ones, every edge checked."""
        return check_edges(row["sequence"], row["id"], row["unmet_dependencies"], row["edges"])

    def _task(self, row: Row, status: TaskStatus | None = None) -> Task:
        """A stored row as a Task, its edges checked (`status`: what the write just made it)."""
        blocked_by, _ = self._edges(row)
        status = status or require_status(row["status"], row["id"])
        owner = row["owner"]
        return stored_task(row["id"], row["subject"], row["description"], status, owner, blocked_by)

    # -- creating and reading ----------------------------------------------------------

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

        def create(statements: Statements, outcome: Outcome) -> list[Task]:
            return [self._insert(statements, outcome.now, *draft) for draft in checked]

        return self._write(Operation("create_tasks", None, {}, create))

    def _insert(
        self,
        statements: Statements,
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
            rows = statements.rows(self._sql.find_tasks, {"ids": list(dependencies)})
            found = {row["id"]: row for row in rows}
            missing = [dep for dep in dependencies if dep not in found]
            if missing:
                raise dependencies_not_found(missing)
        unmet = sum(1 for row in found.values() if row["status"] != TaskStatus.COMPLETED)
        params = {"task_id": task_id, "subject": subject, "description": description}
        try:
            (row,) = statements.rows(self._sql.insert_task, {**params, "now": now, "unmet": unmet})
        except ConstraintViolated as violation:
            if violation.constraint is not Constraint.TASK_ID_TAKEN:
                raise
            raise invalid(f"a task with id {task_id} already exists") from None
        if dependencies:
            statements.many(
                self._sql.insert_edge,
                [
                    {"task": row["sequence"], "dependency": found[dep]["sequence"], "position": n}
                    for n, dep in enumerate(dependencies)
                ],
            )
        return Task(task_id, subject, description, TaskStatus.PENDING, None, dependencies)

    def get_task(self, task_id: str) -> Task:
        """One task by id."""
        require_task_id(task_id)

        def get(statements: Statements, outcome: Outcome) -> Task:
            if not outcome.rows:
                raise TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
            return self._task(outcome.rows[0])

        return self._write(Operation("get_task", self._sql.task, {"task_id": task_id}, get))

    def list_tasks(self) -> list[Task]:
        """Every task in creation order; the whole graph is checked on the way."""

        def every(statements: Statements, outcome: Outcome) -> list[Task]:
            for row in statements.rows(self._sql.orphan_edges, {}):
                raise corrupted(f"a dependency row belongs to the missing task #{row['sequence']}")
            return [self._task(row) for row in outcome.rows]

        return self._write(Operation("list_tasks", self._sql.tasks, {}, every))

    # -- claiming ----------------------------------------------------------------------

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        require_owner(owner)
        return self._claim("claim_next", self._sql.claim_next, {"owner": owner})

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        require_task_id(task_id)
        require_owner(owner)
        params = {"task_id": task_id, "owner": owner}
        claim = self._claim("claim_task", self._sql.claim_task, params, explain=self._sql.task)
        assert claim is not None  # a named task not taken is refused, never None
        return claim

    def _claim(
        self, name: str, statement: str, params: Mapping[str, object], explain: str | None = None
    ) -> TaskClaim | None:
        """Run a claim statement with a fresh token and a lease from the engine's `now`."""
        drawn: list[str] = []

        def draw() -> str:  # the engine draws it once the lease end is known
            drawn.append(self._tokens.draw())
            return drawn[0]

        def claimed(statements: Statements, outcome: Outcome) -> TaskClaim | None:
            if not outcome.rows:
                if explain is None:
                    return None  # claim_next: no task is ready
                raise self._claim_refusal(params["task_id"], outcome.explained)
            row = outcome.rows[0]
            # The count said ready; the edges must agree (graph_corrupted rolls it back).
            task = self._task(row, TaskStatus.IN_PROGRESS)
            return TaskClaim(task, drawn[0], row["lease_expires_at_utc"])

        operation = Operation(
            name, statement, params, claimed, lease=self.lease, token=draw, explain=explain
        )
        try:
            claim = self._write(operation)
        except BaseException as error:
            if not drawn:
                raise
            if getattr(error, "code", None) == ErrorCode.CLAIM_TOKEN_COLLISION:
                raise TaskError(  # issued before: never offered again
                    ErrorCode.CLAIM_TOKEN_COLLISION,
                    f"claim token {drawn[0]} was issued before; the claim was rolled back",
                ) from None
            if isinstance(error, Exception):
                # Refused or rolled back, so never issued (had it reached the board, its
                # unique index would catch its next use): the next claim takes it.
                self._tokens.give_back(drawn[0])
            # After an interrupt it may have reached the board (a claim sent with its
            # COMMIT), so it is never offered again: a token is cheap, a collision is not.
            raise
        if claim is None:
            self._tokens.give_back(drawn[0])
        return claim

    def _claim_refusal(self, task_id: object, explained: Sequence[Row]) -> TaskError:
        if not explained:
            return TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        row = explained[0]
        _, unfinished = self._edges(row)
        task = self._task(row)
        if task.status is TaskStatus.PENDING and unfinished:
            return blocked(task.id, unfinished)
        # Not pending (or, under the board lock, impossible: ready yet not taken).
        return not_claimable(task)

    # -- completing and fencing ----------------------------------------------------------

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        params = self._held(task_id, owner, claim_token)

        def complete(statements: Statements, outcome: Outcome) -> TaskCompletion:
            if not outcome.rows:
                raise self._completion_refusal(outcome, task_id, owner)
            unblocked = []
            for dependent in sorted(outcome.then, key=lambda row: int(row["sequence"])):
                # Each dependent's new count must agree with its edges, or claim_next
                # could hand it out too early or never.
                _, unfinished = self._edges(dependent)
                if not unfinished and dependent["status"] == TaskStatus.PENDING:
                    unblocked.append(str(dependent["id"]))
            task = self._task(outcome.rows[0], TaskStatus.COMPLETED)
            return TaskCompletion(task, tuple(unblocked))

        sql = self._sql
        return self._write(
            Operation(
                "complete_task",
                sql.complete,
                params,
                complete,
                then=sql.release_dependents,
                explain=sql.refusal,
            )
        )

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim:
        """The claim if `owner` still holds `task_id` with `claim_token`: the fence of an effect.

        Otherwise `lease_expired` (its lease ran out) or `claim_mismatch` (not its claim).
        """
        params = self._held(task_id, owner, claim_token)

        def verify(statements: Statements, outcome: Outcome) -> TaskClaim:
            if not outcome.rows:
                raise self._completion_refusal(outcome, task_id, owner)
            row = outcome.rows[0]
            task = self._task(row, TaskStatus.IN_PROGRESS)
            return TaskClaim(task, claim_token, row["lease_expires_at_utc"])

        sql = self._sql
        return self._write(Operation("verify_claim", sql.held, params, verify, explain=sql.refusal))

    @staticmethod
    def _held(task_id: str, owner: str, claim_token: str) -> dict[str, object]:
        require_task_id(task_id)
        require_owner(owner)
        require_task_id(claim_token, "claim token")
        return {"task_id": task_id, "owner": owner, "token": claim_token}

    @staticmethod
    def _completion_refusal(outcome: Outcome, task_id: str, owner: str) -> TaskError:
        if not outcome.explained:
            return TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        row = outcome.explained[0]
        issued = None
        if row["issued_task_sequence"] is not None:
            issued = IssuedClaim(
                int(row["issued_task_sequence"]),
                row["issued_owner"],
                row["issued_lease_expires_at_utc"],
            )
        status = require_status(row["status"], task_id)
        return completion_refusal(
            row["sequence"], task_id, status, row["owner"], owner, issued, outcome.now
        )

    # -- what the board has recorded (snapshots, no lock) --------------------------------

    def events(self, after_sequence: int = 0) -> list[TaskEvent]:
        """The append-only event log, oldest first, after the given event sequence."""
        after = require_event_sequence(after_sequence)
        return [
            TaskEvent(
                int(row["sequence"]),
                require_event_kind(row["kind"], row["sequence"]),
                row["task_id"],
                row["at_utc"],
                row["owner"],
                row["claim_token"],
                row["lease_expires_at_utc"],
            )
            for row in self._engine.read(self._sql.events, {"after": after})
        ]

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token this board has issued, in issue order."""
        rows = self._engine.read(self._sql.issued_tokens, {})
        return [str(row["claim_token"]) for row in rows]

    def next_lease_expiry(self) -> datetime | None:
        """When the first lease now held runs out (None if none is held): a waiter's deadline."""
        (row,) = self._engine.read(self._sql.next_lease_expiry, {})
        expiry: datetime | None = row["lease_expires_at_utc"]
        return expiry

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the board."""
        return self._engine.data_version()

    def explain_claim_next(self) -> list[str]:
        """The engine's query plan for the claim statement, one line per step."""
        return self._engine.query_plan(self._sql.claim_next)
