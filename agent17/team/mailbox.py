"""The team's persistent mailbox: one SQLite file, claim-then-ack delivery, wakeable recipients.

Messages live in `<workspace>/.agent_tutorial/mailbox.sqlite3`, apart from
`tasks.sqlite3`: task state and team messages are two separate state machines
(a report about a task never stands in for completing it).

A message moves queued -> claimed -> acked. A recipient claims one message,
handles it, then acks it; if the process dies in between, the message is still
`claimed` on disk and `requeue_unacked()` delivers it again when that
teammate starts. Sending also sets the recipient's in-process wake event, so a
sleeping teammate rescans at once instead of waiting out its poll interval.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Final

from agent17.store.connection import open_state_database, use_wal
from agent17.store.paths import safe_state_file
from agent17.tools.base import ToolError

MAILBOX_DB_NAME: Final = "mailbox.sqlite3"
MAILBOX_SCHEMA_VERSION: Final = "1"

# The claim query is served by messages_by_recipient: (recipient, state, sequence).
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS mailbox_metadata(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS messages("
    " sequence INTEGER PRIMARY KEY AUTOINCREMENT,"
    " recipient TEXT NOT NULL CHECK(length(recipient) > 0),"
    " sender TEXT NOT NULL CHECK(length(sender) > 0),"
    " kind TEXT NOT NULL CHECK(length(kind) > 0),"
    " body TEXT NOT NULL,"
    " state TEXT NOT NULL DEFAULT 'queued' CHECK(state IN ('queued', 'claimed', 'acked')),"
    " deliveries INTEGER NOT NULL DEFAULT 0 CHECK(deliveries >= 0))",
    "CREATE INDEX IF NOT EXISTS messages_by_recipient ON messages(recipient, state, sequence)",
)


class MailboxError(ToolError):
    """A known refusal of the mailbox; `code` is stable (tools report it as-is)."""


class MessageState(StrEnum):
    """Where a message is in its delivery: queued -> claimed -> acked."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    ACKED = "acked"


@dataclass(frozen=True, slots=True)
class Envelope:
    """One stored message: who to, who from, its kind and JSON body, and its delivery state."""

    sequence: int
    recipient: str
    sender: str
    kind: str
    body: str
    state: MessageState
    deliveries: int


class WakeRegistry:
    """One threading.Event per recipient name; `wake(name)` sets it and tells the listeners.

    Sleeping teammates wait on their event; the teammate runtime listens so that
    a message to a teammate whose worker has ended starts a fresh worker.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}
        self._listeners: list[Callable[[str], None]] = []

    def event_for(self, name: str) -> threading.Event:
        """The wake event of `name` (created on first use, then always the same object)."""
        with self._lock:
            event = self._events.get(name)
            if event is None:
                event = self._events[name] = threading.Event()
            return event

    def wake(self, name: str) -> None:
        """Set `name`'s event, then call every listener with `name`."""
        self.event_for(name).set()
        with self._lock:
            listeners = tuple(self._listeners)
        # Listeners run outside our lock: they take their own locks and may start threads.
        for listener in listeners:
            listener(name)

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call `listener(name)` after every wake."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[str], None]) -> None:
        """Stop calling `listener` (no error if it was not subscribed)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)


_COLUMNS: Final = "sequence, recipient, sender, kind, body, state, deliveries"


def _envelope(row: tuple[int, str, str, str, str, str, int]) -> Envelope:
    sequence, recipient, sender, kind, body, state, deliveries = row
    return Envelope(sequence, recipient, sender, kind, body, MessageState(state), deliveries)


def _require_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise MailboxError(f"invalid_{what}", f"{what} must be a non-empty name")


@dataclass(slots=True)
class MailboxWriter:
    """The handle of one write transaction: send and ack inside it, wake after commit."""

    connection: sqlite3.Connection
    woken: list[str] = field(default_factory=list)

    def send(self, recipient: str, *, sender: str, kind: str, body: str) -> Envelope:
        """Queue a message in this transaction; its recipient is woken once it commits."""
        _require_name(recipient, "recipient")
        _require_name(sender, "sender")
        _require_name(kind, "kind")
        try:
            decoded = json.loads(body)
        except (TypeError, ValueError) as error:
            raise MailboxError("invalid_message_body", f"body is not JSON: {error}") from None
        if not isinstance(decoded, dict):
            raise MailboxError("invalid_message_body", "body must be a JSON object")
        row = self.connection.execute(
            f"INSERT INTO messages(recipient, sender, kind, body) VALUES (?, ?, ?, ?)"
            f" RETURNING {_COLUMNS}",
            (recipient, sender, kind, body),
        ).fetchone()
        self.woken.append(recipient)
        return _envelope(row)

    def ack(self, envelope: Envelope) -> None:
        """Mark a claimed message as handled; it will never be delivered again."""
        cursor = self.connection.execute(
            "UPDATE messages SET state = 'acked'"
            " WHERE sequence = ? AND recipient = ? AND state = 'claimed'",
            (envelope.sequence, envelope.recipient),
        )
        if cursor.rowcount != 1:
            raise MailboxError(
                "message_not_claimed",
                f"message {envelope.sequence} to {envelope.recipient!r} is not currently claimed",
            )


class Mailbox:
    """Persistent per-agent mailboxes in `<workspace>/.agent_tutorial/mailbox.sqlite3`.

    Safe to share between threads (one connection behind a lock); several
    instances, in one or many processes, may share the file. Wake-ups are
    in-process only: share one `WakeRegistry` (or one Mailbox) within a process.
    """

    def __init__(
        self, workspace: str | os.PathLike[str], *, wakeups: WakeRegistry | None = None
    ) -> None:
        self.path: Path = safe_state_file(workspace, MAILBOX_DB_NAME)
        self.workspace: Path = self.path.parent.parent
        self.wakeups: WakeRegistry = wakeups if wakeups is not None else WakeRegistry()
        self._lock = threading.Lock()
        self._connection = open_state_database(self.path, self.workspace)
        try:
            self._prepare()
        except BaseException:
            self._connection.close()
            raise

    def _prepare(self) -> None:
        connection = self._connection
        try:
            use_wal(connection)
            with self.transaction() as writer:
                for statement in _SCHEMA:
                    writer.connection.execute(statement)
                writer.connection.execute(
                    "INSERT OR IGNORE INTO mailbox_metadata(key, value)"
                    " VALUES ('schema_version', ?)",
                    (MAILBOX_SCHEMA_VERSION,),
                )
                (version,) = writer.connection.execute(
                    "SELECT value FROM mailbox_metadata WHERE key = 'schema_version'"
                ).fetchone()
                if version != MAILBOX_SCHEMA_VERSION:
                    raise MailboxError(
                        "schema_version_mismatch",
                        f"{self.path} has mailbox schema {version!r};"
                        f" this agent17 reads {MAILBOX_SCHEMA_VERSION!r}",
                    )
        except sqlite3.DatabaseError as error:
            raise MailboxError(
                "not_a_mailbox_database", f"{self.path} is not a mailbox database: {error}"
            ) from None

    @contextmanager
    def transaction(self) -> Iterator[MailboxWriter]:
        """One BEGIN IMMEDIATE write transaction; recipients are woken only after it commits."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            writer = MailboxWriter(self._connection)
            try:
                yield writer
                self._connection.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (e.g. disk full); never leave one open.
                if self._connection.in_transaction:
                    self._connection.execute("ROLLBACK")
                raise
        for recipient in writer.woken:
            self.wakeups.wake(recipient)

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for read-only statements, held under the instance lock."""
        with self._lock:
            yield self._connection

    def send(self, recipient: str, *, sender: str, kind: str, body: str) -> Envelope:
        """Queue one message (body: a JSON object as text) and wake its recipient."""
        with self.transaction() as writer:
            return writer.send(recipient, sender=sender, kind=kind, body=body)

    def claim(self, recipient: str) -> Envelope | None:
        """Take the oldest queued message of `recipient` (it becomes claimed), or None."""
        _require_name(recipient, "recipient")
        with self.transaction() as writer:
            row = writer.connection.execute(
                "UPDATE messages SET state = 'claimed', deliveries = deliveries + 1"
                " WHERE sequence = (SELECT sequence FROM messages"
                "  WHERE recipient = ? AND state = 'queued' ORDER BY sequence LIMIT 1)"
                f" RETURNING {_COLUMNS}",
                (recipient,),
            ).fetchone()
        return None if row is None else _envelope(row)

    def ack(self, envelope: Envelope) -> None:
        """Mark a claimed message as handled (error `message_not_claimed` otherwise)."""
        with self.transaction() as writer:
            writer.ack(envelope)

    def requeue_unacked(self, recipient: str) -> int:
        """Put `recipient`'s claimed-but-never-acked messages back in the queue; return how many.

        Call it only when nobody is handling `recipient`'s messages (a teammate starting).
        """
        _require_name(recipient, "recipient")
        with self.transaction() as writer:
            count = writer.connection.execute(
                "UPDATE messages SET state = 'queued' WHERE recipient = ? AND state = 'claimed'",
                (recipient,),
            ).rowcount
            if count:
                writer.woken.append(recipient)
        return count

    def unacked_count(self, recipient: str) -> int:
        """How many messages wait for `recipient` (queued or claimed, not yet acked)."""
        with self.reading() as connection:
            (count,) = connection.execute(
                "SELECT count(*) FROM messages WHERE recipient = ? AND state != 'acked'",
                (recipient,),
            ).fetchone()
        return int(count)

    def messages(self, recipient: str | None = None) -> list[Envelope]:
        """Every stored message (of one recipient, if given), in sending order, any state."""
        with self.reading() as connection:
            if recipient is None:
                rows = connection.execute(
                    f"SELECT {_COLUMNS} FROM messages ORDER BY sequence"
                ).fetchall()
            else:
                rows = connection.execute(
                    f"SELECT {_COLUMNS} FROM messages WHERE recipient = ? ORDER BY sequence",
                    (recipient,),
                ).fetchall()
        return [_envelope(row) for row in rows]

    def close(self) -> None:
        """Close the connection (the file and its messages stay)."""
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Mailbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
