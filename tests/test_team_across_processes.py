"""What the team shares across threads and processes: names, closed state, wake-ups, time.

The registry (one live worker per name, closed state stored; on both engines),
the watching sleeper (a commit by another connection ends a wait; its own do not), and the
simulated time the demo runs on (one thread at a time, the clock jumps when
all wait, the same order every run).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from team_backends import BACKENDS, TeamPlace, make_place
from team_fixtures import lead_context, team
from team_processes import wait_until

from agent17 import SqliteTaskStore
from agent17.deterministic import COURSE_START, ManualClock
from agent17.team.mailbox import Mailbox
from agent17.team.protocol import TeamProtocol
from agent17.team.registry import TeamError, TeamRegistry
from agent17.team.simulation import SimulatedTime
from agent17.team.sleepers import ChangeWatchingSleeper, LookEvery
from agent17.team.teammate import TickKind
from agent17.tools.team_tools import lead_team_tool_definitions

WAIT = 30.0
WELL_BEFORE_THE_POLL = 10.0  # the teammates poll every 30 s

# -- the registry ------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TeamPlace]:
    """The team's state on each engine."""
    made = make_place(request.param, tmp_path)
    yield made
    made.close()


def test_a_name_held_by_a_live_worker_is_refused_until_it_leaves(place: TeamPlace) -> None:
    with place.mailbox() as first_process, place.mailbox() as second_process:
        held = TeamRegistry(first_process).join("alice")
        with pytest.raises(TeamError) as refused:
            TeamRegistry(second_process).join("alice")
        assert refused.value.code == "teammate_running"
        assert TeamRegistry(second_process).is_live("alice")
        held.leave()
        assert not TeamRegistry(second_process).is_live("alice")
        TeamRegistry(second_process).join("alice").leave()


def test_a_shutdown_closes_the_teammate_for_every_reader_of_the_team(place: TeamPlace) -> None:
    with team(place.workspace, place=place) as crew:
        alice = crew.spawn("alice")
        crew.protocol.request_shutdown("alice")
        assert alice.tick().kind is TickKind.PROTOCOL_HANDLED
        assert alice.closed
    # Another process, later: the closed state is stored, not in a Python object.
    with place.mailbox() as elsewhere:
        (member,) = TeamRegistry(elsewhere).members()
        assert (member.name, member.state) == ("alice", "closed")
        assert TeamRegistry(elsewhere).is_closed("alice")


def test_joining_again_after_a_shutdown_makes_the_teammate_active(place: TeamPlace) -> None:
    with place.mailbox() as mailbox:
        registry = TeamRegistry(mailbox)
        registry.join("alice").leave()
        mailbox.transaction(
            lambda handle: handle.connection.execute(
                "UPDATE teammates SET state = 'closed' WHERE name = 'alice'"
            )
        )
        registry.join("alice").leave()
        assert not registry.is_closed("alice")


def test_the_lead_cannot_message_a_closed_teammate(place: TeamPlace) -> None:
    with team(place.workspace, place=place) as crew:
        alice = crew.spawn("alice")
        crew.protocol.request_shutdown("alice")
        alice.tick()
        tools = {tool.name: tool for tool in lead_team_tool_definitions(crew.runtime)}
        result = tools["send_message"].run({"to": "alice", "content": "more?"}, lead_context())
        assert result["error"]["code"] == "teammate_closed"
        result = tools["request_shutdown"].run({"name": "alice"}, lead_context())
        assert result["error"]["code"] == "teammate_closed"


# -- the watching sleeper ----------------------------------------------------------------


def _sleeper(store: SqliteTaskStore, mailbox: Mailbox) -> ChangeWatchingSleeper:
    return ChangeWatchingSleeper(
        versions=(store.data_version, mailbox.data_version),
        next_deadline=store.next_lease_expiry,
        clock=lambda: COURSE_START,
        hints=LookEvery(0.01),
    )


def test_a_commit_by_another_connection_ends_the_wait_early(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path) as mine, Mailbox(tmp_path) as my_mail:
        sleeper = _sleeper(mine, my_mail)
        other = SqliteTaskStore(tmp_path)
        timer = threading.Timer(0.05, lambda: other.create_task("new work"))
        timer.start()
        started = time.monotonic()
        assert sleeper.wait(30.0, threading.Event()) is True
        assert time.monotonic() - started < 10
        assert sleeper.last_reason == "changed"
        timer.join()
        other.close()


def test_its_own_commits_do_not_wake_it(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path) as mine, Mailbox(tmp_path) as my_mail:
        sleeper = _sleeper(mine, my_mail)
        mine.create_task("mine")
        my_mail.send("lead", sender="alice", kind="text", body="{}")
        sleeper.mark()
        assert sleeper.wait(0.05, threading.Event()) is False
        assert sleeper.last_reason == "poll interval"


def test_a_lease_that_runs_out_during_the_wait_ends_it(tmp_path: Path) -> None:
    clock = ManualClock()
    with (
        SqliteTaskStore(tmp_path, clock=clock, lease_seconds=0.2) as store,
        Mailbox(tmp_path) as mailbox,
    ):
        store.create_task("A")
        store.claim_next("someone")
        sleeper = ChangeWatchingSleeper(
            versions=(store.data_version, mailbox.data_version),
            next_deadline=store.next_lease_expiry,
            clock=clock,
            hints=LookEvery(0.01),
        )
        sleeper.mark()
        assert sleeper.wait(30.0, threading.Event()) is True
        assert sleeper.last_reason == "lease ran out"


def test_a_lease_that_ran_out_and_stays_unreleased_ends_one_wait_not_every_wait(
    tmp_path: Path,
) -> None:
    # A plan-blocked teammate takes no task, so nothing releases the run-out lease:
    # its sleeper must not wake again at once, wait after wait (a busy loop).
    clock = ManualClock()
    with (
        SqliteTaskStore(tmp_path, clock=clock, lease_seconds=1) as store,
        Mailbox(tmp_path) as mailbox,
    ):
        store.create_task("A")
        store.claim_next("someone")
        clock.advance(2)  # run out, and nobody's operation has released it yet
        sleeper = ChangeWatchingSleeper(
            versions=(store.data_version, mailbox.data_version),
            next_deadline=store.next_lease_expiry,
            clock=clock,
            hints=LookEvery(0.01),
        )
        sleeper.mark()
        assert sleeper.wait(30.0, threading.Event()) is True  # once: the next scan releases it
        assert sleeper.last_reason == "lease ran out"
        started = time.monotonic()
        assert sleeper.wait(0.3, threading.Event()) is False  # the scan was plan-blocked
        assert sleeper.last_reason == "poll interval"
        assert time.monotonic() - started >= 0.3


# -- simulated time ----------------------------------------------------------------------


def _run_actors(simulation: SimulatedTime, plans: dict[str, list[float]]) -> list[str]:
    """Each actor sleeps its list of durations; returns who woke when, in order."""
    log: list[str] = []
    lock = threading.Lock()

    def actor(name: str) -> None:
        simulation.enter(name)
        for seconds in plans[name]:
            simulation.sleep(seconds)
            with lock:
                offset = (simulation.clock() - COURSE_START).total_seconds()
                log.append(f"{name}@{offset:g}")
        simulation.leave()

    threads = [threading.Thread(target=actor, args=(name,)) for name in plans]
    for name in plans:
        simulation.join(name)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return log


def test_simulated_time_runs_actors_one_at_a_time_and_jumps_to_the_next_deadline() -> None:
    plans = {"alice": [30, 20], "bob": [45], "carol": [10, 10, 10]}
    log = _run_actors(SimulatedTime(), plans)
    assert log == ["carol@10", "carol@20", "alice@30", "carol@30", "bob@45", "alice@50"]


def test_simulated_time_gives_the_same_order_every_run() -> None:
    plans = {"a": [5, 5, 5], "b": [5, 10], "c": [15]}
    runs = {tuple(_run_actors(SimulatedTime(), plans)) for _ in range(20)}
    assert len(runs) == 1


def test_a_wake_ends_a_simulated_wait_at_the_current_instant() -> None:
    simulation = SimulatedTime()
    wake = threading.Event()
    woke: list[tuple[bool, float]] = []

    def sleeper() -> None:
        simulation.enter("sleeper")
        woken = simulation.wait(100.0, wake)
        woke.append((woken, (simulation.clock() - COURSE_START).total_seconds()))
        simulation.leave()

    def sender() -> None:
        simulation.enter("sender")
        simulation.sleep(7)
        wake.set()
        simulation.leave()

    simulation.join("sleeper")
    simulation.join("sender")
    threads = [threading.Thread(target=sleeper), threading.Thread(target=sender)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert woke == [(True, 7.0)]
    assert simulation.clock() == COURSE_START + timedelta(seconds=7)


def test_the_team_in_simulated_time_idles_out_and_comes_back_for_a_message(tmp_path: Path) -> None:
    from agent17.agent.models import lead_script, teammate_script
    from agent17.bootstrap import TeamSettings, build_team
    from agent17.deterministic import uuid_sequence

    simulation = SimulatedTime()
    crew = build_team(
        TeamSettings(
            workspace=tmp_path,
            lead_model=lead_script((), ()),
            teammate_model=lambda name: teammate_script(),
            clock=simulation.clock,
            new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71),
            simulation=simulation,
            max_idle_polls=2,
            persistent_audit=False,
        )
    )
    try:
        simulation.join("lead")
        simulation.enter("lead")
        crew.teammates.spawn("alice")
        crew.teammates.start()
        never = threading.Event()
        while crew.teammates.idle_timeout_count("alice") == 0:
            simulation.wait(1.0, never)
        # Two empty polls of 5 s each: alice timed out at 10 s of simulated time.
        assert simulation.clock() - COURSE_START >= timedelta(seconds=10)
        TeamProtocol(crew.mailbox).send_text("alice", "still there?", sender="lead")
        while crew.mailbox.unacked_count("lead") == 0:
            simulation.wait(1.0, never)
        (reply,) = crew.mailbox.messages("lead")
        assert (reply.sender, reply.body) == ("alice", '{"content":"Acknowledged."}')
        simulation.leave()
    finally:
        crew.close()


# -- a team in this process, woken by changes made elsewhere -------------------------------


def test_a_team_watching_shared_state_is_woken_by_a_task_made_ready_elsewhere(
    place: TeamPlace,
) -> None:
    # What `agent17 run` builds: its teammates are threads, but a teammate process (or
    # one on another host) can complete a task or make one ready; with a 30 s poll only
    # the watching sleeper can wake them in time.
    from agent17.agent.models import ScriptedModel, teammate_script
    from agent17.bootstrap import TeamSettings, build_team
    from agent17.team.teammate import TickOutcome

    idle, claimed = threading.Event(), threading.Event()

    def seen(outcome: TickOutcome) -> None:
        (claimed if outcome.kind is TickKind.CLAIMED else idle).set()

    crew = build_team(
        TeamSettings(
            workspace=place.workspace,
            lead_model=ScriptedModel([], name="lead"),
            teammate_model=lambda name: teammate_script(),
            poll_interval_seconds=30.0,
            on_outcome=seen,
            persistent_audit=False,
            store=place.url,
            watch_shared_state=True,
        )
    )
    elsewhere = place.store()  # its own connection: what another process would commit
    try:
        crew.teammates.spawn("alice")
        crew.teammates.start()
        assert idle.wait(WAIT), "alice never finished her first, empty scan"
        made = time.monotonic()
        task = elsewhere.create_task("made elsewhere")
        assert claimed.wait(WAIT), "alice was not woken by the new task"
        assert time.monotonic() - made < WELL_BEFORE_THE_POLL
        wait_until(lambda: elsewhere.get_task(task.id).status.value == "completed", "completed")
    finally:
        crew.close()
    assert crew.teammates.active_workers() == ()
    if place.url is not None:  # the worker's listening session ended with it
        import pg_cluster

        assert pg_cluster.backend_pids(place.dsn, "agent17 listener") == []
