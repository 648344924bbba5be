"""TaskBoard: every operation of the leased task board, written once for both engines.

Why alice and bob can never both own C: finding a ready task and taking it
are one statement (the engine's `claim_next`), run in a write transaction
that holds the board lock from its first statement. Whoever comes second
waits for the lock, then reads a board that already shows the first claim.

Each operation checks its input, hands its engine's SQL for it to `_write`
(one committed transaction; engine.py says what both engines do in it) and
turns the rows that come back into a Task (their edges checked), a claim, a
completion or a refusal. The input rules and refusal reasons are rules.py's.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Self, TypeVar

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
from agent17.store.engine import BoardSql, Call, Edge, Outcome, Row, Statements
from agent17.store.rules import (
    IssuedClaim,
    blocked,
    completion_refusal,
    corrupted,
    dependencies_not_found,
    invalid,
    not_claimable,
    require_drafts,
    require_event_kind,
    require_event_sequence,
    require_owner,
    require_status,
    require_task_id,
)

T = TypeVar("T")


class TaskBoard(ABC):
    """The chapter's leased task board; SqliteTaskStore and PostgresTaskStore run it."""

    def __init__(
        self,
        sql: BoardSql,
        *,
        lease: timedelta,
        new_task_id: IdFactory | None,
        new_claim_token: IdFactory | None,
    ) -> None:
        self.lease = lease
        self._sql = sql
        self._new_task_id: IdFactory = new_task_id or random_uuid
        self._tokens = ClaimTokens(new_claim_token)

    # -- claiming ----------------------------------------------------------------------

    def claim_next(self, owner: str) -> TaskClaim | None:
        """Claim the first ready task in creation order for `owner`, or return None."""
        require_owner(owner)
        outcome, token = self._take(self._sql.claim_next, {"owner": owner})
        return self._claim(outcome.rows[0], token) if outcome.rows else None

    def claim_task(self, task_id: str, owner: str) -> TaskClaim:
        """Claim one named task for `owner`: it must be pending with every dependency done."""
        require_task_id(task_id)
        require_owner(owner)
        outcome, token = self._take(self._sql.claim_task, {"task_id": task_id, "owner": owner})
        if not outcome.rows:
            raise self._claim_refusal(task_id, outcome.explained)
        return self._claim(outcome.rows[0], token)

    def _take(self, call: Call, params: Mapping[str, object]) -> tuple[Outcome, str]:
        """Run a claim with a fresh token and the board's lease; an unused token is kept."""
        token = self._tokens.draw()
        try:
            outcome = self._write(call, {**params, "token": token, "lease": self.lease})
        except Exception as error:
            if getattr(error, "code", None) != ErrorCode.CLAIM_TOKEN_COLLISION:
                self._tokens.give_back(token)  # refused or rolled back, so never issued
            raise
        # An interrupt (not an Exception) may come after the COMMIT: that token is never
        # offered again, for a token is cheap and a collision is not.
        if not outcome.rows:
            self._tokens.give_back(token)  # nothing was ready: the next claim takes it
        return outcome, token

    def _claim(self, row: Row, token: str) -> TaskClaim:
        # The count said ready; the edges agree (the engine refused the claim otherwise).
        task = task_of(row, TaskStatus.IN_PROGRESS)
        return TaskClaim(task, token, row["lease_expires_at_utc"])

    def _claim_refusal(self, task_id: str, explained: Sequence[Row]) -> TaskError:
        if not explained:
            return TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        row = explained[0]
        _, unfinished = check_edges(row)
        task = task_of(row)
        if task.status is TaskStatus.PENDING and unfinished:
            return blocked(task.id, unfinished)
        # Not pending (or, under the board lock, impossible: ready yet not taken).
        return not_claimable(task)

    # -- completing and fencing ----------------------------------------------------------

    def complete_task(self, task_id: str, owner: str, claim_token: str) -> TaskCompletion:
        """Complete a task held by `owner` with `claim_token`, strictly before the lease ends."""
        outcome = self._write(self._sql.complete, self._held(task_id, owner, claim_token))
        if not outcome.rows:
            raise self._completion_refusal(outcome, task_id, owner)
        unblocked = []
        for dependent in sorted(outcome.then, key=lambda row: int(row["sequence"])):
            _, unfinished = check_edges(dependent)
            if not unfinished and dependent["status"] == TaskStatus.PENDING:
                unblocked.append(str(dependent["id"]))
        task = task_of(outcome.rows[0], TaskStatus.COMPLETED)
        return TaskCompletion(task, tuple(unblocked))

    def verify_claim(self, task_id: str, owner: str, claim_token: str) -> TaskClaim:
        """The claim if `owner` still holds `task_id` with `claim_token`: the fence of an effect.

        Otherwise `lease_expired` (its lease ran out) or `claim_mismatch` (not its claim).
        """
        outcome = self._write(self._sql.held, self._held(task_id, owner, claim_token))
        if not outcome.rows:
            raise self._completion_refusal(outcome, task_id, owner)
        return self._claim(outcome.rows[0], claim_token)

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
        return self._transaction(
            lambda statements, now: [self._insert(statements, now, *draft) for draft in checked]
        )

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
        (row,) = statements.rows(self._sql.insert_task, {**params, "now": now, "unmet": unmet})
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
        outcome = self._write(self._sql.task, {"task_id": task_id})
        if not outcome.rows:
            raise TaskError(ErrorCode.TASK_NOT_FOUND, f"no task with id {task_id}")
        return task_of(outcome.rows[0])

    def list_tasks(self) -> list[Task]:
        """Every task in creation order; the whole graph is checked on the way."""

        def every(statements: Statements, now: datetime) -> list[Task]:
            for row in statements.rows(self._sql.orphan_edges, {}):
                raise corrupted(f"a dependency row belongs to the missing task #{row['sequence']}")
            return [task_of(row) for row in statements.rows(self._sql.tasks, {})]

        return self._transaction(every)

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
            for row in self._read(self._sql.events, {"after": after})
        ]

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token this board has issued, in issue order."""
        return [str(row["claim_token"]) for row in self._read(self._sql.issued_tokens, {})]

    def next_lease_expiry(self) -> datetime | None:
        """When the first lease now held runs out (None if none is held): a waiter's deadline."""
        (row,) = self._read(self._sql.next_lease_expiry, {})
        expiry: datetime | None = row["lease_expires_at_utc"]
        return expiry

    # -- the engine (engine.py) ---------------------------------------------------------

    @abstractmethod
    def _write(self, call: Call, params: Mapping[str, object]) -> Outcome:
        """Run `call` in one write transaction and commit it (engine.py, 1)."""

    @abstractmethod
    def _transaction(self, work: Callable[[Statements, datetime], T]) -> T:
        """Run `work` in one write transaction and commit it (engine.py, 2)."""

    @abstractmethod
    def _read(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """One read-only statement in a snapshot of its own (engine.py, 3)."""

    @abstractmethod
    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the board."""

    @abstractmethod
    def explain_claim_next(self) -> list[str]:
        """The engine's query plan for the claim statement, one line per step."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; the board stays for the next store."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- tokens, and the rows an engine returns ------------------------------------------


def random_uuid() -> str:
    """A fresh random id (a version 4 UUID): the default task id and claim token of both stores."""
    # str(uuid.uuid4()) without a UUID object in between: one is drawn for every claim.
    digits = os.urandom(16).hex()
    variant = "89ab"[int(digits[16], 16) & 3]  # the RFC 9562 variant, bits 10xx
    return f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-{digits[20:]}"


class ClaimTokens:
    """Where a store's claim tokens come from: its factory, each one checked.

    A token drawn for a claim that took nothing (claim_next found no task, the
    claim rolled back before it was issued) is given back and used by the next
    claim, so an empty poll uses up no token (a counting generator stays gapless).
    """

    def __init__(self, factory: IdFactory | None) -> None:
        self._factory: IdFactory = factory or random_uuid
        self._spare: str | None = None
        self._lock = threading.Lock()  # threads sharing one store never draw one token twice

    def draw(self) -> str:
        """The token for the claim about to be made."""
        with self._lock:
            token, self._spare = self._spare or self._factory(), None
        if not is_canonical_uuid(token):
            raise ValueError(f"new_claim_token returned a non-canonical UUID: {token!r}")
        return token

    def give_back(self, token: str) -> None:
        """`token` was never issued: the next claim takes it."""
        self._spare = token


def task_of(row: Row, status: TaskStatus | None = None) -> Task:
    """A task row as a Task, its edges checked (`status`: what the write just made it).

    Its text columns are text: the engine's row contract (engine.py) refuses a row
    that holds anything else as it is read.
    """
    task_id = row["id"]
    blocked_by, _ = check_edges(row)
    status = status or require_status(row["status"], task_id)
    return Task(task_id, row["subject"], row["description"], status, row["owner"], blocked_by)


def check_edges(row: Row) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task row's dependency ids and the unfinished ones, every edge and the count checked.

    The schema makes these impossible; a file edited behind the store's back
    can still hold them, and a broken graph must never look like "blocked".
    """
    task_sequence, task_id, unmet = row["sequence"], row["id"], row["unmet_dependencies"]
    ids: list[str] = []
    unfinished: list[str] = []
    edge: Edge
    for edge in row["edges"]:
        if edge.dependency_id is None:
            raise corrupted(f"a dependency of task {task_id} points at a missing task")
        if edge.dependency_sequence == task_sequence:
            raise corrupted(f"task {task_id} depends on itself")
        if edge.dependency_sequence > task_sequence:
            raise corrupted(
                f"task {task_id} depends on the newer task {edge.dependency_id}:"
                " a dependency must be older, or cycles become possible"
            )
        ids.append(edge.dependency_id)
        if edge.dependency_status != TaskStatus.COMPLETED:
            unfinished.append(edge.dependency_id)
    # The count is what claim_next trusts; an inflated one would hide a ready task forever.
    if len(unfinished) != unmet:
        raise corrupted(
            f"task {task_id} records {unmet} unmet dependencies but its edges show"
            f" {len(unfinished)}"
        )
    return tuple(ids), tuple(unfinished)
