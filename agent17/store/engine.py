"""What both engines do under the task board: one contract, kept by SQLite and PostgreSQL.

`TaskBoard` (board.py) writes every operation of the board once: its input
checks, the SQL it runs (each engine's text of it, a `BoardSql`) and the
reading of the rows that come back. `SqliteTaskStore` and `PostgresTaskStore`
are TaskBoards that run that SQL on their engine, through three methods that
both implement the same way:

1. `_write(call, params) -> Outcome`: one board operation in ONE write
   transaction, committed before it returns. The transaction holds the board
   lock from its first statement to COMMIT, so the writes of every process and
   host on the board form one queue. In it, in this order:
   a. `now`: the clock, read once the lock is held (the injected clock, or the
      engine's own), so time moves in commit order;
   b. every lease that has run out at `now` goes back to pending (the schema
      logs a `lease_expired` event for each);
   c. the call's statement, with `params` and `now`; when `params` holds a
      `lease` (a claim), with `expires` too, the end of a lease taken at `now`;
   d. if the statement returned rows, `call.then` (with the first row's
      `sequence`); if it returned none, `call.explain` (with the same params);
   e. a task row the call wrote (taken, completed, a dependent released)
      whose edges break the graph's rules is refused (`graph_corrupted`), and
      nothing of the operation stays;
   then COMMIT. The board reads the committed `Outcome`, and may still refuse
   the request (task_blocked, claim_mismatch, ...): the releases of (b) stand.
   On PostgreSQL the call is a server function that does (a)-(e) itself and
   tags each row it returns with its part; it goes with its BEGIN and COMMIT
   in one message.
2. `_transaction(work)`: (a) and (b), then `work(statements, now)`, in one such
   transaction, committed when `work` returns: for the operations that run
   statements of their own (creating tasks, listing them).
3. `_read(statement, params)`: one read-only statement in a snapshot of its
   own, which takes no lock.

Any exception at all in (1) or (2) (a refusal, a driver error, a Ctrl-C)
rolls back whatever was not committed, and leaves no transaction open and no
lock held. (A Ctrl-C that lands once the COMMIT is on its way may find the
claim made: nobody holds it, and its lease runs out; PostgreSQL, where that
moment is a round trip long, ends such a lease at once.) A statement that a
constraint of the schema refuses becomes the TaskError `rules.refused_write`
names. Rows are `Row`s: every column whose name ends in `at_utc` an aware UTC
datetime (or None), the column `edges` a list of `Edge`s, a task's `id`,
`subject`, `description` and `owner` text (or None): a row that breaks this
is `store_unreadable`, refused as it is read, so inside the transaction (on
SQLite, whose columns are untyped, a blob can stand where text belongs). Parameters are
named; each engine writes them in its own style (`:now`, `%(now)s`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

Row = Mapping[str, Any]
"""One result row: column name -> Python value (times aware UTC, `edges` a list of Edge)."""


@dataclass(frozen=True, slots=True)
class Call:
    """The SQL of one board operation run by `_write`: its statement and what follows it."""

    statement: str
    then: str | None = None  # after rows: the dependents a completion released
    explain: str | None = None  # after none: the task as it is, for the refusal


@dataclass(frozen=True, slots=True)
class BoardSql:
    """An engine's SQL for each operation of the board.

    Every row of a task carries the columns sequence, id, subject, description,
    status, owner, unmet_dependencies, claim_token, lease_expires_at_utc, edges.
    """

    task: Call  # task_id: one task, or no row
    claim_next: Call  # owner, token, lease: take the first ready task
    claim_task: Call  # task_id, owner, token, lease: take that task if it is ready
    # task_id, owner, token: complete a task held with that token (then: its dependents,
    # one unmet dependency fewer); explained: the task (status, owner, sequence) beside
    # the claim the token was issued for (issued_task_sequence, issued_owner,
    # issued_lease_expires_at_utc)
    complete: Call
    held: Call  # task_id, owner, token: the task if held with that token, explained if not
    tasks: str  # every task in creation order
    orphan_edges: str  # sequence: a task that has dependency rows but no row of its own
    find_tasks: str  # ids (a list): sequence, id, status of those that exist
    insert_task: str  # task_id, subject, description, now, unmet: returns sequence
    insert_edge: str  # task, dependency, position
    events: str  # after: sequence, kind, task_id, at_utc, owner, claim_token, lease_...
    issued_tokens: str  # claim_token of every claimed event, in issue order
    next_lease_expiry: str  # lease_expires_at_utc: the first lease now held, or NULL


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a committed call returned, and the `now` it ran at."""

    now: datetime
    rows: Sequence[Row]  # the statement's
    then: Sequence[Row] = ()  # `then`'s, when the statement returned rows
    explained: Sequence[Row] = ()  # `explain`'s, when it returned none


class Statements(Protocol):
    """The open write transaction, for the work of `_transaction`."""

    def rows(self, statement: str, params: Mapping[str, object]) -> list[Row]:
        """Run one statement of `BoardSql`; its rows, adapted."""
        ...

    def many(self, statement: str, params: Sequence[Mapping[str, object]]) -> None:
        """Run one statement once for each set of parameters."""
        ...


@dataclass(frozen=True, slots=True)
class Edge:
    """One stored dependency edge of a task, with what the board says about its target."""

    dependency_sequence: int
    dependency_id: str | None  # None: the target row is missing
    dependency_status: str | None
