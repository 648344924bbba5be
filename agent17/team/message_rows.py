"""The rules a stored mailbox message obeys, checked on every read, and the dead letters.

Every message a mailbox writes has a valid recipient, sender and kind (the
name rules), a body that is text, one of the three states and a plausible
delivery count. The schema's CHECK constraints say what SQL can say on each
engine, but a row can still be planted by hand past them (SQLite's
`PRAGMA ignore_check_constraints`, a PostgreSQL constraint dropped for a
moment), and SQLite's loose typing keeps a BLOB in a TEXT column. So every
read checks each row against these rules: a row that breaks one is no message
the mailbox wrote, and it is refused (`damaged_message`) instead of becoming a
wrong-typed Envelope or a driver error further on.

A teammate that meets one in its own queue moves it to `dead_letters` (values
kept exactly as found) and goes on with the rest: a row nobody can read must
not hold up the good messages behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final, TypeGuard

from agent17.domain import name_problem, preview, text_problem

MAX_DELIVERIES: Final = 1_000_000
"""The most times one message is delivered. Every delivery after the first is a
teammate restarting with the message claimed, so a count near this is no real
history: far past any, and far below what either engine's integer column holds,
so delivering once more can never overflow."""

MAX_SEQUENCE: Final = 2**63 - 1


class UndecodableText(bytes):
    """The bytes of a stored TEXT value that is not UTF-8 (SQLite keeps whatever it is given)."""


def stored_text(raw: bytes) -> str | UndecodableText:
    """A TEXT value as stored: its string, or its bytes marked as undecodable.

    SQLite's own decoding raises for the whole query; this way one bad row is
    found and named, and the rows around it stay readable.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return UndecodableText(raw)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A stored message set aside unread, and why: it broke the rules of a stored message."""

    sequence: int
    recipient: str
    sender: str | None
    """Who sent it, when that much of the row is a valid name (None otherwise)."""
    reason: str


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    if isinstance(value, UndecodableText):
        return f"text that is not UTF-8 ({preview(bytes(value))})"
    return preview(value)


def _field_problem(what: str, value: object, problem: str | None) -> str | None:
    if isinstance(value, UndecodableText):
        return f"its {what} is {_shown(value)}"
    return None if problem is None else f"its {what} {problem}: {_shown(value)}"


def message_row_problem(row: Sequence[object], states: Collection[str]) -> str | None:
    """Why a stored message row (the mailbox's columns, in order) is damaged, or None.

    `states`: the states a stored message may be in.
    """
    sequence, recipient, sender, kind, body, state, deliveries = row
    if not _is_count(sequence) or not 1 <= sequence <= MAX_SEQUENCE:
        return f"its sequence is {_shown(sequence)}"
    for what, value in (("recipient", recipient), ("sender", sender), ("kind", kind)):
        problem = _field_problem(what, value, name_problem(value))
        if problem is not None:
            return problem
    problem = _field_problem("body", body, text_problem(body))
    if problem is not None:
        return problem
    if not isinstance(state, str) or state not in states:
        return f"its state is {_shown(state)}, not one of {', '.join(sorted(states))}"
    if not _is_count(deliveries) or not 0 <= deliveries <= MAX_DELIVERIES:
        return f"its deliveries is {_shown(deliveries)}, not a count from 0 to {MAX_DELIVERIES:,}"
    if state == "queued" and deliveries == MAX_DELIVERIES:
        return f"it is queued after {MAX_DELIVERIES:,} deliveries, the most a message gets"
    if state != "queued" and deliveries == 0:
        return f"it is {state} but was never delivered"
    return None


def reason_to_set_aside(row: Sequence[object], states: Collection[str]) -> str | None:
    """Why a row of a recipient's queue goes to the dead letters, or None if it stays.

    A damaged row goes, and so does a claimed one that has had its
    MAX_DELIVERIES deliveries: it can never be delivered again.
    """
    problem = message_row_problem(row, states)
    if problem is None and row[5] == "claimed" and row[6] == MAX_DELIVERIES:
        return f"it was delivered {MAX_DELIVERIES:,} times and never acked"
    return problem


def dead_letter(
    execute: Callable[[str, tuple[object, ...]], object],
    row: Sequence[object],
    recipient: str,
    reason: str,
) -> DeadLetter:
    """Move a row of `recipient`'s queue to `dead_letters`, inside the caller's transaction.

    Copied by SQL, not through Python, so the values are kept exactly as found
    (a BLOB stays a BLOB, bytes that are not UTF-8 stay those bytes); then the
    row leaves `messages`, so no read meets it again.
    """
    sequence = row[0]
    assert isinstance(sequence, int)  # an integer primary key on both engines
    execute(
        "INSERT INTO dead_letters (sequence, recipient, sender, kind, body, state, deliveries,"
        " reason) SELECT sequence, recipient, sender, kind, body, state, deliveries, ?"
        " FROM messages WHERE sequence = ?",
        (reason, sequence),
    )
    execute("DELETE FROM messages WHERE sequence = ?", (sequence,))
    sender = row[2]
    readable = sender if isinstance(sender, str) and name_problem(sender) is None else None
    return DeadLetter(sequence, recipient, readable, reason)
