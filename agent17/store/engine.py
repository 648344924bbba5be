"""What an engine gives the task board: one write transaction per operation, reads, its SQL.

`TaskBoard` (board.py) writes every board operation once. It never sees a
connection: it describes each write as an `Operation` (which statement, its
parameters, what to run after it, how to read the rows) and hands it to a
`BoardEngine`, which runs it its own way. An engine must:

1. `write(operation)`: run the operation in ONE write transaction that holds
   the board lock from its first statement to COMMIT, so the writes of every
   process and host on the board form one queue (SQLite: `BEGIN IMMEDIATE`;
   PostgreSQL: its board lock taken with the BEGIN). In that transaction, in
   this order:
   a. read the clock once the lock is held (the injected clock, or the
      engine's own, e.g. the server's `clock_timestamp()`): `now`, an aware
      UTC datetime, so time moves in commit order;
   b. run `sql.release_expired` with `now`: every run-out lease goes back
      to pending (the schema logs one `lease_expired` event per task);
   c. run `operation.statement` (when it is not None) with
      `operation.params`, plus `now`, plus `expires` = `lease_end(now,
      operation.lease)` when `operation.lease` is set, plus `token` =
      `operation.token()` when that is set (called after `lease_end`, so a
      lease that cannot end spends no token);
   d. if it returned rows and `operation.then` is set, run `then` with
      `{"sequence": <first row's sequence>}`; if it returned none and
      `operation.explain` is set, run `explain` with `operation.params`;
   e. call `operation.finish(statements, Outcome(...))` and COMMIT what it
      returns. Any exception at all (a TaskError of the board, a driver
      error, a KeyboardInterrupt) rolls the whole transaction back, releases
      included, and leaves no transaction open and no lock held.
   An engine may do a-d in one round trip (a server-side function per
   `operation.name`, returning the statement's rows, then `then`'s, then
   `explain`'s), as long as `finish` still runs before COMMIT: `finish`
   refuses rows that break the board's rules (`graph_corrupted`), and that
   must roll the claim back. `finish` runs further statements only in
   `create_tasks` (`statement = None`) and `list_tasks` (`orphan_edges`).
2. Raise `ConstraintViolated` (with the `Constraint` it broke) when a
   statement is refused by a unique index or a check of the schema, so the
   board can say why in its own words; everything else the engine turns
   into a TaskError of its own (`store_unavailable`, `store_unreadable`).
3. Give rows as `Row`s: a mapping from column name to a Python value, with
   every column whose name ends in `at_utc` an aware UTC datetime (or None),
   and the column `edges` (a task's dependencies, in position order) a list
   of `Edge`s (rules.py).
4. `read(statement, params)`: one read-only statement in a transaction of
   its own: a consistent snapshot that takes no board lock.
5. `data_version()`: a number that changes whenever another connection
   commits to the board; `query_plan(statement)`: the engine's plan for a
   statement, one line per step; `close()`.
6. `sql`: a `BoardSql`, the engine's text of each statement. Parameters are
   named; each engine writes them in its own style (`:now`, `%(now)s`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")

Row = Mapping[str, Any]
"""One result row: column name -> Python value (times aware UTC, `edges` a list of Edge)."""


@dataclass(frozen=True, slots=True)
class BoardSql:
    """An engine's SQL, one statement per step of the board's operations.

    Every statement that returns tasks returns the columns sequence, id,
    subject, description, status, owner, unmet_dependencies, claim_token,
    lease_expires_at_utc and edges.
    """

    release_expired: str  # now: run-out leases back to pending
    task: str  # task_id: one task, or no row
    tasks: str  # every task in creation order
    orphan_edges: str  # sequence: a task that has dependency rows but no row of its own
    claim_next: str  # owner, token, now, expires: take the first ready task
    claim_task: str  # task_id, owner, token, now, expires: take that task if ready
    complete: str  # task_id, owner, token, now: complete a task held with that token
    held: str  # task_id, owner, token, now: the task if held with that token
    release_dependents: str  # sequence: one unmet dependency fewer for each dependent
    # task_id, token: the task (status, owner, sequence) beside the claim the token
    # was issued for (issued_task_sequence, issued_owner, issued_lease_expires_at_utc)
    refusal: str
    find_tasks: str  # ids (a list): sequence, id, status of those that exist
    insert_task: str  # task_id, subject, description, now, unmet: returns sequence
    insert_edge: str  # task_sequence, dependency_sequence, position
    events: str  # after: sequence, kind, task_id, at_utc, owner, claim_token, lease_...
    issued_tokens: str  # claim_token of every claimed event, in issue order
    next_lease_expiry: str  # lease_expires_at_utc: the first lease now held, or NULL


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation's statements returned, and the `now` they ran at."""

    now: datetime
    rows: Sequence[Row]  # the statement's
    then: Sequence[Row] = ()  # `then`'s, when the statement returned rows
    explained: Sequence[Row] = ()  # `explain`'s, when it returned none


class Statements(Protocol):
    """The open write transaction, for `finish` (only `create_tasks` uses it)."""

    def rows(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """Run one statement of `BoardSql`; its rows, adapted."""
        ...

    def many(self, statement: str, params: Sequence[Mapping[str, object]]) -> None:
        """Run one statement once for each set of parameters."""
        ...


@dataclass(frozen=True, slots=True)
class Operation(Generic[T]):
    """One board write, as data: the engine runs it in one transaction (see the module)."""

    name: str  # the board method it serves (an engine's server function may share it)
    statement: str | None  # one statement of the engine's BoardSql, or None
    params: Mapping[str, object]
    finish: Callable[[Statements, Outcome], T]  # reads the rows; a TaskError rolls back all
    lease: timedelta | None = None  # set: bind `expires`, the end of a lease taken at `now`
    token: Callable[[], str] | None = None  # set: bind `token`, a new claim token
    then: str | None = None
    explain: str | None = None


class Constraint(enum.Enum):
    """Which rule of the schema refused a write."""

    CLAIM_TOKEN_REUSED = "claim_token_reused"  # a claim token issued before
    TASK_ID_TAKEN = "task_id_taken"  # a task id that exists already
    UNMET_BELOW_ZERO = "unmet_below_zero"  # a dependent's unmet count would go negative
    OTHER = "other"  # any other: the rows were not written by a store


class ConstraintViolated(Exception):
    """A statement broke a constraint of the schema; the transaction is rolled back."""

    def __init__(self, constraint: Constraint, detail: str) -> None:
        super().__init__(detail)
        self.constraint = constraint
        self.detail = detail


class BoardEngine(Protocol):
    """The engine under a TaskBoard (see the module for what each part must do)."""

    @property
    def sql(self) -> BoardSql:
        """The engine's text of each statement."""
        ...

    def write(self, operation: Operation[T]) -> T:
        """Run `operation` in one write transaction that holds the board lock."""
        ...

    def read(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """One read-only statement in a snapshot of its own."""
        ...

    def data_version(self) -> int:
        """Changes whenever another connection commits to the board."""
        ...

    def query_plan(self, statement: str) -> list[str]:
        """The engine's plan for `statement`, one line per step (nothing is run)."""
        ...

    def close(self) -> None:
        """Close the connection; the board stays."""
        ...
