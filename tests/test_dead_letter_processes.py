"""A real `agent17 teammate` process meeting damaged rows in its queue, on both engines.

Before dead letters, a row like `deliveries = -5` ahead of the Lead's shutdown
request crashed the process at every start (a raw sqlite3.IntegrityError), and
the request behind it waited for ever. Here the process sets each damaged row
aside and says so in one line, handles the good messages in order, obeys the
shutdown and exits 0; started again, it has nothing more to report.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbox_damage import good, plant, raw_dead_letters
from team_backends import BACKENDS, SqliteTeamPlace, TeamPlace, make_place
from team_processes import Teammate, teammates

from agent17.team.protocol import ShutdownResponse, TeamProtocol, TextMessage

pytestmark = pytest.mark.processes
__all__ = ["teammates"]  # a fixture (team_processes.py)

FAST = ("--max-idle-polls", "2", "--poll-interval", "0.05")
LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} alice\[\d+\] ")


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    made = make_place(request.param, tmp_path)
    yield made
    made.close()


def _second_damage(place: TeamPlace) -> dict[str, Any]:
    # Where SQLite is weak (any value in any column), a BLOB where the body's text belongs.
    if isinstance(place, SqliteTeamPlace):
        return good(body=b'{"content": "smuggled"}')
    return good(sender="lead\n", body='{"content": "smuggled"}')


def _position(lines: list[str], fragment: str) -> int:
    (index,) = [n for n, line in enumerate(lines) if fragment in line]
    return index


def test_a_teammate_process_sets_damaged_rows_aside_once_and_obeys_the_shutdown_behind_them(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    with place.mailbox() as mailbox:
        protocol = TeamProtocol(mailbox)
        first = plant(place, good(deliveries=-5))
        protocol.send_text("alice", "one", sender="lead")
        second = plant(place, _second_damage(place))
        request = protocol.request_shutdown("alice")

    alice = teammates(place.workspace, "alice", *place.cli, *FAST)
    assert alice.finish() == 0, alice.errors
    assert alice.errors == []
    assert all(LINE.match(line) for line in alice.seen), alice.seen  # one line each
    lines = alice.seen
    first_report = _position(lines, f"dead_lettered message {first} ")
    second_report = _position(lines, f"dead_lettered message {second} ")
    handled = _position(lines, "message_handled from lead")
    shutdown = _position(lines, "protocol_handled shutdown_request from lead")
    assert first_report < second_report < handled < shutdown  # a pass each, in order
    assert "deliveries is -5" in lines[first_report]
    assert "shut down through the protocol" in lines[-1]
    assert [letter["sequence"] for letter in raw_dead_letters(place)] == [
        (first, b"integer") if isinstance(place, SqliteTeamPlace) else first,
        (second, b"integer") if isinstance(place, SqliteTeamPlace) else second,
    ]

    with place.mailbox() as mailbox:
        protocol = TeamProtocol(mailbox)
        inbox = [delivery.message for delivery in protocol.receive_all("lead")]
        reports = [
            m.content for m in inbox if isinstance(m, TextMessage) and "set aside" in m.content
        ]
        assert [report.split()[4] for report in reports] == [str(first), str(second)]
        assert TextMessage(content="Acknowledged.") in inbox
        assert ShutdownResponse(request_id=request.request_id, approved=True) in inbox

        again = teammates(place.workspace, "alice", *place.cli, *FAST)
        assert again.finish() == 0, again.errors
        assert not any("dead_lettered" in line for line in again.seen), again.seen
        assert "idle timeout" in again.seen[-1]
        assert protocol.receive_all("lead") == []  # nothing reported twice
        assert mailbox.unacked_count("alice") == 0
    assert place.integrity_problems() == []
