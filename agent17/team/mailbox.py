"""The team's persistent mailbox: claim-then-ack delivery, wakeable recipients, on either engine.

By default messages live in `<workspace>/.agent_tutorial/mailbox.sqlite3`
(schema: `team/schema.sql`, which also holds the plans of the plan gate and the
team's members), apart from `tasks.sqlite3`: task state and team messages are
two separate state machines (a report about a task never stands in for
completing it). `PostgresMailbox` (team/pg_mailbox.py) keeps the same tables in
the board's PostgreSQL database, for a team spread over many hosts.

A message moves queued -> claimed -> acked. A recipient claims one message,
handles it, then acks it; if the process dies in between, the message is still
`claimed` and `requeue_unacked()` delivers it again when that teammate starts.
Every row read is checked against the rules of a stored message
(team/message_rows.py): one that breaks them is refused (`damaged_message`),
and `set_aside_damaged()` moves such rows of one recipient's queue to
`dead_letters`, so they no longer stand in front of the good ones.
Sending also sets the recipient's in-process wake event, so a sleeping
teammate rescans at once instead of waiting out its poll interval.

`TeamMailbox` is what the protocol, the registry and the teammates use: every
operation is written once, in SQL both engines run (qmark parameters), over the
small surface each engine implements (a write transaction, a read, a hold on a
teammate's name).
"""

from __future__ import annotations

import os
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, Self, TypeVar, cast

from agent17.armour.schema_file import Schema
from agent17.armour.state_file import ExclusiveHold, StateFile
from agent17.domain import ErrorCode, text_problem
from agent17.store.sqlite import transaction
from agent17.team.envelopes import (
    DamagedMessage,
    Envelope,
    MailboxCode,
    MailboxError,
    MessageState,
    require_envelope,
    require_name,
)
from agent17.team.message_rows import (
    MAX_DELIVERIES,
    DeadLetter,
    dead_letter,
    message_row_problem,
    reason_to_set_aside,
    stored_text,
)
from agent17.team.wakeups import WakeRegistry

MAILBOX_DB_NAME: Final = "mailbox.sqlite3"
TEAM_SCHEMA: Final = Schema(
    package="agent17.team",
    sql_file="schema.sql",
    version="4",
    metadata_table="mailbox_metadata",
    what="agent17 team mailbox",
)

T = TypeVar("T")

__all__ = [  # what a message is lives in envelopes.py; every user of the mailbox imports it here
    "DamagedMessage",
    "Envelope",
    "MailboxCode",
    "MailboxError",
    "MessageState",
    "require_envelope",
    "require_name",
]


_COLUMNS: Final = "sequence, recipient, sender, kind, body, state, deliveries"
_STATES: Final = frozenset(state.value for state in MessageState)
# The rows of one recipient that are not handled yet: a NULL or unknown state counts,
# so a row damaged in its state is still found in its recipient's queue.
_IN_QUEUE: Final = "recipient = ? AND coalesce(state, '') <> 'acked'"

StoredRow = tuple[object, ...]
_SoundRow = tuple[int, str, str, str, str, str, int]
RowReader = Callable[["SqlRunner", str, tuple[object, ...]], list[StoredRow]]
"""Runs a query on a connection and returns its rows with every value as stored."""


def _envelope(row: StoredRow) -> Envelope:
    problem = message_row_problem(row, _STATES)
    if problem is not None:
        raise DamagedMessage(row[0], problem)
    sequence, recipient, sender, kind, body, state, deliveries = cast(_SoundRow, row)
    return Envelope(sequence, recipient, sender, kind, body, MessageState(state), deliveries)


def plain_rows(connection: SqlRunner, sql: str, parameters: tuple[object, ...]) -> list[StoredRow]:
    """The rows of a query as the driver gives them (an engine that decodes nothing itself)."""
    return [tuple(row) for row in connection.execute(sql, parameters).fetchall()]


class SqlRunner(Protocol):
    """What the team's SQL runs on: `execute(sql, parameters)` with qmark (`?`) parameters.

    A `sqlite3.Connection` is one; on PostgreSQL an adapter over the open transaction.
    The cursor it returns has `fetchone()`, `fetchall()` and `rowcount`.
    """

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...


class NameHold(Protocol):
    """A live worker's hold on a teammate name (a lock the engine drops when it dies)."""

    def release(self) -> None:
        """Let the name go (idempotent)."""

    def lost(self) -> str | None:
        """None while the name is still held; otherwise why it no longer is."""


@dataclass(slots=True)
class MailboxTransaction:
    """The handle of one write transaction: send and ack inside it, wake after commit.

    `connection` runs the team's SQL inside this transaction (a SqlRunner);
    `read` is the engine's way to read message rows with every value as stored.
    """

    connection: SqlRunner
    woken: list[str] = field(default_factory=list)
    read: RowReader = plain_rows

    def _one(self, sql: str, parameters: tuple[object, ...]) -> StoredRow | None:
        rows = self.read(self.connection, sql, parameters)
        return rows[0] if rows else None

    def send(self, recipient: str, *, sender: str, kind: str, body: str) -> Envelope:
        """Queue a message in this transaction; its recipient is woken once it commits."""
        require_name(recipient, "recipient")
        require_name(sender, "sender")
        require_name(kind, "kind")
        problem = text_problem(body)
        if problem is not None:
            raise MailboxError(MailboxCode.INVALID_MESSAGE_BODY, f"body {problem}")
        row = self._one(
            f"INSERT INTO messages (recipient, sender, kind, body) VALUES (?, ?, ?, ?)"
            f" RETURNING {_COLUMNS}",
            (recipient, sender, kind, body),
        )
        self.woken.append(recipient)
        return _envelope(cast(StoredRow, row))

    def claim(self, recipient: str) -> Envelope | None:
        """Take the oldest queued message of `recipient` (it becomes claimed), or None.

        The row is checked before it is changed: a damaged one is refused as it is.
        """
        require_name(recipient, "recipient")
        row = self._one(
            f"SELECT {_COLUMNS} FROM messages WHERE recipient = ? AND state = 'queued'"
            " ORDER BY sequence LIMIT 1",
            (recipient,),
        )
        if row is None:
            return None
        queued = _envelope(row)
        claimed = self._one(
            "UPDATE messages SET state = 'claimed', deliveries = deliveries + 1"
            f" WHERE sequence = ? RETURNING {_COLUMNS}",
            (queued.sequence,),
        )
        return _envelope(cast(StoredRow, claimed))

    def ack(self, envelope: Envelope) -> None:
        """Mark a claimed message as handled; it will never be delivered again."""
        require_envelope(envelope)
        row = self._one(
            f"SELECT {_COLUMNS} FROM messages WHERE sequence = ? AND recipient = ?",
            (envelope.sequence, envelope.recipient),
        )
        if row is None or _envelope(row).state is not MessageState.CLAIMED:
            raise MailboxError(
                MailboxCode.MESSAGE_NOT_CLAIMED,
                f"message {envelope.sequence} to {envelope.recipient!r} is not currently claimed",
            )
        self.connection.execute(
            "UPDATE messages SET state = 'acked' WHERE sequence = ?", (envelope.sequence,)
        )

    def requeue_unacked(self, recipient: str) -> int:
        """Put `recipient`'s claimed-but-never-acked messages back in the queue; return how many.

        One that has had its MAX_DELIVERIES deliveries stays claimed: it is not
        delivered again (`set_aside_damaged` moves it to the dead letters).
        """
        require_name(recipient, "recipient")
        for row in self.read(
            self.connection,
            f"SELECT {_COLUMNS} FROM messages WHERE recipient = ? AND state = 'claimed'",
            (recipient,),
        ):
            _envelope(row)
        count = self.connection.execute(
            "UPDATE messages SET state = 'queued'"
            " WHERE recipient = ? AND state = 'claimed' AND deliveries < ?",
            (recipient, MAX_DELIVERIES),
        ).rowcount
        if count:
            self.woken.append(recipient)
        return int(count)

    def set_aside_damaged(self, recipient: str) -> list[DeadLetter]:
        """Move every damaged row of `recipient`'s queue to `dead_letters`; return them.

        The queue is every row addressed to `recipient` that is not acked (a
        row whose state is damaged included). A claimed message that has had
        its MAX_DELIVERIES deliveries goes too: it can never be delivered again.
        Each row is copied as it was found, then deleted from `messages`, so it
        never comes back from `claim`.
        """
        require_name(recipient, "recipient")
        rows = self.read(
            self.connection,
            f"SELECT {_COLUMNS} FROM messages WHERE {_IN_QUEUE} ORDER BY sequence",
            (recipient,),
        )
        letters = []
        for row in rows:
            reason = reason_to_set_aside(row, _STATES)
            if reason is not None:
                letters.append(dead_letter(self.connection.execute, row, recipient, reason))
        return letters


class TeamMailbox(ABC):
    """The team's mailbox (with its plans and members) on one engine: every operation.

    An engine implements four things: a write transaction (`_write`), a read
    (`snapshot`), a hold on a teammate's name, and `close`. Safe to share between
    threads; several instances, in one or many processes, may share one mailbox.
    Wake-ups are in-process: share one `WakeRegistry` (or one mailbox) within a
    process; across processes each engine has its own way (team/sleepers.py,
    team/pg_wakeups.py).
    """

    wakeups: WakeRegistry
    where: str
    """Where the mailbox is, for messages (a path, or a database without its password)."""

    @abstractmethod
    def _write(self, operation: Callable[[SqlRunner], T]) -> T:
        """Run `operation` in one write transaction, serialised with every other writer."""

    @abstractmethod
    def snapshot(self, operation: Callable[[SqlRunner], T]) -> T:
        """Run read-only `operation`; each of its statements sees committed data only."""

    @abstractmethod
    def hold_member(self, name: str) -> NameHold:
        """Hold teammate `name` for this process's worker (MailboxError `already_held`)."""

    @abstractmethod
    def member_is_held(self, name: str) -> bool:
        """True if a live worker, in this process or any other, holds `name` right now."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection (the messages stay)."""

    def transaction(self, operation: Callable[[MailboxTransaction], T]) -> T:
        """Run `operation` in one write transaction; its recipients are woken after it commits."""
        woken: list[str] = []

        def run(connection: SqlRunner) -> T:
            return operation(MailboxTransaction(connection, woken, self._read_rows))

        # Read only once the commit is done: a rolled-back transaction wakes nobody.
        result = self._write(run)
        for recipient in woken:
            self.wakeups.wake(recipient)
        return result

    def send(self, recipient: str, *, sender: str, kind: str, body: str) -> Envelope:
        """Queue one message (body: a JSON object as text) and wake its recipient."""
        return self.transaction(
            lambda handle: handle.send(recipient, sender=sender, kind=kind, body=body)
        )

    def _read_rows(
        self, connection: SqlRunner, sql: str, parameters: tuple[object, ...]
    ) -> list[StoredRow]:
        """Run a message query; every value comes back as stored, for the rules to judge."""
        return plain_rows(connection, sql, parameters)

    def claim(self, recipient: str) -> Envelope | None:
        """Take the oldest queued message of `recipient` (it becomes claimed), or None.

        A damaged oldest message is refused (DamagedMessage) and left as it is.
        """
        return self.transaction(lambda handle: handle.claim(recipient))

    def ack(self, envelope: Envelope) -> None:
        """Mark a claimed message as handled (error `message_not_claimed` otherwise)."""
        self.transaction(lambda handle: handle.ack(envelope))

    def requeue_unacked(self, recipient: str) -> int:
        """Put `recipient`'s claimed-but-never-acked messages back in the queue; return how many.

        Call it only when nobody is handling `recipient`'s messages (a teammate starting).
        """
        return self.transaction(lambda handle: handle.requeue_unacked(recipient))

    def set_aside_damaged(self, recipient: str) -> list[DeadLetter]:
        """Move the damaged rows of `recipient`'s queue to `dead_letters`, in one transaction."""
        return self.transaction(lambda handle: handle.set_aside_damaged(recipient))

    def unacked_count(self, recipient: str) -> int:
        """How many messages wait for `recipient` (queued or claimed, not yet acked)."""
        require_name(recipient, "recipient")
        rows = self.snapshot(
            lambda connection: self._read_rows(
                connection, f"SELECT {_COLUMNS} FROM messages WHERE {_IN_QUEUE}", (recipient,)
            )
        )
        return len([_envelope(row) for row in rows])

    def messages(self, recipient: str | None = None) -> list[Envelope]:
        """Every stored message (of one recipient, if given), in sending order, any state."""
        where = ""
        parameters: tuple[object, ...] = ()
        if recipient is not None:
            require_name(recipient, "recipient")
            where, parameters = "WHERE recipient = ?", (recipient,)
        rows = self.snapshot(
            lambda connection: self._read_rows(
                connection, f"SELECT {_COLUMNS} FROM messages {where} ORDER BY sequence", parameters
            )
        )
        return [_envelope(row) for row in rows]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _FileHold:
    """A teammate's name held as a lock file; the kernel keeps it until the process ends."""

    def __init__(self, hold: ExclusiveHold) -> None:
        self._hold = hold

    def release(self) -> None:
        self._hold.release()

    def lost(self) -> str | None:
        return None  # an open file's flock cannot be taken away from a live process


class Mailbox(TeamMailbox):
    """Persistent per-agent mailboxes in `<workspace>/.agent_tutorial/mailbox.sqlite3`.

    Safe to share between threads (one connection behind a lock); several
    instances, in one or many processes, may share the file. Wake-ups are
    in-process only: share one `WakeRegistry` (or one Mailbox) within a process.
    """

    def __init__(
        self, workspace: str | os.PathLike[str], *, wakeups: WakeRegistry | None = None
    ) -> None:
        self._file = StateFile(workspace, MAILBOX_DB_NAME, TEAM_SCHEMA, MailboxError)
        self.path: Path = self._file.path
        self.workspace: Path = self._file.workspace
        self.where = str(self.path)
        self.wakeups: WakeRegistry = wakeups if wakeups is not None else WakeRegistry()

    def _write(self, operation: Callable[[SqlRunner], T]) -> T:
        return self._file.guarded(transaction, operation, "BEGIN IMMEDIATE")

    def snapshot(self, operation: Callable[[SqlRunner], T]) -> T:
        """Run read-only `operation` on one consistent snapshot of the file."""
        return self._file.guarded(transaction, operation, "BEGIN")

    def _read_rows(
        self, connection: SqlRunner, sql: str, parameters: tuple[object, ...]
    ) -> list[StoredRow]:
        # SQLite hands back a TEXT value that is not UTF-8 as an error for the whole
        # query. Decoding it ourselves, for these rows only (we run under the file's
        # lock), names the one damaged row and keeps every other readable.
        sqlite_connection = cast(sqlite3.Connection, connection)
        before = sqlite_connection.text_factory
        try:
            sqlite_connection.text_factory = stored_text
            return plain_rows(connection, sql, parameters)
        finally:
            sqlite_connection.text_factory = before

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the mailbox."""
        return self._file.data_version()

    def hold_exclusive(self, key: str) -> ExclusiveHold:
        """Hold the lock file `key` while this process lives (see StateFile)."""
        return self._file.hold_exclusive(key)

    def hold_member(self, name: str) -> NameHold:
        """Hold `teammate-<name>.lock` beside the mailbox while this worker lives."""
        return _FileHold(self.hold_exclusive(f"teammate-{name}"))

    def member_is_held(self, name: str) -> bool:
        """Try the name's lock file and let it go at once: held means a live worker has it."""
        try:
            self.hold_exclusive(f"teammate-{name}").release()
        except MailboxError as error:
            if error.code == ErrorCode.ALREADY_HELD:
                return True
            raise
        return False

    def close(self) -> None:
        """Close the connection (the file and its messages stay)."""
        self._file.close()
