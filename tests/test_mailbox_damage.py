"""Damaged mailbox rows, planted the way an operator or an attacker would, on both engines.

Each row here is one no mailbox writes (wrong types, bytes that are not UTF-8,
an unknown state, a delivery count out of range, a name that breaks the name
rules, a NULL), planted past the schema's checks straight into a real mailbox
file or a real PostgreSQL database (tests/mailbox_damage.py). Every read of it
is a MailboxError `damaged_message` and changes nothing; a teammate moves it to
the dead letters, tells the Lead once, and goes on with the good messages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mailbox_damage import (
    NotUtf8,
    damage,
    damage_plans,
    good,
    plant,
    raw_dead_letters,
    raw_messages,
)
from team_backends import BACKENDS, PostgresTeamPlace, SqliteTeamPlace, TeamPlace, make_place
from team_fixtures import FakeAgent, team

from agent17.team.mailbox import Envelope, MailboxError, MessageState, TeamMailbox
from agent17.team.message_rows import MAX_DELIVERIES
from agent17.team.protocol import TeamProtocol, TextMessage
from agent17.team.teammate import Teammate, TickKind

HELLO = '{"content": "hello"}'


@dataclass(frozen=True)
class Damage:
    """One kind of damaged row: the values planted, and the engines that can hold them."""

    label: str
    values: dict[str, Any]
    engines: tuple[str, ...] = BACKENDS

    @property
    def state(self) -> Any:
        return self.values.get("state", "queued")


def _queued_and_claimed(label: str, **values: Any) -> list[Damage]:
    """The same damage in a queued row and in one claimed before a crash."""
    engines = values.pop("engines", BACKENDS)
    return [
        Damage(f"{label} (queued)", good(**values), engines),
        Damage(
            f"{label} (claimed)",
            good(**{"state": "claimed", "deliveries": 1, **values}),
            engines,
        ),
    ]


SQLITE = ("sqlite",)
DAMAGES = [
    *_queued_and_claimed("negative deliveries", deliveries=-5),
    *_queued_and_claimed("deliveries past any integer column", deliveries=2_147_483_647),
    *_queued_and_claimed("deliveries one past the most", deliveries=MAX_DELIVERIES + 1),
    Damage("queued after the most deliveries", good(deliveries=MAX_DELIVERIES)),
    Damage("claimed but never delivered", good(state="claimed", deliveries=0)),
    Damage("an unknown state", good(state="dead")),
    Damage("a state in capitals", good(state="QUEUED")),
    Damage("a NULL state", good(state=None)),
    *_queued_and_claimed("a sender with a newline", sender="lead\n"),
    *_queued_and_claimed("an empty sender", sender=""),
    *_queued_and_claimed("a blank kind", kind="   "),
    *_queued_and_claimed("a kind of 201 characters", kind="k" * 201),
    *_queued_and_claimed("a NULL body", body=None),
    *_queued_and_claimed("a NULL sender", sender=None),
    *_queued_and_claimed("NULL deliveries", deliveries=None),
    Damage("sequence zero", good(sequence=0)),
    Damage("a negative sequence", good(sequence=-3)),
    *_queued_and_claimed("a BLOB body", body=HELLO.encode(), engines=SQLITE),
    *_queued_and_claimed("a BLOB sender", sender=b"lead", engines=SQLITE),
    *_queued_and_claimed("a body that is not UTF-8", body=NotUtf8(b"\xff\xfe"), engines=SQLITE),
    *_queued_and_claimed(
        "a body with an encoded surrogate",
        body=NotUtf8(b'{"content": "\xed\xa0\x80"}'),
        engines=SQLITE,
    ),
    *_queued_and_claimed("a kind that is not UTF-8", kind=NotUtf8(b"te\xc3xt"), engines=SQLITE),
    *_queued_and_claimed("a body with a NUL", body='{"content": "a\x00b"}', engines=SQLITE),
    *_queued_and_claimed("a fractional delivery count", deliveries=1.5, engines=SQLITE),
    *_queued_and_claimed("a delivery count in words", deliveries="many", engines=SQLITE),
    Damage("a BLOB state", good(state=b"queued"), SQLITE),
    Damage("a state that is not UTF-8", good(state=NotUtf8(b"queu\xe9d")), SQLITE),
]
CASES = [
    pytest.param(backend, damaged, id=f"{backend}-{damaged.label}")
    for damaged in DAMAGES
    for backend in damaged.engines
]


def _place(backend: str, tmp_path: Path) -> Iterator[TeamPlace]:
    made = make_place(backend, tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    yield from _place(request.param, tmp_path)


def _naming(sequence: int) -> Envelope:
    """The envelope a holder of the row would ack (only sequence and recipient matter)."""
    return Envelope(sequence, "alice", "lead", "text", HELLO, MessageState.CLAIMED, 1)


def _reads(mailbox: TeamMailbox, sequence: int, damaged: Damage) -> dict[str, Callable[[], Any]]:
    """Every API that reads the damaged row, by name."""
    reads: dict[str, Callable[[], Any]] = {
        "messages()": mailbox.messages,
        "messages(alice)": lambda: mailbox.messages("alice"),
        "unacked_count": lambda: mailbox.unacked_count("alice"),
    }
    if sequence >= 1:  # a lower one cannot even be named in an envelope (invalid_envelope)
        reads["ack"] = lambda: mailbox.ack(_naming(sequence))
    if damaged.state == "queued":  # the oldest queued message: what a claim takes next
        reads["claim"] = lambda: mailbox.claim("alice")
    if damaged.state == "claimed":  # what a restarting teammate puts back
        reads["requeue_unacked"] = lambda: mailbox.requeue_unacked("alice")
    return reads


def _plant_ahead_of_a_good_message(place: TeamPlace, damaged: Damage) -> tuple[TeamMailbox, int]:
    # Opened first: a NULL in a NOT NULL column is found by SQLite's own check when a
    # file is opened (a refusal of the whole file); met by an open mailbox, it is a row.
    mailbox = place.mailbox()
    sequence = plant(place, damaged.values)
    mailbox.send("alice", sender="lead", kind="text", body='{"content": "behind it"}')
    return mailbox, sequence


@pytest.mark.parametrize(("backend", "damaged"), CASES)
def test_every_read_of_a_damaged_row_is_damaged_message_and_changes_nothing(
    backend: str, damaged: Damage, tmp_path: Path
) -> None:
    for place in _place(backend, tmp_path):
        mailbox, sequence = _plant_ahead_of_a_good_message(place, damaged)
        before = raw_messages(place)
        reads = _reads(mailbox, sequence, damaged)
        for name, read in reads.items():
            with pytest.raises(MailboxError) as refused:
                read()
            assert refused.value.code == "damaged_message", (name, refused.value)
            assert str(sequence) in refused.value.message, name
        assert raw_messages(place) == before
        assert raw_dead_letters(place) == []


@pytest.mark.parametrize(("backend", "damaged"), CASES)
def test_a_damaged_row_set_aside_keeps_its_values_and_never_comes_back(
    backend: str, damaged: Damage, tmp_path: Path
) -> None:
    for place in _place(backend, tmp_path):
        mailbox, sequence = _plant_ahead_of_a_good_message(place, damaged)
        (planted,) = [row for row in raw_messages(place) if _sequence(row) == sequence]

        (letter,) = mailbox.set_aside_damaged("alice")

        assert letter.sequence == sequence and letter.recipient == "alice"
        (kept,) = raw_dead_letters(place)
        assert {column: kept[column] for column in planted} == planted  # exactly as found
        assert _text(kept["reason"]) == letter.reason
        # The good message behind it is delivered; the damaged one never again.
        (behind,) = mailbox.messages()
        claimed = mailbox.claim("alice")
        assert claimed is not None and claimed.sequence == behind.sequence
        mailbox.ack(claimed)
        assert mailbox.claim("alice") is None
        assert mailbox.set_aside_damaged("alice") == []
        assert mailbox.unacked_count("alice") == 0
        assert place.integrity_problems() == []
        # Its number is not given out again.
        assert mailbox.send("alice", sender="lead", kind="text", body="{}").sequence > max(
            sequence, behind.sequence
        )


def _sequence(row: dict[str, Any]) -> Any:
    value = row["sequence"]
    return value[0] if isinstance(value, tuple) else value


def _text(value: Any) -> str:
    raw = value[0] if isinstance(value, tuple) else value
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def test_a_row_damaged_after_it_was_claimed_cannot_be_acked_and_stays_as_it_is(
    place: TeamPlace,
) -> None:
    with place.mailbox() as mailbox:
        mailbox.send("alice", sender="lead", kind="text", body=HELLO)
        claimed = mailbox.claim("alice")
        assert claimed is not None
        damage(place, claimed.sequence, {"deliveries": -5})
        before = raw_messages(place)
        with pytest.raises(MailboxError) as refused:
            mailbox.ack(claimed)
        assert refused.value.code == "damaged_message"
        with pytest.raises(MailboxError) as in_a_transaction:
            TeamProtocol(mailbox).send_text("lead", "done", sender="alice", ack=claimed)
        assert in_a_transaction.value.code == "damaged_message"
        assert raw_messages(place) == before  # the answer was rolled back with the ack


def test_the_schema_refuses_a_careless_hand_written_row_on_each_engine(place: TeamPlace) -> None:
    place.mailbox().close()
    rows: list[tuple[str, dict[str, Any]]] = [
        ("negative deliveries", good(deliveries=-5)),
        ("deliveries past the most", good(deliveries=MAX_DELIVERIES + 1)),
        ("queued with no delivery left", good(deliveries=MAX_DELIVERIES)),
        ("claimed never delivered", good(state="claimed", deliveries=0)),
        ("an unknown state", good(state="dead")),
    ]
    if isinstance(place, SqliteTeamPlace):
        rows += [
            ("a BLOB body", good(body=HELLO.encode())),
            ("a BLOB recipient", good(recipient=b"alice")),
            ("a fractional count", good(deliveries=1.5)),
        ]
    for label, values in rows:
        with pytest.raises(Exception) as refused:
            _insert_with_checks(place, values)
        assert "check" in str(refused.value).lower(), label
    assert raw_messages(place) == []


def _insert_with_checks(place: TeamPlace, values: dict[str, Any]) -> None:
    columns = ", ".join(values)
    if isinstance(place, SqliteTeamPlace):
        connection = sqlite3.connect(place.workspace / ".agent_tutorial" / "mailbox.sqlite3")
        try:
            connection.execute(
                f"INSERT INTO messages ({columns}) VALUES ({', '.join('?' * len(values))})",
                list(values.values()),
            )
            connection.commit()
        finally:
            connection.close()
        return
    assert isinstance(place, PostgresTeamPlace)
    with place.board.connection() as connection:
        connection.execute(
            f"INSERT INTO messages ({columns}) VALUES ({', '.join(['%s'] * len(values))})",
            list(values.values()),
        )


def _lead_texts(protocol: TeamProtocol) -> list[str]:
    return [
        d.message.content
        for d in protocol.receive_all("lead")
        if isinstance(d.message, TextMessage)
    ]


def _second_damage(place: TeamPlace) -> dict[str, Any]:
    # SQLite's own weakness (a BLOB where text belongs) where it has one.
    if isinstance(place, SqliteTeamPlace):
        return good(body=b'{"content": "smuggled"}')
    return good(sender="lead\n")


def test_a_teammate_sets_damaged_rows_aside_tells_the_lead_once_and_handles_the_rest_in_order(
    place: TeamPlace, tmp_path: Path
) -> None:
    with team(place.workspace, place=place) as crew:
        alice = crew.spawn("alice")  # running already: its passes meet the damage, not its start
        first = plant(place, good(deliveries=-5))
        crew.protocol.send_text("alice", "one", sender="lead")
        second = plant(place, _second_damage(place))
        crew.protocol.send_text("alice", "two", sender="lead")
        request = crew.protocol.request_shutdown("alice")

        outcomes = [alice.tick() for _ in range(6)]

        assert [o.kind for o in outcomes] == [
            TickKind.DEAD_LETTERED,
            TickKind.DEAD_LETTERED,
            TickKind.MESSAGE_HANDLED,
            TickKind.MESSAGE_HANDLED,
            TickKind.PROTOCOL_HANDLED,
            TickKind.CLOSED,
        ]
        assert [o.dead_letter.sequence for o in outcomes[:2] if o.dead_letter] == [first, second]
        assert "dead_lettered message" in outcomes[0].describe()
        assert [call.user_text for call in crew.agents["alice"].calls] == [
            "Message from lead:\none",
            "Message from lead:\ntwo",
        ]
        assert outcomes[4].message == request
        texts = _lead_texts(crew.protocol)
        reports = [text for text in texts if text.startswith("I set aside message")]
        assert [report.split()[4] for report in reports] == [str(first), str(second)]
        assert [m.state for m in crew.mailbox.messages("alice")] == [MessageState.ACKED] * 3
        assert [row["sequence"] for row in raw_dead_letters(place)] == [
            _raw_int(place, first),
            _raw_int(place, second),
        ]
        alice.leave()

    # Started again: nothing left to set aside, nothing reported again.
    with team(place.workspace, place=place) as restarted:
        again = restarted.spawn("alice")
        assert again.tick().kind is TickKind.IDLE
        assert restarted.protocol.receive_all("lead") == []
        assert len(raw_dead_letters(place)) == 2
        again.leave()
    assert place.integrity_problems() == []


def test_the_leads_inbox_sets_a_damaged_row_aside_once_and_delivers_the_rest(
    place: TeamPlace,
) -> None:
    mailbox = place.mailbox()
    damaged = plant(place, good(recipient="lead", sender="alice", deliveries=-5))
    mailbox.send("lead", sender="alice", kind="text", body='{"content": "behind it"}')
    protocol = TeamProtocol(mailbox)

    inbox = protocol.receive_all("lead")

    assert [None if d.error is None else d.error.code for d in inbox] == [
        "damaged_message",
        None,
    ]
    assert inbox[0].envelope.sequence == damaged and inbox[0].message is None
    assert inbox[1].message == TextMessage(content="behind it")
    assert protocol.receive_all("lead") == []  # reported once
    assert [row["sequence"] for row in raw_dead_letters(place)] == [_raw_int(place, damaged)]
    mailbox.close()


def _raw_int(place: TeamPlace, value: int) -> Any:
    return (value, b"integer") if isinstance(place, SqliteTeamPlace) else value


def test_a_damaged_row_claimed_before_a_crash_does_not_stop_the_next_start(
    place: TeamPlace, tmp_path: Path
) -> None:
    with team(place.workspace, place=place) as crew:
        crashing = Teammate(
            "alice",
            agent=FakeAgent("alice", fail_with=RuntimeError("killed mid-run")),
            protocol=crew.protocol,
            work_stealing=crew.work_stealing,
        )
        crew.protocol.send_text("alice", "summarise the board", sender="lead")
        with pytest.raises(RuntimeError):
            crashing.tick()
        crashing.leave()
        (claimed,) = crew.mailbox.messages("alice")
        damaged = plant(place, good(state="claimed", deliveries=-1))

    with team(place.workspace, place=place) as restarted:
        alice = restarted.spawn("alice")  # recovery: set aside, then requeue, one transaction
        outcomes = [alice.tick() for _ in range(3)]
        assert [o.kind for o in outcomes] == [
            TickKind.DEAD_LETTERED,
            TickKind.MESSAGE_HANDLED,
            TickKind.IDLE,
        ]
        assert outcomes[0].dead_letter is not None
        assert outcomes[0].dead_letter.sequence == damaged
        assert outcomes[1].envelope is not None
        assert (outcomes[1].envelope.sequence, outcomes[1].envelope.deliveries) == (
            claimed.sequence,
            2,
        )
        alice.leave()


def test_setting_a_row_aside_and_telling_the_lead_are_one_transaction(
    place: TeamPlace, tmp_path: Path
) -> None:
    with team(place.workspace, place=place) as crew:
        sequence = plant(place, good(deliveries=-5))
        before = raw_messages(place)
        # A Lead whose name no mailbox can store: the report fails inside the move.
        mute = TeamProtocol(crew.mailbox, lead_name="lead\n")
        with pytest.raises(MailboxError) as refused:
            Teammate(
                "alice", agent=FakeAgent("alice"), protocol=mute, work_stealing=crew.work_stealing
            )
        assert refused.value.code == "invalid_recipient"
        assert raw_messages(place) == before  # the row is where it was
        assert raw_dead_letters(place) == []
        alice = crew.spawn("alice")
        outcome = alice.tick()
        assert outcome.dead_letter is not None and outcome.dead_letter.sequence == sequence
        alice.leave()


def test_a_message_claimed_a_million_times_goes_to_the_dead_letters_without_a_check_failing(
    place: TeamPlace, tmp_path: Path
) -> None:
    with team(place.workspace, place=place) as crew:
        crew.protocol.send_text("alice", "poison", sender="lead")
        (queued,) = crew.mailbox.messages("alice")
        # One delivery short of the most: a state the schema allows, written with checks on.
        _update_with_checks(place, queued.sequence, MAX_DELIVERIES - 1)
        last = crew.mailbox.claim("alice")
        assert last is not None and last.deliveries == MAX_DELIVERIES
        # The teammate handling it dies; the message is claimed, never acked.

    with team(place.workspace, place=place) as restarted:
        alice = restarted.spawn("alice")
        outcome = alice.tick()
        assert outcome.kind is TickKind.DEAD_LETTERED
        assert outcome.dead_letter is not None
        assert f"{MAX_DELIVERIES:,} times" in outcome.dead_letter.reason
        assert alice.tick().kind is TickKind.IDLE
        alice.leave()
    assert place.integrity_problems() == []


def _update_with_checks(place: TeamPlace, sequence: int, deliveries: int) -> None:
    if isinstance(place, SqliteTeamPlace):
        connection = sqlite3.connect(place.workspace / ".agent_tutorial" / "mailbox.sqlite3")
        try:
            connection.execute(
                "UPDATE messages SET deliveries = ? WHERE sequence = ?", (deliveries, sequence)
            )
            connection.commit()
        finally:
            connection.close()
        return
    assert isinstance(place, PostgresTeamPlace)
    with place.board.connection() as connection:
        connection.execute(
            "UPDATE messages SET deliveries = %s WHERE sequence = %s", (deliveries, sequence)
        )


def test_a_damaged_plan_that_reads_approved_is_damaged_plan_and_keeps_the_gate_closed(
    place: TeamPlace,
) -> None:
    with team(place.workspace, place=place) as crew:
        crew.store.create_task("A")
        crew.protocol.submit_plan("alice", "do A")
        # "approved", but with a plan no mailbox stores: read as it is, it would open the gate.
        damage_plans(place, "alice", {"status": "approved", "plan": ""})
        for read in (lambda: crew.protocol.latest_plan("alice"), crew.protocol.plans):
            with pytest.raises(MailboxError) as refused:
                read()
            assert refused.value.code == "damaged_plan"
        assert crew.protocol.plan_allows_effectful("alice") is False
        alice = crew.spawn("alice")
        assert alice.tick().kind is TickKind.PLAN_BLOCKED  # no claim: the gate stays shut
        assert crew.store.list_tasks()[0].owner is None
        alice.leave()
