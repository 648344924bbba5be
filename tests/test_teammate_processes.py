"""Teammates as real OS processes (`agent17 teammate`): real files, real signals, deadlines.

No sleep orders anything here: each step waits, with a deadline, for what the
processes report (a line on their output) or write (an event on the board).
The team's behaviour is tested with its board and mailbox on both engines (the
`place` fixture: SQLite files, or a PostgreSQL database with `--store`).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from team_backends import BACKENDS, TeamPlace, make_place
from team_processes import Teammate, integrity, teammates, wait_until

from agent17 import EventKind, Mailbox, SqliteTaskStore, TaskStatus
from agent17.team.file_wakeups import WAKEUPS_VARIABLE
from agent17.team.protocol import ShutdownResponse, TeamProtocol, TextMessage

pytestmark = pytest.mark.processes


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    """The team's board and mailbox on each engine; the workspace is the teammates' folder."""
    made = make_place(request.param, tmp_path)
    yield made
    made.close()


__all__ = ["teammates"]  # a fixture (team_processes.py)


def test_four_teammate_processes_drain_a_dag_of_two_dozen_tasks_with_no_lead(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    # Any program can make the board: here a plain script, no Lead at all.
    store = place.raw_store()
    rng = random.Random(24)
    deps: dict[str, tuple[str, ...]] = {}
    for n in range(24):
        older = list(deps)[-6:]
        task = store.create_task(f"T{n}", blocked_by=rng.sample(older, k=min(len(older), n % 3)))
        deps[task.id] = task.blocked_by
    assert sum(1 for d in deps.values() if d) >= 12
    crew = [
        teammates(place.workspace, f"worker-{n}", *place.cli, "--work-seconds", "0.05",
                  "--poll-interval", "0.5", "--max-idle-polls", "2")
        for n in range(4)
    ]  # fmt: skip
    for teammate in crew:
        assert teammate.finish() == 0, teammate.errors
        assert "idle timeout" in teammate.seen[-1]
    events = store.events()
    claims = [e for e in events if e.kind is EventKind.CLAIMED]
    completed = {e.task_id: e.sequence for e in events if e.kind is EventKind.COMPLETED}
    assert sorted(e.task_id for e in claims) == sorted(deps)  # each task claimed exactly once
    assert len(completed) == len(deps)
    for claim in claims:
        for dep in deps[claim.task_id]:
            assert completed[dep] < claim.sequence, "claimed before a dependency completed"
    assert len({e.owner for e in claims}) >= 2  # the work really was shared
    assert place.integrity_problems() == []


def test_a_teammate_killed_mid_task_leaves_its_lease_to_expire_and_another_finishes(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    store = place.raw_store()
    task = store.create_task("long job")
    victim = teammates(
        place.workspace, "alice", *place.cli, "--work-seconds", "600", "--lease-seconds", "4"
    )
    victim.wait_for_line("works on long job")
    (claimed,) = [e for e in store.events() if e.kind is EventKind.CLAIMED]
    # bob waits idle with a 30 s poll; he must wake when the lease runs out, not at his poll.
    bob = teammates(
        place.workspace, "bob", *place.cli, "--poll-interval", "30", "--max-idle-polls", "1"
    )
    bob.wait_for_line("joined the team")
    os.kill(victim.process.pid, signal.SIGKILL)
    assert victim.finish() == -signal.SIGKILL
    assert store.get_task(task.id).owner == "alice"  # still held: nobody released it early
    bob.wait_for_line("claimed long job", timeout=20)
    assert claimed.lease_expires_at_utc is not None
    events = store.events()
    kinds = [(e.kind, e.owner) for e in events]
    assert kinds == [
        (EventKind.CREATED, None),
        (EventKind.CLAIMED, "alice"),
        (EventKind.LEASE_EXPIRED, "alice"),
        (EventKind.CLAIMED, "bob"),
        (EventKind.COMPLETED, "bob"),
    ]
    assert events[-1].claim_token != claimed.claim_token  # the killed token never completed
    assert place.integrity_problems() == []
    # Her hold on her name went with her process (the kernel's file lock, the server's
    # session lock): she can start again.
    again = teammates(
        place.workspace, "alice", *place.cli, "--poll-interval", "0.2", "--max-idle-polls", "1"
    )
    assert again.finish() == 0, again.errors
    bob.process.send_signal(signal.SIGINT)
    bob.finish()


def test_a_message_and_a_newly_ready_task_wake_an_idle_teammate_long_before_its_poll(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    store = place.raw_store()
    mailbox = place.mailbox()
    protocol = TeamProtocol(mailbox)
    alice = teammates(
        place.workspace, "alice", *place.cli, "--poll-interval", "30", "--max-idle-polls", "5"
    )
    alice.wait_for_line("joined the team")
    # It is idle now, in a 30 s wait. A message from the Lead in this process:
    protocol.send_text("alice", "Please report.", sender="lead")
    took = wait_until(lambda: mailbox.unacked_count("lead") == 1, "alice answered the Lead")
    assert took < 5.0, f"the message took {took:.2f} s to be noticed"
    (answer,) = protocol.receive_all("lead")
    assert answer.message == TextMessage(content="Acknowledged.")
    # A task that becomes ready:
    first = store.create_task("first")
    second = store.create_task("second", blocked_by=[first.id])
    took = wait_until(
        lambda: store.get_task(second.id).status is TaskStatus.COMPLETED, "both tasks were done"
    )
    assert took < 5.0, f"the ready tasks took {took:.2f} s to be claimed"
    protocol.request_shutdown("alice")
    assert alice.finish() == 0
    assert "shut down through the protocol" in alice.seen[-1]
    responses = [d.message for d in protocol.receive_all("lead")]
    assert any(isinstance(m, ShutdownResponse) and m.approved for m in responses)


WITHIN_A_SECOND = 1.0  # the teammates below poll every 30 s


def _claimed_within_a_second(store: SqliteTaskStore, task_id: str) -> None:
    def claimed() -> bool:
        return any(e.task_id == task_id and e.kind is EventKind.CLAIMED for e in store.events())

    took = wait_until(claimed, f"task {task_id} was claimed", timeout=WITHIN_A_SECOND)
    assert took < WITHIN_A_SECOND


def _wake_alice_twice(
    workspace: Path, teammates: Callable[..., Teammate], environment: dict[str, str]
) -> Teammate:
    """A new ready task, then one made ready by a completion here: each claimed within 1 s."""
    with SqliteTaskStore(workspace) as store, Mailbox(workspace) as mailbox:
        blocker = store.create_task("blocker")
        held = store.claim_task(blocker.id, "lead")  # before alice starts: hers is nothing
        unblocked = store.create_task("unblocked", blocked_by=[blocker.id])
        alice = teammates(
            workspace, "alice", "--poll-interval", "30", "--max-idle-polls", "5",
            environment=environment,
        )  # fmt: skip
        alice.wait_for_line("hears of changes by")
        new = store.create_task("new")
        _claimed_within_a_second(store, new.id)
        # Her report is the last write of her pass: then she scans once and sleeps again.
        wait_until(lambda: mailbox.unacked_count("lead") == 1, "alice reported")
        store.complete_task(blocker.id, "lead", held.claim_token)  # makes `unblocked` ready
        _claimed_within_a_second(store, unblocked.id)
        wait_until(lambda: mailbox.unacked_count("lead") == 2, "alice reported again")
        TeamProtocol(mailbox).request_shutdown("alice")
        assert alice.finish() == 0, alice.errors
    return alice


def test_a_sqlite_teammate_is_woken_by_a_file_notification_within_a_second(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    alice = _wake_alice_twice(tmp_path, teammates, {})
    said = [line for line in alice.seen if "hears of changes" in line]
    assert len(said) == 1
    assert "hears of changes by file notifications (inotify on " in said[0]


def test_without_notifications_a_sqlite_teammate_polls_and_says_so_once(
    tmp_path: Path, teammates: Callable[..., Teammate]
) -> None:
    alice = _wake_alice_twice(tmp_path, teammates, {WAKEUPS_VARIABLE: "poll"})
    said = [line for line in alice.seen if "hears of changes" in line]
    assert len(said) == 1
    assert said[0].endswith(
        "hears of changes by a look every 0.1 s (no file notifications: AGENT17_WAKEUPS=poll)"
    )


def test_a_second_live_teammate_with_the_same_name_is_refused(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    first = teammates(place.workspace, "alice", *place.cli, "--poll-interval", "30")
    first.wait_for_line("joined the team")
    second = teammates(place.workspace, "alice", *place.cli, "--poll-interval", "30")
    assert second.finish() == 1
    assert len(second.errors) == 1 and "teammate_running" in second.errors[0]
    assert f"pid {first.process.pid}" in second.errors[0]
    assert second.seen == []  # it never joined, so it never scanned
    assert first.process.poll() is None  # the first one is untouched
    first.process.send_signal(signal.SIGINT)
    assert first.finish() == 130


def test_an_idle_teammate_exits_0_after_its_idle_timeout_and_fakes_nothing(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    alice = teammates(
        place.workspace, "alice", *place.cli, "--poll-interval", "0.1", "--max-idle-polls", "3"
    )
    assert alice.finish() == 0
    assert alice.seen[-1].endswith(
        "idle timeout: 3 empty polls in a row; exiting (no shutdown was requested)"
    )
    with place.mailbox() as mailbox:
        assert mailbox.messages() == []  # no shutdown response, no summary


def test_ctrl_c_exits_130_with_every_state_file_whole(
    place: TeamPlace, teammates: Callable[..., Teammate]
) -> None:
    store = place.raw_store()
    task = store.create_task("A")
    alice = teammates(place.workspace, "alice", *place.cli, "--work-seconds", "600")
    alice.wait_for_line("works on A")
    alice.process.send_signal(signal.SIGINT)
    assert alice.finish() == 130
    assert len(alice.errors) == 1 and "interrupted" in alice.errors[0]
    assert place.integrity_problems() == []
    # The ledger is this host's own, in the workspace, whichever engine has the board.
    assert integrity(place.workspace / ".agent_tutorial" / "idempotency.sqlite3") == ["ok"]
    assert store.get_task(task.id).status is TaskStatus.IN_PROGRESS  # its lease will run out
    with place.mailbox() as mailbox:
        mailbox.send("anyone", sender="lead", kind="text", body="{}")  # not locked


def test_a_bad_configuration_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    for options in (
        ["--name", "Alice"],
        ["--name", "alice", "--poll-interval", "0"],
        ["--name", "alice", "--lease-seconds", "0"],
        ["--name", "alice", "--model", "openai"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "agent17", "teammate", "--workspace", str(tmp_path), *options],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI")},
            check=False,
        )
        assert result.returncode == 2, options
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []
