"""What a PostgreSQL board has recorded: its event log, its token history, its next deadline.

The read side of `PostgresTaskStore` (its base class). Each read is one
statement in a transaction of its own, so it sees one consistent snapshot and
takes no lock: watching the board never slows the teammates down. Because every
writer commits in the order of the board lock, a snapshot of the event log is
always a prefix of it, without gaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agent17.domain import Clock, TaskEvent, require_utc
from agent17.store.board import require_event_kind, require_event_sequence
from agent17.store.pg_connection import PgDatabase
from agent17.store.pg_transaction import PgTransaction


def utc(moment: datetime) -> datetime:
    """A timestamptz from the server as an aware UTC datetime."""
    return moment.astimezone(UTC)


class PostgresBoardLog:
    """Reads of the board's history and state for watchers (the store inherits them)."""

    _db: PgDatabase
    _clock: Clock | None  # None: the server's clock
    claim_statement: str  # the claim SQL, for its query plan

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One read-only statement in its own transaction (a consistent snapshot, no lock)."""
        rows: list[tuple[Any, ...]] = self._db.transaction(
            lambda tx: tx.execute(sql, params).fetchall()
        )
        return rows

    def events(self, after_sequence: int = 0) -> list[TaskEvent]:
        """The append-only event log, oldest first, after the given event sequence."""
        rows = self._read(
            "SELECT e.sequence, e.kind, t.id, e.at_utc, e.owner, e.claim_token,"
            " e.lease_expires_at_utc"
            " FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
            " WHERE e.sequence > %s ORDER BY e.sequence",
            (require_event_sequence(after_sequence),),
        )
        return [
            TaskEvent(
                int(seq),
                require_event_kind(kind, seq),
                task,
                utc(at),
                owner,
                token,
                None if lease is None else utc(lease),
            )
            for seq, kind, task, at, owner, token, lease in rows
        ]

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token this board has issued, in issue order."""
        rows = self._read(
            "SELECT claim_token FROM task_events WHERE kind = 'claimed' ORDER BY sequence"
        )
        return [str(token) for (token,) in rows]

    def next_lease_expiry(self) -> datetime | None:
        """When the first lease now held runs out (None if none is held): a waiter's deadline."""
        ((moment,),) = self._read(
            "SELECT min(lease_expires_at_utc) FROM tasks WHERE status = 'in_progress'"
        )
        return None if moment is None else utc(moment)

    def seconds_to_next_lease_expiry(self) -> float | None:
        """How long until the first lease now held runs out, on the board's clock (None: none).

        The board's clock is the injected one, or else the server's: a waiter on any
        host compares the deadline with the clock that will judge it, never its own.
        """
        if self._clock is not None:
            deadline = self.next_lease_expiry()
            clock = self._clock
            return None if deadline is None else (deadline - require_utc(clock())).total_seconds()
        ((left,),) = self._read(
            "SELECT extract(epoch FROM min(lease_expires_at_utc) - clock_timestamp())::float8"
            " FROM tasks WHERE status = 'in_progress'"
        )
        return None if left is None else float(left)

    def data_version(self) -> int:
        """A number that changes whenever anyone commits a change to the board.

        Every change writes an event, so the last event's sequence serves; it moves
        on this store's own commits too (a waiter then looks once more, harmlessly).
        """
        ((last,),) = self._read("SELECT coalesce(max(sequence), 0) FROM task_events")
        return int(last)

    def explain_claim_next(self) -> list[str]:
        """PostgreSQL's plan for the claim statement, one line per step (nothing is claimed)."""

        def explain(tx: PgTransaction) -> list[str]:
            params = {"owner": "x", "token": "x", "now": None, "expires": None, "sequence": None}
            rows = tx.execute(f"EXPLAIN {self.claim_statement}", params).fetchall()
            return [str(line) for (line,) in rows]

        plan: list[str] = self._db.transaction(explain)
        return plan
