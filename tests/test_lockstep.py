"""Lockstep: teammates in their own threads taking turns, one tick at a time, in spawn order."""

from __future__ import annotations

import threading
from pathlib import Path

from agent17.agent.models import minimal_scenario_lead_script, teammate_script
from agent17.bootstrap import TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.team.lockstep import Lockstep
from agent17.team.teammate import TickKind, TickOutcome

WAIT = 30.0


def test_turns_go_round_in_join_order_and_skip_who_left() -> None:
    lockstep = Lockstep()
    for name in ("alice", "bob", "carol"):
        lockstep.join(name)
    order: list[str] = []
    done = threading.Barrier(4)

    def worker(name: str, turns: int) -> None:
        for _ in range(turns):
            with lockstep.turn(name):
                order.append(name)
        lockstep.leave(name)
        done.wait(timeout=WAIT)

    threads = [
        threading.Thread(target=worker, args=(name, turns))
        for name, turns in (("carol", 2), ("bob", 1), ("alice", 3))
    ]
    for thread in threads:
        thread.start()
    done.wait(timeout=WAIT)
    for thread in threads:
        thread.join(timeout=WAIT)
    assert order == ["alice", "bob", "carol", "alice", "carol", "alice"]


def test_a_timed_out_teammate_in_lockstep_comes_back_for_a_message(tmp_path: Path) -> None:
    outcomes: list[TickOutcome] = []
    handled = threading.Event()

    def listen(outcome: TickOutcome) -> None:
        outcomes.append(outcome)
        if outcome.kind is TickKind.MESSAGE_HANDLED:
            handled.set()

    team = build_team(
        TeamSettings(
            workspace=tmp_path,
            lead_model=minimal_scenario_lead_script(),
            teammate_model=lambda name: teammate_script(),
            clock=ManualClock(),
            new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71),
            new_request_id=uuid_sequence(99),
            lockstep=Lockstep(),
            max_idle_polls=2,
            on_outcome=listen,
        )
    )
    try:
        team.teammates.spawn("alice")
        team.teammates.start()
        assert team.teammates.wait_for_idle_timeout("alice", timeout=WAIT)
        assert team.teammates.wait_for_workers(timeout=WAIT)
        team.protocol.send_text("alice", "are you there?", sender="lead")
        assert handled.wait(timeout=WAIT), [outcome.describe() for outcome in outcomes]
        assert team.teammates.wait_for_idle_timeout("alice", count=2, timeout=WAIT)
    finally:
        team.close()
