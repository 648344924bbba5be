"""Fencing at the side effect: an effectful call for a claim that is no longer live is refused.

The teammate asks for approval to write its notes; the human answers after the
lease has run out. Without the fence the file would be written by a worker that
no longer owns the task, and only `complete_task` would refuse it, too late.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent17 import EventKind, TaskStatus
from agent17.agent.models import lead_script, notes_path, teammate_script
from agent17.agent.permissions import ApprovalRequest
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence

LEASE = 60.0


def _team(workspace: Path, clock: ManualClock, approver: Callable[[ApprovalRequest], bool]) -> Team:
    return build_team(
        TeamSettings(
            workspace=workspace,
            lead_model=lead_script((), ()),
            teammate_model=lambda name: teammate_script(write_notes=True),
            clock=clock,
            new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71),
            lease_seconds=LEASE,
            approver=approver,
            persistent_audit=False,
        )
    )


def test_a_write_approved_after_the_lease_ran_out_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    clock = ManualClock()

    def approves_too_late(request: ApprovalRequest) -> bool:
        clock.advance(LEASE)  # the human took a minute; at this instant the lease is over
        return True

    team = _team(tmp_path, clock, approves_too_late)
    try:
        task = team.store.create_task("A", "write the notes")
        outcome = team.teammates.spawn("alice").tick()
        assert outcome.final_text == "Could not write notes for A: lease_expired."
        assert not (tmp_path / notes_path({"id": task.id})).exists()
        (record,) = [r for r in team.audit.records() if r["tool"] == "write_file"]
        assert (record["decision"], record["outcome"]) == ("fenced", "lease_expired")
        # The fence's own check released the lease: the task is free for someone else.
        assert team.store.get_task(task.id).status is TaskStatus.PENDING
        kinds = [e.kind for e in team.store.events()]
        assert kinds == [EventKind.CREATED, EventKind.CLAIMED, EventKind.LEASE_EXPIRED]
    finally:
        team.close()


def test_a_write_approved_one_microsecond_before_expiry_runs_and_the_task_completes(
    tmp_path: Path,
) -> None:
    clock = ManualClock()

    def approves_just_in_time(request: ApprovalRequest) -> bool:
        clock.advance(LEASE - 0.000001)
        return True

    team = _team(tmp_path, clock, approves_just_in_time)
    try:
        task = team.store.create_task("A", "write the notes")
        outcome = team.teammates.spawn("alice").tick()
        assert outcome.final_text == "Completed A."
        assert (tmp_path / notes_path({"id": task.id})).read_text().startswith("# A")
        assert team.store.get_task(task.id).status is TaskStatus.COMPLETED
    finally:
        team.close()


def test_a_write_after_another_teammate_took_the_task_over_is_refused_and_bob_keeps_it(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    holder: dict[str, Team] = {}

    def approves_after_a_takeover(request: ApprovalRequest) -> bool:
        clock.advance(LEASE)
        bob = holder["team"].store.claim_next("bob")  # the lease ran out: bob takes A
        assert bob is not None
        return True

    team = _team(tmp_path, clock, approves_after_a_takeover)
    holder["team"] = team
    try:
        task = team.store.create_task("A")
        outcome = team.teammates.spawn("alice").tick()
        assert outcome.final_text == "Could not write notes for A: lease_expired."
        assert not (tmp_path / notes_path({"id": task.id})).exists()
        assert team.store.get_task(task.id).owner == "bob"
    finally:
        team.close()
