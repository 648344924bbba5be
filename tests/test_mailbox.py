"""The persistent mailbox: claim-then-ack delivery, redelivery after a crash, wake-ups, safety.

What the mailbox promises holds on both engines (the `place` fixture); what is
about its SQLite file (paths, links, damage, the file lock) is tested on SQLite,
and PostgreSQL's own faults in test_team_postgres.py.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import select
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import store_workers
import team_workers
from store_fixtures import db_path, digest, new_store, raw_connection
from team_backends import BACKENDS, TeamPlace, make_place

from agent17.team.mailbox import (
    Envelope,
    Mailbox,
    MailboxError,
    MailboxTransaction,
    MessageState,
    TeamMailbox,
)
from agent17.team.wakeups import WakeRegistry

spawn = multiprocessing.get_context("spawn")


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    """The mailbox's home on each engine: the workspace's file, or a PostgreSQL database."""
    made = make_place(request.param, tmp_path)
    yield made
    made.close()


def mailbox_path(workspace: Path) -> Path:
    return workspace / ".agent_tutorial" / "mailbox.sqlite3"


def send_text(mailbox: TeamMailbox, to: str, text: str, sender: str = "lead") -> int:
    return mailbox.send(to, sender=sender, kind="text", body=f'{{"content": "{text}"}}').sequence


def test_the_mailbox_lives_in_its_own_file_beside_the_task_database(tmp_path: Path) -> None:
    with Mailbox(tmp_path) as mailbox:
        assert mailbox.path == mailbox_path(tmp_path.resolve())
        assert mailbox.path.is_file()
        assert not (tmp_path / ".agent_tutorial" / "tasks.sqlite3").exists()


def test_messages_are_claimed_one_at_a_time_in_sending_order(place: TeamPlace) -> None:
    with place.mailbox() as mailbox:
        first = send_text(mailbox, "alice", "one")
        send_text(mailbox, "bob", "for bob")
        second = send_text(mailbox, "alice", "two")

        claimed = mailbox.claim("alice")
        assert claimed is not None
        assert (claimed.sequence, claimed.state, claimed.deliveries) == (
            first,
            MessageState.CLAIMED,
            1,
        )
        mailbox.ack(claimed)
        again = mailbox.claim("alice")
        assert again is not None and again.sequence == second
        mailbox.ack(again)
        assert mailbox.claim("alice") is None
        assert [m.state for m in mailbox.messages("alice")] == [MessageState.ACKED] * 2
        assert [m.state for m in mailbox.messages("bob")] == [MessageState.QUEUED]


def test_a_claimed_message_is_not_delivered_twice_while_it_is_being_handled(
    place: TeamPlace,
) -> None:
    with place.mailbox() as mailbox:
        send_text(mailbox, "alice", "only")
        assert mailbox.claim("alice") is not None
        assert mailbox.claim("alice") is None
        assert mailbox.unacked_count("alice") == 1


def test_messages_survive_reopening_the_mailbox(place: TeamPlace) -> None:
    with place.mailbox() as mailbox:
        sequence = send_text(mailbox, "alice", "persist me")
    with place.mailbox() as reopened:
        claimed = reopened.claim("alice")
        assert claimed is not None
        assert claimed.sequence == sequence
        assert claimed.body == '{"content": "persist me"}'
        assert (claimed.sender, claimed.kind) == ("lead", "text")


def test_a_claimed_but_unacked_message_is_delivered_again_after_a_restart(place: TeamPlace) -> None:
    with place.mailbox() as crashed:
        sequence = send_text(crashed, "alice", "handle me")
        assert crashed.claim("alice") is not None
        # The process dies here: no ack.
    with place.mailbox() as restarted:
        assert restarted.claim("alice") is None  # still claimed on disk
        assert restarted.requeue_unacked("alice") == 1
        redelivered = restarted.claim("alice")
        assert redelivered is not None
        assert (redelivered.sequence, redelivered.deliveries) == (sequence, 2)
        restarted.ack(redelivered)
        assert restarted.requeue_unacked("alice") == 0
        assert restarted.claim("alice") is None


def test_requeue_only_touches_the_named_recipient(place: TeamPlace) -> None:
    with place.mailbox() as mailbox:
        send_text(mailbox, "alice", "a")
        send_text(mailbox, "bob", "b")
        assert mailbox.claim("alice") is not None
        assert mailbox.claim("bob") is not None
        assert mailbox.requeue_unacked("alice") == 1
        assert [m.state for m in mailbox.messages()] == [MessageState.QUEUED, MessageState.CLAIMED]


def test_acking_a_message_that_is_not_claimed_is_refused(place: TeamPlace) -> None:
    with place.mailbox() as mailbox:
        send_text(mailbox, "alice", "x")
        (queued,) = mailbox.messages("alice")
        with pytest.raises(MailboxError) as not_claimed:
            mailbox.ack(queued)
        assert not_claimed.value.code == "message_not_claimed"

        claimed = mailbox.claim("alice")
        assert claimed is not None
        mailbox.ack(claimed)
        with pytest.raises(MailboxError) as twice:
            mailbox.ack(claimed)
        assert twice.value.code == "message_not_claimed"


@pytest.mark.parametrize(
    ("recipient", "sender", "kind", "body", "code"),
    [
        ("", "lead", "text", "{}", "invalid_recipient"),
        ("\x00alice", "lead", "text", "{}", "invalid_recipient"),
        ("ali\ud800ce", "lead", "text", "{}", "invalid_recipient"),
        ("a" * 201, "lead", "text", "{}", "invalid_recipient"),
        ("alice", " ", "text", "{}", "invalid_sender"),
        ("alice", "lead\n", "text", "{}", "invalid_sender"),
        ("alice", "lead", "", "{}", "invalid_kind"),
        ("alice", "lead", "text", "a lone \udc00 half", "invalid_message_body"),
        ("alice", "lead", "text", "nul \x00 inside", "invalid_message_body"),
        ("alice", "lead", "text", 42, "invalid_message_body"),
    ],
    ids=repr,
)
def test_a_bad_message_is_refused_with_a_code_and_nothing_is_stored(
    place: TeamPlace, recipient: str, sender: str, kind: str, body: str, code: str
) -> None:
    with place.mailbox() as mailbox:
        with pytest.raises(MailboxError) as refused:
            mailbox.send(recipient, sender=sender, kind=kind, body=body)
        assert refused.value.code == code
        assert mailbox.messages() == []
        # The same object keeps working after a refusal.
        send_text(mailbox, "alice", "still fine")
        assert len(mailbox.messages()) == 1


@pytest.mark.parametrize("body", ["plain words", "", "ünïcode ✓\n\ttabs", "x" * 100_000])
def test_any_valid_text_is_a_body_and_comes_back_exactly(place: TeamPlace, body: str) -> None:
    with place.mailbox() as mailbox:
        mailbox.send("alice", sender="lead", kind="note", body=body)
        claimed = mailbox.claim("alice")
        assert claimed is not None and claimed.body == body


def test_sending_wakes_the_recipient_and_nobody_else(place: TeamPlace) -> None:
    wakeups = WakeRegistry()
    heard: list[str] = []
    wakeups.subscribe(heard.append)
    with place.mailbox(wakeups=wakeups) as mailbox:
        alice, bob = wakeups.event_for("alice"), wakeups.event_for("bob")
        send_text(mailbox, "alice", "wake up")
        assert alice.is_set()
        assert not bob.is_set()
        assert heard == ["alice"]
        assert wakeups.event_for("alice") is alice


def test_a_rolled_back_transaction_stores_nothing_and_wakes_nobody(place: TeamPlace) -> None:
    def send_then_crash(handle: MailboxTransaction) -> None:
        handle.send("alice", sender="lead", kind="text", body="{}")
        raise RuntimeError("crash before commit")

    with place.mailbox() as mailbox:
        with pytest.raises(RuntimeError):
            mailbox.transaction(send_then_crash)
        assert mailbox.messages() == []
        assert not mailbox.wakeups.event_for("alice").is_set()


def test_an_interrupt_inside_a_transaction_leaves_the_mailbox_usable_and_unlocked(
    place: TeamPlace,
) -> None:
    def send_then_interrupt(handle: MailboxTransaction) -> None:
        handle.send("alice", sender="lead", kind="text", body="{}")
        raise KeyboardInterrupt

    with place.mailbox() as mailbox, place.mailbox() as other:
        with pytest.raises(KeyboardInterrupt):
            mailbox.transaction(send_then_interrupt)
        send_text(other, "bob", "not blocked")  # another writer is not locked out
        send_text(mailbox, "alice", "and this one works")
        assert [m.recipient for m in mailbox.messages()] == ["bob", "alice"]


def test_two_mailboxes_on_one_file_never_deliver_a_message_twice(place: TeamPlace) -> None:
    with place.mailbox() as first, place.mailbox() as second:
        for number in range(60):
            send_text(first, "alice", f"m{number}")
        start = threading.Barrier(2)
        taken: dict[str, list[int]] = {"first": [], "second": []}

        def drain(label: str, mailbox: TeamMailbox) -> None:
            start.wait()
            while (envelope := mailbox.claim("alice")) is not None:
                taken[label].append(envelope.sequence)
                mailbox.ack(envelope)

        threads = [
            threading.Thread(target=drain, args=(label, box))
            for label, box in (("first", first), ("second", second))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        everything = taken["first"] + taken["second"]
        assert sorted(everything) == list(range(1, 61))
        assert len(set(everything)) == 60


def test_a_mailbox_of_another_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    Mailbox(tmp_path).close()
    path = mailbox_path(tmp_path)
    with raw_connection(path) as connection:
        connection.execute("UPDATE mailbox_metadata SET value = '99'")
    with pytest.raises(MailboxError) as refused:
        Mailbox(tmp_path)
    assert refused.value.code == "schema_version_mismatch"


def _files_in(folder: Path) -> dict[str, str]:
    return {entry.name: digest(entry) for entry in sorted(folder.iterdir()) if entry.is_file()}


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path) -> None:
    path = mailbox_path(tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"these are my notes, not a database" * 100)
    before = _files_in(path.parent)
    with pytest.raises(MailboxError) as refused:
        Mailbox(tmp_path)
    assert refused.value.code == "schema_version_mismatch"
    assert _files_in(path.parent) == before


def test_another_programs_database_at_the_mailbox_path_is_refused_untouched(
    tmp_path: Path,
) -> None:
    path = mailbox_path(tmp_path)
    path.parent.mkdir()
    with raw_connection(path) as connection:
        connection.execute("CREATE TABLE messages (id INTEGER, text TEXT)")
        connection.execute("INSERT INTO messages VALUES (1, 'hello from another app')")
    before = _files_in(path.parent)
    with pytest.raises(MailboxError) as refused:
        Mailbox(tmp_path)
    assert refused.value.code == "schema_version_mismatch"
    assert _files_in(path.parent) == before
    with raw_connection(path) as connection:
        names = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    assert names == {"messages"}  # no mailbox tables were added


def test_the_task_board_copied_to_the_mailbox_path_is_refused_untouched(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.create_task("A")
    store.close()
    shutil.copyfile(db_path(tmp_path), mailbox_path(tmp_path))
    before = _files_in(mailbox_path(tmp_path).parent)
    with pytest.raises(MailboxError) as refused:
        Mailbox(tmp_path)
    assert refused.value.code == "schema_version_mismatch"
    assert _files_in(mailbox_path(tmp_path).parent) == before


def test_a_mailbox_missing_its_plans_table_is_refused_untouched(tmp_path: Path) -> None:
    Mailbox(tmp_path).close()
    with raw_connection(mailbox_path(tmp_path)) as connection:
        connection.execute("DROP TABLE plans")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _files_in(mailbox_path(tmp_path).parent)
    with pytest.raises(MailboxError) as refused:
        Mailbox(tmp_path)
    assert refused.value.code == "store_unreadable"
    assert "plans" in refused.value.message
    assert _files_in(mailbox_path(tmp_path).parent) == before


def test_a_mailbox_replaced_under_an_open_mailbox_is_refused(tmp_path: Path) -> None:
    with Mailbox(tmp_path) as mailbox:
        send_text(mailbox, "alice", "before")
        copy = tmp_path / "copy.sqlite3"
        with raw_connection(mailbox.path) as connection:
            connection.execute("VACUUM INTO ?", (str(copy),))
        os.replace(copy, mailbox.path)
        with pytest.raises(MailboxError) as refused:
            send_text(mailbox, "alice", "after")
        assert refused.value.code == "unsafe_store_path"


def test_a_state_folder_swapped_for_a_symlink_under_an_open_mailbox_is_refused(
    tmp_path: Path,
) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    with Mailbox(workspace) as mailbox:
        send_text(mailbox, "alice", "before")
        folder = workspace / ".agent_tutorial"
        folder.rename(elsewhere)
        folder.symlink_to(elsewhere)
        with pytest.raises(MailboxError) as refused:
            send_text(mailbox, "alice", "after")
        assert refused.value.code == "unsafe_store_path"
    with raw_connection(elsewhere / "mailbox.sqlite3") as connection:
        assert connection.execute("SELECT count(*) FROM messages").fetchone() == (1,)


def test_a_mailbox_symlinked_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside.sqlite3"
    outside.write_bytes(b"")
    (workspace / ".agent_tutorial").mkdir(parents=True)
    os.symlink(outside, mailbox_path(workspace))
    with pytest.raises(MailboxError) as refused:
        Mailbox(workspace)
    assert refused.value.code == "unsafe_store_path"
    assert outside.read_bytes() == b""


def test_keyboard_interrupt_while_waiting_for_the_mailbox_lock_leaves_no_lock_held(
    tmp_path: Path,
) -> None:
    """A real SIGINT to a child blocked on the mailbox's write lock; then all is free."""
    with Mailbox(tmp_path) as mailbox:
        send_text(mailbox, "alice", "for the child")
    fifo = tmp_path / "signal-landed"
    os.mkfifo(fifo)
    landed = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    ready, go_on, results = spawn.Event(), spawn.Event(), spawn.Queue()
    child = spawn.Process(
        target=team_workers.claim_mail_through_an_interrupt,
        args=(str(tmp_path), str(fifo), ready, go_on, results),
    )
    path = mailbox_path(tmp_path)
    try:
        with raw_connection(path) as holder:
            holder.execute("BEGIN IMMEDIATE")
            child.start()
            assert ready.wait(60)
            assert child.pid is not None
            store_workers.wait_until_sleeping(child.pid, 60)
            os.kill(child.pid, signal.SIGINT)
            readable, _, _ = select.select([landed], [], [], 60)
            assert readable, "the SIGINT never reached the child"
            holder.execute("ROLLBACK")
        assert results.get(timeout=60) == ("interrupted", None)
        with raw_connection(path) as probe:
            probe.execute("PRAGMA busy_timeout = 0")
            probe.execute("BEGIN IMMEDIATE")  # free at once: the child holds nothing
            probe.execute("ROLLBACK")
        go_on.set()
        assert results.get(timeout=60) == ("claimed", '{"content": "for the child"}')
    finally:
        os.close(landed)
        child.join(60)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


@pytest.mark.parametrize("recipient", ["", "\x00alice", "\ud800", 5, ["alice"], 2**64], ids=repr)
def test_reading_the_messages_of_a_bad_name_is_invalid_recipient(
    place: TeamPlace, recipient: object
) -> None:
    with place.mailbox() as mailbox:
        for action in (
            lambda: mailbox.messages(recipient),  # type: ignore[arg-type]
            lambda: mailbox.unacked_count(recipient),  # type: ignore[arg-type]
        ):
            with pytest.raises(MailboxError) as refused:
                action()
            assert refused.value.code == "invalid_recipient"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda e: None, "invalid_envelope"),
        (lambda e: e.sequence, "invalid_envelope"),
        (lambda e: dataclasses.replace(e, sequence=2**64), "invalid_envelope"),
        (lambda e: dataclasses.replace(e, sequence=0), "invalid_envelope"),
        (lambda e: dataclasses.replace(e, sequence=True), "invalid_envelope"),
        (lambda e: dataclasses.replace(e, sequence="1"), "invalid_envelope"),
        (lambda e: dataclasses.replace(e, recipient="\ud800"), "invalid_recipient"),
        (lambda e: dataclasses.replace(e, recipient=["alice"]), "invalid_recipient"),
    ],
    ids=[
        "none",
        "an int",
        "huge sequence",
        "zero",
        "bool",
        "str sequence",
        "surrogate",
        "list recipient",
    ],
)
def test_acking_something_that_cannot_name_a_message_is_refused_and_changes_nothing(
    place: TeamPlace, change: Callable[[Envelope], object], code: str
) -> None:
    with place.mailbox() as mailbox:
        send_text(mailbox, "alice", "x")
        claimed = mailbox.claim("alice")
        assert claimed is not None
        for action in (
            lambda: mailbox.ack(change(claimed)),  # type: ignore[arg-type]
            lambda: mailbox.transaction(lambda h: h.ack(change(claimed))),  # type: ignore[arg-type]
        ):
            with pytest.raises(MailboxError) as refused:
                action()
            assert refused.value.code == code
        assert [m.state for m in mailbox.messages()] == [MessageState.CLAIMED]
        mailbox.ack(claimed)  # the real envelope still works
