"""What a SQLite board has recorded: its event log, its token history, its next deadline.

The read side of `SqliteTaskStore` (its base class): each read is one
consistent snapshot and takes no write lock, so watching the board never
slows the teammates down.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from agent17.domain import TaskEvent
from agent17.store.board import require_event_kind, require_event_sequence, unreadable
from agent17.store.database import StateDatabase

_DB_TIME_LENGTH: Final = len("2026-01-01T09:00:00.000000")


def db_time(moment: datetime) -> str:
    """A datetime as the store writes it: UTC, microseconds, fixed width, trailing Z."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:_DB_TIME_LENGTH] + "Z"


def parse_db_time(text: str) -> datetime:
    """The inverse of db_time; anything else is a row no store wrote."""
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except (TypeError, ValueError):
        raise unreadable(f"the board holds a malformed time {text!r}") from None


def maybe_time(text: str | None) -> datetime | None:
    return None if text is None else parse_db_time(text)


class SqliteBoardLog:
    """Reads of the board's history and state for watchers (the store inherits them)."""

    _db: StateDatabase
    claim_statement: str  # the claim SQL, for its query plan

    def events(self, after_sequence: int = 0) -> list[TaskEvent]:
        """The append-only event log, oldest first, after the given event sequence."""
        after_sequence = require_event_sequence(after_sequence)
        rows = self._db.snapshot(
            lambda connection: connection.execute(
                "SELECT e.sequence, e.kind, t.id, e.at_utc, e.owner, e.claim_token,"
                " e.lease_expires_at_utc"
                " FROM task_events AS e JOIN tasks AS t ON t.sequence = e.task_sequence"
                " WHERE e.sequence > ? ORDER BY e.sequence",
                (after_sequence,),
            ).fetchall()
        )
        return [
            TaskEvent(
                seq,
                require_event_kind(kind, seq),
                task,
                parse_db_time(at),
                owner,
                token,
                maybe_time(lease),
            )
            for seq, kind, task, at, owner, token, lease in rows
        ]

    def issued_claim_tokens(self) -> list[str]:
        """Every claim token this database has issued, in issue order."""
        rows = self._db.snapshot(
            lambda connection: connection.execute(
                "SELECT claim_token FROM task_events WHERE kind = 'claimed' ORDER BY sequence"
            ).fetchall()
        )
        return [str(token) for (token,) in rows]

    @property
    def total_changes(self) -> int:
        """Rows this store instance has changed since it opened (proves "zero writes")."""
        return self._db.total_changes

    def explain_claim_next(self) -> list[str]:
        """SQLite's query plan for the claim statement, one line per step."""
        rows = self._db.snapshot(
            lambda connection: connection.execute(
                f"EXPLAIN QUERY PLAN {self.claim_statement}",
                {"owner": "x", "token": "x", "now": "x", "expires": "x"},
            ).fetchall()
        )
        return [str(row[3]) for row in rows]

    def next_lease_expiry(self) -> datetime | None:
        """When the first lease now held runs out (None if none is held): a waiter's deadline."""
        row = self._db.snapshot(
            lambda connection: connection.execute(
                "SELECT min(lease_expires_at_utc) FROM tasks"
                " WHERE status = 'in_progress' AND unmet_dependencies = 0"
            ).fetchone()
        )
        return maybe_time(row[0])

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the board."""
        return self._db.data_version()
