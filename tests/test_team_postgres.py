"""The team on PostgreSQL: wake-ups through LISTEN/NOTIFY, the listener's reconnect, names as locks.

What holds on both engines is tested on both (test_mailbox, test_protocol,
test_teammate_processes, ...); here is what only PostgreSQL has: notifications
sent by the transaction that makes a task ready or queues a message, a
listening session that comes back after `pg_terminate_backend`, a lease
deadline measured on the server's clock, a teammate's name held as a
session-level advisory lock, and the team's tables beside the board's in one
database, each with its own version.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pg_cluster
import pytest
from team_backends import PostgresTeamPlace
from team_processes import Teammate, teammates, wait_until

from agent17 import PostgresTaskStore
from agent17.team.mailbox import MailboxError, MailboxTransaction
from agent17.team.pg_mailbox import BOARD_CHANNEL, MAIL_CHANNEL, PostgresMailbox
from agent17.team.pg_wakeups import NotifySleeper
from agent17.team.protocol import TeamProtocol
from agent17.team.registry import TeamError, TeamRegistry

__all__ = ["teammates"]  # a fixture (team_processes.py)

POLL = 30.0
WELL_BEFORE_THE_POLL = 10.0


@pytest.fixture
def place(tmp_path: Path) -> Iterator[PostgresTeamPlace]:
    made = PostgresTeamPlace(tmp_path, pg_cluster.server())
    yield made
    made.close()


def sleeper_for(
    place: PostgresTeamPlace,
    name: str,
    store: PostgresTaskStore,
    *,
    lease_left: Callable[[], float | None] | None = None,
) -> NotifySleeper:
    listener = place.mailbox().listen()
    sleeper = NotifySleeper(
        listener,
        name,
        board_channel=BOARD_CHANNEL,
        mail_channel=MAIL_CHANNEL,
        lease_left=lease_left or store.seconds_to_next_lease_expiry,
    )
    sleeper.mark()
    return sleeper


def wait_in_a_thread(
    sleeper: NotifySleeper, seconds: float
) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def wait() -> None:
        started = time.monotonic()
        result["woken"] = sleeper.wait(seconds, threading.Event())
        result["took"] = time.monotonic() - started
        result["reason"] = sleeper.last_reason

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, result


def _message_to_alice(place: PostgresTeamPlace, store: Any) -> None:
    place.mailbox().send("alice", sender="lead", kind="text", body="{}")


def _ready_task(place: PostgresTeamPlace, store: Any) -> None:
    store.create_task("ready at once")


def _unblocked_task(place: PostgresTeamPlace, store: Any) -> None:
    claim = store.claim_next("bob")
    store.complete_task(claim.task.id, "bob", claim.claim_token)


def _lease_released_by_someone_else(place: PostgresTeamPlace, store: Any) -> None:
    place.raw_store().list_tasks()  # any operation releases the leases that ran out


@pytest.mark.parametrize(
    "change",
    [_message_to_alice, _ready_task, _unblocked_task, _lease_released_by_someone_else],
    ids=["message", "created ready", "unblocked", "lease released"],
)
def test_a_notification_wakes_a_sleeping_teammate_long_before_a_30_s_poll(
    place: PostgresTeamPlace, change: Callable[[PostgresTeamPlace, Any], None]
) -> None:
    other = place.raw_store(lease_seconds=0.2 if change is _lease_released_by_someone_else else 60)
    if change is _unblocked_task:
        first = other.create_task("first")
        other.create_task("second", blocked_by=[first.id])
    if change is _lease_released_by_someone_else:
        other.create_task("leased")
        claim = other.claim_next("carol")
        wait_until(
            lambda: (
                other.seconds_to_next_lease_expiry() is None
                or other.seconds_to_next_lease_expiry() <= 0
            ),
            "the lease ran out on the server's clock",
        )
        assert claim is not None
    # A lease deadline would end the wait too: here only the notification may.
    sleeper = sleeper_for(place, "alice", place.raw_store(), lease_left=lambda: None)
    thread, result = wait_in_a_thread(sleeper, POLL)
    change(place, other)
    thread.join(POLL + 5)
    assert result["woken"] is True, result
    assert result["reason"] == "notified"
    assert result["took"] < WELL_BEFORE_THE_POLL


def test_what_does_not_concern_a_teammate_does_not_wake_it(place: PostgresTeamPlace) -> None:
    store = place.raw_store()
    first = store.create_task("first")
    mailbox = place.mailbox()
    sleeper = sleeper_for(place, "alice", store)

    def send_then_fail(handle: MailboxTransaction) -> None:
        handle.send("alice", sender="lead", kind="text", body="{}")
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        mailbox.transaction(send_then_fail)  # never committed: never announced
    mailbox.send("bob", sender="lead", kind="text", body="{}")  # someone else's mail
    store.create_task("blocked", blocked_by=[first.id])  # created, but not ready
    assert sleeper.wait(0.5, threading.Event()) is False
    assert sleeper.last_reason == "poll interval"


def test_a_lease_deadline_on_the_servers_clock_ends_the_wait(place: PostgresTeamPlace) -> None:
    store = place.raw_store(lease_seconds=0.5)
    store.create_task("A")
    store.claim_next("carol")
    left = store.seconds_to_next_lease_expiry()
    assert left is not None and 0 < left <= 0.5
    sleeper = sleeper_for(place, "alice", store)
    started = time.monotonic()
    assert sleeper.wait(POLL, threading.Event()) is True
    assert sleeper.last_reason == "lease ran out"
    assert time.monotonic() - started < WELL_BEFORE_THE_POLL
    claim = store.claim_next("alice")  # the next pass releases it and takes it
    assert claim is not None and claim.task.subject == "A"


def _terminate(place: PostgresTeamPlace, pid: int) -> None:
    with place.board.connection() as connection:
        connection.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


def test_the_listener_reconnects_after_pg_terminate_backend_and_still_hears(
    place: PostgresTeamPlace,
) -> None:
    store = place.raw_store()
    sleeper = sleeper_for(place, "alice", store)
    listener = sleeper.listener
    before = listener.backend_pid
    assert before is not None
    _terminate(place, before)
    # The lost session is a wake of its own: whatever was sent meanwhile went unheard.
    assert sleeper.wait(POLL, threading.Event()) is True
    assert sleeper.last_reason == "listener reconnected"
    assert listener.reconnects == 1
    assert listener.backend_pid not in (None, before)
    sleeper.mark()
    thread, result = wait_in_a_thread(sleeper, POLL)
    place.mailbox().send("alice", sender="lead", kind="text", body="{}")
    thread.join(POLL + 5)
    assert (result["woken"], result["reason"]) == (True, "notified")
    assert result["took"] < WELL_BEFORE_THE_POLL


def test_a_teammate_process_whose_listener_is_terminated_listens_again_and_still_wakes(
    place: PostgresTeamPlace, teammates: Callable[..., Teammate]
) -> None:
    protocol = TeamProtocol(place.mailbox())
    alice = teammates(
        place.workspace, "alice", *place.cli, "--poll-interval", "30", "--max-idle-polls", "5"
    )
    alice.wait_for_line("joined the team")
    (listener,) = pg_cluster.backend_pids(place.dsn, "agent17 listener")
    _terminate(place, listener)
    wait_until(
        lambda: pg_cluster.backend_pids(place.dsn, "agent17 listener") not in ([], [listener]),
        "alice listened again on a new session",
    )
    protocol.send_text("alice", "Still there?", sender="lead")
    took = wait_until(lambda: protocol.mailbox.unacked_count("lead") == 1, "alice answered")
    assert took < WELL_BEFORE_THE_POLL
    protocol.request_shutdown("alice")
    assert alice.finish() == 0, alice.errors


def test_a_name_is_a_session_lock_the_server_drops_with_its_session(
    place: PostgresTeamPlace,
) -> None:
    first, second = TeamRegistry(place.mailbox()), TeamRegistry(place.mailbox())
    held = first.join("alice")
    with pytest.raises(TeamError) as refused:
        second.join("alice")
    assert refused.value.code == "teammate_running"
    assert second.is_live("alice") and not second.is_live("bob")
    held.ensure()  # still held
    (session,) = pg_cluster.backend_pids(place.dsn, "agent17 teammate alice")
    _terminate(place, session)
    with pytest.raises(TeamError) as lost:
        held.ensure()
    assert lost.value.code == "teammate_name_lost"
    assert not second.is_live("alice")
    second.join("alice").leave()
    held.leave()


def test_a_teammate_process_that_loses_its_name_stops_with_one_line(
    place: PostgresTeamPlace, teammates: Callable[..., Teammate]
) -> None:
    alice = teammates(
        place.workspace, "alice", *place.cli, "--poll-interval", "0.2", "--max-idle-polls", "1000"
    )
    alice.wait_for_line("joined the team")
    (session,) = pg_cluster.backend_pids(place.dsn, "agent17 teammate alice")
    _terminate(place, session)
    assert alice.finish() == 1
    assert len(alice.errors) == 1 and "teammate_name_lost" in alice.errors[0], alice.errors


def test_the_team_and_the_board_share_one_database_each_with_its_own_version(
    place: PostgresTeamPlace,
) -> None:
    mailbox = place.mailbox()
    mailbox.send("alice", sender="lead", kind="text", body="{}")
    store = place.raw_store()  # the board's schema joins the team's, and checks only its own
    store.create_task("A")
    again = place.mailbox()
    assert [m.recipient for m in again.messages()] == ["alice"]
    with place.board.connection() as connection:
        versions = connection.execute(
            "SELECT 'board', value FROM task_metadata UNION ALL SELECT 'team', value"
            " FROM team_metadata ORDER BY 1"
        ).fetchall()
    assert versions == [("board", "3"), ("team", "2")]
    assert place.integrity_problems() == []


def _snapshot(place: PostgresTeamPlace) -> list[Any]:
    with place.board.connection() as connection:
        return (
            connection.execute(
                "SELECT c.relname, c.relkind FROM pg_class c"
                " WHERE c.relnamespace = 'agent17'::regnamespace ORDER BY 1"
            ).fetchall()
            + connection.execute("SELECT key, value FROM team_metadata ORDER BY key").fetchall()
        )


def test_a_team_of_another_schema_version_is_refused_untouched(place: PostgresTeamPlace) -> None:
    place.mailbox().close()
    with place.board.connection() as connection:
        connection.execute("UPDATE team_metadata SET value = '99'")
    before = _snapshot(place)
    with pytest.raises(MailboxError) as refused:
        PostgresMailbox(place.dsn)
    assert refused.value.code == "schema_version_mismatch"
    assert "'99'" in refused.value.message
    assert _snapshot(place) == before


def test_another_programs_messages_table_is_refused_untouched(place: PostgresTeamPlace) -> None:
    with place.board.connection() as connection:
        connection.execute("CREATE SCHEMA agent17")
        connection.execute("CREATE TABLE messages (id integer, text text)")
        connection.execute("INSERT INTO messages VALUES (1, 'hello from another app')")
    with pytest.raises(MailboxError) as refused:
        PostgresMailbox(place.dsn)
    assert refused.value.code == "schema_version_mismatch"
    with place.board.connection() as connection:
        tables = connection.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'agent17'::regnamespace"
        ).fetchall()
        rows = connection.execute("SELECT * FROM messages").fetchall()
    assert tables == [("messages",)] and rows == [(1, "hello from another app")]


def test_a_mailbox_whose_connection_was_dropped_between_operations_reconnects_unseen(
    place: PostgresTeamPlace,
) -> None:
    mailbox = place.mailbox()
    mailbox.send("alice", sender="lead", kind="text", body="one")
    (pid,) = pg_cluster.backend_pids(place.dsn, "agent17")
    _terminate(place, pid)
    mailbox.send("alice", sender="lead", kind="text", body="two")
    assert [m.body for m in mailbox.messages("alice")] == ["one", "two"]


def test_a_lease_that_ran_out_and_stays_unreleased_ends_one_wait_not_every_wait(
    place: PostgresTeamPlace,
) -> None:
    # A plan-blocked teammate takes no task, so nothing releases the run-out lease:
    # its sleeper must not wake again at once, wait after wait (a busy loop).
    store = place.raw_store(lease_seconds=0.2)
    store.create_task("A")
    store.claim_next("carol")
    sleeper = sleeper_for(place, "alice", store)
    assert sleeper.wait(POLL, threading.Event()) is True
    assert sleeper.last_reason == "lease ran out"
    left = store.seconds_to_next_lease_expiry()
    assert left is not None and left <= 0  # run out, still on the board
    started = time.monotonic()
    assert sleeper.wait(0.3, threading.Event()) is False
    assert sleeper.last_reason == "poll interval"
    assert time.monotonic() - started >= 0.3
    # News still wakes it: the lease's release by someone else's pass.
    assert store.claim_next("bob") is not None
    assert sleeper.wait(POLL, threading.Event()) is True
    assert sleeper.last_reason == "notified"
