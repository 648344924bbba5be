"""The team stepper in the kernel: its buttons step teammates, move time, act as the Lead, approve.

Every test clicks real ipywidgets Buttons (`.click()` runs exactly what a
browser click runs) and then checks the panel's state and the team's state.
ipywidgets swallows exceptions raised in click handlers, so each test also
checks that no error output appeared and that the panel recorded no failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from IPython.core.formatters import format_display_data

from agent17 import EventKind, TaskStatus
from agent17.agent.models import (
    Reply,
    ScriptedModel,
    auto_claimed_task,
    minimal_scenario_lead_script,
    teammate_script,
)
from agent17.agent.permissions import ApprovalRequest
from agent17.bootstrap import Team, TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.team.sleepers import ManualSleeper, Sleeper
from agent17.team.teammate import TickKind
from agent17.viz import ButtonApprover, TeamStepper

PROMPT = "Create A and B, then C that needs both; start alice and bob."
TeamFactory = Callable[..., Team]


def stalling_model() -> ScriptedModel:
    """A teammate model that never calls complete_task (its leases run out)."""

    def say_busy(turn: object) -> Reply:
        claim = auto_claimed_task(getattr(turn, "user_text", ""))
        return Reply("Still working." if claim is not None else "Acknowledged.")

    return ScriptedModel([say_busy], name="stalling")


@pytest.fixture
def make_team(tmp_path: Path) -> Iterator[TeamFactory]:
    """Builds deterministic teams (Lead already ran) and closes them after the test."""
    built: list[Team] = []

    def factory(
        *,
        bob_writes_notes: bool = False,
        bob_stalls: bool = False,
        approver: ButtonApprover | None = None,
        sleeper: Sleeper | None = None,
    ) -> Team:
        def teammate_model(name: str) -> ScriptedModel:
            if name == "bob" and bob_stalls:
                return stalling_model()
            return teammate_script(write_notes=name == "bob" and bob_writes_notes)

        team = build_team(
            TeamSettings(
                workspace=tmp_path / f"team{len(built)}",
                lead_model=minimal_scenario_lead_script(),
                teammate_model=teammate_model,
                clock=ManualClock(),
                new_task_id=uuid_sequence(17),
                new_claim_token=uuid_sequence(71),
                new_request_id=uuid_sequence(99),
                approver=approver if approver is not None else ButtonApprover(),
                persistent_audit=False,
                sleeper=sleeper,
            )
        )
        team.lead.run(PROMPT)
        built.append(team)
        return team

    yield factory
    for team in built:
        team.close()


@pytest.fixture
def steppers() -> Iterator[list[TeamStepper]]:
    """Steppers made in a test; closed afterwards so no parked tick outlives it."""
    made: list[TeamStepper] = []
    yield made
    for stepper in made:
        stepper.close()


def panel(team: Team, steppers: list[TeamStepper]) -> TeamStepper:
    stepper = TeamStepper(team)
    steppers.append(stepper)
    return stepper


def assert_clean(stepper: TeamStepper) -> None:
    """No error output in any Output widget of the panel, and no recorded failure."""
    assert stepper.error_outputs() == []
    assert stepper.errors == ()


def subjects(team: Team) -> dict[str, tuple[TaskStatus, str | None]]:
    return {task.subject: (task.status, task.owner) for task in team.store.list_tasks()}


def test_clicking_step_alice_claims_a_for_alice_logs_it_and_redraws_the_dag(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    dot_before = stepper.dot_source
    assert "READY" in dot_before

    stepper.buttons["step alice"].click()

    assert subjects(team)["A"] == (TaskStatus.COMPLETED, "alice")
    assert stepper.log == ("alice: claimed A (lease until 09:05:00Z) -> 'Completed A.'",)
    outcome = stepper.last_outcome
    assert outcome is not None and outcome.kind is TickKind.CLAIMED
    assert stepper.dot_source != dot_before
    assert "completed · alice" in stepper.dot_source
    svg_outputs = [item for item in stepper.picture.outputs if "image/svg+xml" in item["data"]]
    assert len(svg_outputs) == 1
    assert "completed · alice" in svg_outputs[0]["data"]["image/svg+xml"]
    assert_clean(stepper)


def test_a_step_button_appears_for_each_teammate_in_spawn_order(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    row = stepper.widget.children[0].children[0]
    assert [button.description for button in row.children] == ["step alice", "step bob"]
    team.teammates.spawn("carol")
    stepper.refresh()
    assert [button.description for button in row.children] == [
        "step alice",
        "step bob",
        "step carol",
    ]
    assert list(stepper.recipient.options) == ["alice", "bob", "carol"]


def test_stepping_both_gives_a_and_b_to_different_teammates_and_c_to_exactly_one(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    for name in ("alice", "bob", "alice", "bob"):
        stepper.buttons[f"step {name}"].click()
    board = subjects(team)
    assert board["A"] == (TaskStatus.COMPLETED, "alice")
    assert board["B"] == (TaskStatus.COMPLETED, "bob")
    assert board["C"] == (TaskStatus.COMPLETED, "alice")
    assert stepper.log[-1] == "bob: idle (nothing ready to claim)"
    c_claims = [
        event
        for event in team.store.events()
        if event.kind is EventKind.CLAIMED and event.task_id == team.store.list_tasks()[2].id
    ]
    assert [event.owner for event in c_claims] == ["alice"]
    assert_clean(stepper)


def test_advance_clock_moves_the_manual_clock_and_an_unfinished_lease_runs_out(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_stalls=True)
    stepper = panel(team, steppers)
    stepper.buttons["step alice"].click()
    stepper.buttons["step bob"].click()
    assert subjects(team)["B"] == (TaskStatus.IN_PROGRESS, "bob")
    assert "lease until 09:05:00Z (300 s left)" in stepper.dot_source

    stepper.clock_seconds.value = 240
    stepper.buttons["advance clock"].click()
    assert stepper.log[-1] == "clock: +240 s -> 09:04:00Z"
    assert "(60 s left)" in stepper.dot_source
    assert "the board at 09:04:00Z" in stepper.dot_source

    stepper.clock_seconds.value = 60
    stepper.buttons["advance clock"].click()
    # The half-open lease is over at 09:05:00; the redraw's read released it.
    assert stepper.log[-2:] == (
        "clock: +60 s -> 09:05:00Z",
        "board: #7 09:05:00Z bob's lease on B expired; B is pending again",
    )
    assert subjects(team)["B"] == (TaskStatus.PENDING, None)
    assert "B\\nt2 · 00000002\\nREADY" in stepper.dot_source
    stepper.buttons["step alice"].click()
    assert subjects(team)["B"] == (TaskStatus.COMPLETED, "alice")
    kinds = [event.kind for event in team.store.events()]
    assert EventKind.LEASE_EXPIRED in kinds
    assert_clean(stepper)


def test_advance_clock_is_disabled_and_refused_without_a_manual_clock(
    tmp_path: Path, steppers: list[TeamStepper]
) -> None:
    team = build_team(
        TeamSettings(
            workspace=tmp_path,
            lead_model=minimal_scenario_lead_script(),
            teammate_model=lambda name: teammate_script(),
            persistent_audit=False,
        )
    )
    try:
        stepper = panel(team, steppers)
        assert stepper.buttons["advance clock"].disabled
        with pytest.raises(TypeError, match="ManualClock"):
            stepper.advance_clock(10)
    finally:
        team.close()


def test_a_shutdown_request_is_handled_before_a_ready_task_without_calling_the_model(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    stepper.recipient.value = "bob"
    stepper.buttons["request shutdown"].click()
    assert stepper.log[-1] == "lead: request_shutdown -> ok (bob)"
    model = team.runners["bob"].model
    assert isinstance(model, ScriptedModel)

    stepper.buttons["step bob"].click()

    assert stepper.log[-1] == (
        "bob: protocol_handled shutdown_request from lead (shutdown approved); no task taken"
    )
    assert model.calls == 0
    assert {task.status for task in team.store.list_tasks()} == {TaskStatus.PENDING}
    stepper.buttons["step bob"].click()
    assert stepper.log[-1] == "bob: closed (shut down; does nothing)"
    # The Lead's tool refuses a second request; the refusal is logged, not raised.
    stepper.buttons["request shutdown"].click()
    assert stepper.log[-1].startswith("lead: request_shutdown -> teammate_closed")
    assert_clean(stepper)


def test_a_message_from_the_lead_is_read_before_new_work(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    stepper.recipient.value = "alice"
    stepper.message_text.value = "Hello alice."
    stepper.buttons["send message"].click()
    stepper.buttons["step alice"].click()
    assert stepper.log[-1] == "alice: message_handled from lead -> 'Acknowledged.'; no task taken"
    assert subjects(team)["A"] == (TaskStatus.PENDING, None)
    stepper.message_text.value = ""
    stepper.buttons["send message"].click()
    assert stepper.log[-1].startswith("lead: send_message -> invalid_arguments")
    assert_clean(stepper)


def test_plan_buttons_review_the_latest_pending_plan_and_the_gate_blocks_with_zero_writes(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    assert stepper.buttons["approve plan"].disabled
    team.protocol.submit_plan("alice", "first plan")
    stepper.refresh()
    assert not stepper.buttons["approve plan"].disabled

    changes = team.store.total_changes
    stepper.buttons["step alice"].click()
    assert stepper.last_outcome is not None
    assert stepper.last_outcome.kind is TickKind.PLAN_BLOCKED
    assert team.store.total_changes == changes

    stepper.buttons["reject plan"].click()
    assert stepper.log[-1] == "lead: review_plan -> ok (alice)"
    stepper.buttons["step alice"].click()
    assert "plan rejected" in stepper.log[-1]
    stepper.buttons["step alice"].click()
    assert stepper.last_outcome.kind is TickKind.PLAN_BLOCKED
    assert team.store.total_changes == changes

    team.protocol.submit_plan("alice", "second plan")
    stepper.refresh()
    stepper.buttons["approve plan"].click()
    assert stepper.buttons["approve plan"].disabled
    stepper.buttons["step alice"].click()
    assert "plan approved" in stepper.log[-1]
    assert subjects(team)["A"] == (TaskStatus.PENDING, None)
    stepper.buttons["step alice"].click()
    assert subjects(team)["A"] == (TaskStatus.COMPLETED, "alice")
    assert_clean(stepper)


def test_reviewing_with_no_pending_plan_only_logs_it(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    assert stepper.review_latest_plan(approve=True) == {}
    assert stepper.log[-1] == "lead: no plan is waiting for review"
    assert_clean(stepper)


def test_an_approval_request_parks_the_step_until_approve_request_is_clicked(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = panel(team, steppers)
    assert stepper.buttons["approve request"].disabled
    stepper.buttons["step alice"].click()
    stepper.buttons["step bob"].click()

    request = stepper.pending_approval
    assert request is not None
    assert (request.identity, request.tool) == ("bob", "write_file")
    assert stepper.log[-1].startswith("bob: waiting for approval: bob asks to write notes/")
    assert not stepper.buttons["approve request"].disabled
    assert "bob asks to write notes/" in stepper.approval_label.value
    assert "last step: alice: claimed A" in stepper.status.value
    assert stepper.status.value.endswith(" · bob waits for approval")
    assert subjects(team)["B"] == (TaskStatus.IN_PROGRESS, "bob")

    # While bob waits, alice still steps: C is blocked, so she idles.
    stepper.buttons["step alice"].click()
    assert stepper.log[-1] == "alice: idle (nothing ready to claim)"
    # Stepping bob again does not start a second pass.
    stepper.buttons["step bob"].click()
    assert stepper.log[-1] == "bob: still waiting for approval; answer it first"

    assert stepper.status.value.endswith(" · bob waits for approval")
    stepper.buttons["approve request"].click()

    assert "last step: bob: claimed B" in stepper.status.value
    assert "waits for approval" not in stepper.status.value
    assert stepper.log[-2:] == (
        "human: approved bob's write_file",
        "bob: claimed B (lease until 09:05:00Z) -> 'Completed B.'",
    )
    assert stepper.pending_approval is None
    assert stepper.buttons["approve request"].disabled
    assert subjects(team)["B"] == (TaskStatus.COMPLETED, "bob")
    note = Path(team.store.workspace) / "notes" / f"{team.store.list_tasks()[1].id}.md"
    assert note.read_text(encoding="utf-8").startswith("# B")
    decisions = [(r["tool"], r["decision"]) for r in team.audit.records() if r["identity"] == "bob"]
    assert decisions == [("write_file", "allow"), ("complete_task", "allow")]
    assert_clean(stepper)


def test_deny_request_lets_the_model_see_permission_denied_and_the_task_stays_held(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = panel(team, steppers)
    stepper.buttons["step bob"].click()
    assert subjects(team)["A"] == (TaskStatus.IN_PROGRESS, "bob")

    stepper.buttons["deny request"].click()

    assert stepper.log[-1] == (
        "bob: claimed A (lease until 09:05:00Z)"
        " -> 'Could not write notes for A: permission_denied.'"
    )
    # Nobody completes the task for bob; only the lease can end his claim.
    assert subjects(team)["A"] == (TaskStatus.IN_PROGRESS, "bob")
    assert not (Path(team.store.workspace) / "notes").exists()
    approvals = stepper.approvals
    assert approvals is not None
    assert [(answer.approved, answer.how) for answer in approvals.answers] == [(False, "button")]
    assert_clean(stepper)


def test_answering_with_nothing_pending_only_logs_it(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    assert stepper.answer_approval(approve=True) is None
    assert stepper.log[-1] == "human: nothing is waiting for approval"
    assert_clean(stepper)


def test_decide_next_answers_the_next_request_before_the_step(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    approver = ButtonApprover()
    team = make_team(bob_writes_notes=True, approver=approver)
    stepper = panel(team, steppers)
    approver.decide_next(True)
    outcome = stepper.step("bob")
    assert outcome is not None and outcome.final_text == "Completed A."
    assert [(answer.approved, answer.how) for answer in approver.answers] == [
        (True, "decided before the step")
    ]
    assert_clean(stepper)


def test_a_request_from_a_thread_the_stepper_does_not_drive_is_denied_at_once() -> None:
    approver = ButtonApprover()
    request = ApprovalRequest("bob", "shell", {"command": "ls"})
    assert approver(request) is False
    assert approver.pending is None
    assert [(answer.approved, answer.how) for answer in approver.answers] == [
        (False, "nobody at the buttons")
    ]


def test_a_parked_request_nobody_answers_is_denied_after_the_answer_timeout(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    approver = ButtonApprover(answer_timeout=0.05)
    team = make_team(bob_writes_notes=True, approver=approver)
    stepper = panel(team, steppers)
    assert stepper.step("bob") is None
    job = stepper._jobs["bob"]
    assert job.thread is not None
    job.thread.join(10)  # the answer timeout ends the wait, not this join
    assert not job.thread.is_alive()
    outcome = stepper.step("bob")
    assert outcome is not None
    assert outcome.final_text == "Could not write notes for A: permission_denied."
    assert [(answer.approved, answer.how) for answer in approver.answers] == [
        (False, "no answer in time")
    ]


def test_close_denies_a_parked_request_and_ends_its_tick(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = panel(team, steppers)
    stepper.step("bob")
    job = stepper._jobs["bob"]
    stepper.close()
    assert job.thread is not None and not job.thread.is_alive()
    assert stepper.pending_approval is None


def test_an_error_in_a_button_handler_is_shown_as_an_error_output_not_swallowed(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team()
    stepper = panel(team, steppers)
    team.store.close()  # a bug: the store is gone under the panel

    stepper.buttons["step alice"].click()  # ipywidgets swallows the exception ...

    errors = stepper.error_outputs()  # ... but the panel shows it
    assert len(errors) == 1
    assert errors[0]["ename"] == "ProgrammingError"
    assert stepper.errors == ("step alice: ProgrammingError: Cannot operate on a closed database.",)


def test_an_error_inside_a_parked_tick_reaches_the_clicking_thread(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = panel(team, steppers)
    stepper.step("bob")
    team.store.close()  # complete_task will hit a closed database after approval
    with pytest.raises(Exception, match="closed database"):
        stepper.answer_approval(approve=True)
    assert "bob" not in stepper._jobs


def test_a_teammate_running_on_its_own_worker_is_not_stepped(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    sleeper = ManualSleeper()
    team = make_team(sleeper=sleeper)
    stepper = panel(team, steppers)
    team.teammates.start()
    # Both workers do the whole board by themselves, then block in their idle wait.
    assert sleeper.wait_for_sleepers(2)
    events = len(team.store.events())
    assert stepper.step("alice") is None
    assert stepper.log[-1] == "alice: runs on its own worker (runtime started); not stepped"
    assert len(team.store.events()) == events
    assert_clean(stepper)


def test_a_panel_whose_team_was_closed_turns_off_instead_of_printing_tracebacks(
    make_team: TeamFactory,
) -> None:
    team = make_team()
    stepper = TeamStepper(team)
    team.close()
    stepper.buttons["step alice"].click()  # a student clicks an old panel
    assert stepper.errors == ()
    assert stepper.error_outputs() == []
    assert all(button.disabled for button in stepper.buttons.values())
    assert "closed" in stepper.status.value


def test_the_panel_says_what_each_teammate_is_doing_and_turns_off_a_closed_one(
    make_team: TeamFactory,
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = TeamStepper(team)
    assert stepper.teammate_states() == {"alice": "idle", "bob": "idle"}
    stepper.step("alice")  # claims A and completes it at once
    stepper.step("bob")  # claims B, parks on its note
    assert stepper.teammate_states()["bob"].startswith("awaiting approval: bob asks to write")
    stepper.request_shutdown("alice")
    stepper.step("alice")
    assert stepper.teammate_states()["alice"] == "closed (shut down)"
    assert stepper.buttons["step alice"].disabled
    assert "alice</b>: closed" in stepper.states.value
    stepper.answer_approval(approve=True)
    assert stepper.teammate_states()["bob"] == "idle"
    stepper.close()


def test_submit_plan_then_approve_plan_opens_the_gate_through_the_buttons(
    make_team: TeamFactory,
) -> None:
    team = make_team()
    stepper = TeamStepper(team)
    stepper.recipient.value = "alice"
    stepper.message_text.value = "Do A, touch no files."
    stepper.buttons["submit plan"].click()
    assert stepper.teammate_states()["alice"] == "plan pending: takes no task"
    assert not stepper.buttons["approve plan"].disabled
    stepper.buttons["approve plan"].click()
    stepper.buttons["step alice"].click()  # reads the verdict: the gate opens
    assert stepper.last_outcome is not None and stepper.last_outcome.detail == "plan approved"
    assert stepper.teammate_states()["alice"] == "idle"
    assert stepper.errors == ()
    stepper.close()


def test_a_displayed_panel_leaves_the_board_of_that_moment_as_a_static_svg(
    make_team: TeamFactory, steppers: list[TeamStepper]
) -> None:
    team = make_team(bob_writes_notes=True)
    stepper = panel(team, steppers)
    data, _ = format_display_data(stepper)  # type: ignore[no-untyped-call]
    # JupyterLab draws the widget; GitHub and nbviewer, without widget state, the SVG.
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "the board at 09:00:00Z" in data["image/svg+xml"]
    assert data["text/plain"] == "TeamStepper at 09:00:00Z: alice: idle · bob: idle"

    stepper.step("alice")
    stepper.step("bob")  # parks on its note
    data, _ = format_display_data(stepper)  # type: ignore[no-untyped-call]
    assert "completed · alice" in data["image/svg+xml"]
    assert "in_progress · bob" in data["image/svg+xml"]
    assert data["text/plain"].startswith(
        "TeamStepper at 09:00:00Z: alice: idle · bob: awaiting approval: bob asks to write"
    )
    assert_clean(stepper)


def test_a_closed_panel_still_displays_without_touching_its_closed_team(
    make_team: TeamFactory,
) -> None:
    team = make_team()
    stepper = TeamStepper(team)
    team.close()
    data, _ = format_display_data(stepper)  # type: ignore[no-untyped-call]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "image/svg+xml" not in data


def test_every_button_of_a_panel_whose_team_was_closed_is_quiet(
    make_team: TeamFactory,
) -> None:
    # Notebook 6: the first panel stays on screen after a later cell closes its team.
    team = make_team(bob_writes_notes=True)
    stepper = TeamStepper(team)
    stepper.step("bob")  # parked on an approval when the team closes
    stepper.close()
    team.close()
    for button in list(stepper.buttons.values()):
        button.click()
    assert stepper.errors == ()
    assert stepper.error_outputs() == []
    assert all(button.disabled for button in stepper.buttons.values())
