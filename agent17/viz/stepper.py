"""The team stepper: buttons that run one pass of a teammate's idle loop per click.

`TeamStepper(team)` is a control panel for a team built with `build_team`
whose runtime is *not* started. Each "step NAME" button calls
`team.teammates.teammate(NAME).tick()`, the very method a worker thread calls
in autonomous mode: one click, one pass of the idle loop. Beside them:
"advance clock" (the team's ManualClock: leases run out), the Lead's tools
(send_message, request_shutdown, review_plan), a teammate's submit_plan, each
teammate's state, the DAG redrawn after every click, and a log. Displayed, the
panel also leaves the board as a static SVG for pages without widgets.

Approvals (`viz/approvals.py`): with a `ButtonApprover` as the team's
approver, a step runs the tick on a helper thread and the click waits until
that tick finishes or parks on an approval request; the approve/deny buttons
resume it. In the browser edition the tick runs in an asyncio task instead,
and a click's action too (a click handler there cannot wait; its task can).
Every widget is updated from the thread that handled the click, never from
the helper, and every wait is bounded. Output widgets are filled
kernel-side (never `with out:`), so tests and notebooks read what the student
sees: `log`, `last_outcome`, `dot_source`, `pending_approval`, `error_outputs()`.
"""

from __future__ import annotations

import functools
import html
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import ipywidgets as widgets

from agent17.agent.permissions import ApprovalRequest
from agent17.browser import IN_BROWSER, can_suspend, has_stack_switching, run_as_task
from agent17.claims import ToolContext
from agent17.deterministic import ManualClock
from agent17.domain import EventKind, utc_now
from agent17.team.plans import PlanRecord
from agent17.team.teammate import TickOutcome
from agent17.tools.base import describe_result
from agent17.viz.approvals import ButtonApprover, TickJob, describe_request
from agent17.viz.dag import BoardGraph, active_leases, board_digraph
from agent17.viz.replay import describe_event, static_bundle
from agent17.viz.stepper_text import (
    TeammateFacts,
    approval_text,
    log_html,
    states_html,
    status_text,
    teammate_state,
)
from agent17.wire import wire_clock

if TYPE_CHECKING:
    from agent17.bootstrap import Team

DEFAULT_STEP_TIMEOUT_SECONDS: Final = 60.0
LOG_LINES_SHOWN: Final = 14


# ---------------------------------------------------------------------------
# The stepper
# ---------------------------------------------------------------------------


class TeamStepper:
    """A control panel for a built, not started, team: step each teammate one pass per click.

    Display it as the last expression of a cell (or `display(stepper)`).
    Notebooks without a browser call the same methods the buttons call:
    `step(name)`, `advance_clock(s)`, `send_message(to, text)`,
    `request_shutdown(name)`, `review_latest_plan(approve)`, `answer_approval(approve)`.
    """

    def __init__(
        self,
        team: Team,
        *,
        approvals: ButtonApprover | None = None,
        step_timeout: float = DEFAULT_STEP_TIMEOUT_SECONDS,
        clock_step_seconds: int = 60,
        message: str = "Please report when you are idle.",
    ) -> None:
        self.team = team
        if approvals is None and isinstance(team.settings.approver, ButtonApprover):
            approvals = team.settings.approver
        self.approvals = approvals
        self.step_timeout = step_timeout
        self._jobs: dict[str, TickJob] = {}
        self._log: list[str] = []
        self._errors: list[str] = []
        self._last_outcome: TickOutcome | None = None
        self._graph: BoardGraph | None = None
        self._names: tuple[str, ...] = ()
        self._seen_event = 0

        self.buttons: dict[str, widgets.Button] = {}
        self._step_row = widgets.HBox([])
        clock = team.settings.clock
        self._manual_clock = clock if isinstance(clock, ManualClock) else None
        self.clock_seconds = widgets.BoundedIntText(
            value=clock_step_seconds,
            min=1,
            max=86_400,
            description="seconds",
            layout=widgets.Layout(width="150px"),
        )
        self.recipient = widgets.Dropdown(
            options=[], description="to", layout=widgets.Layout(width="160px")
        )
        self.message_text = widgets.Text(
            value=message, description="message", layout=widgets.Layout(width="340px")
        )
        self.approval_label = widgets.HTML(layout=widgets.Layout(flex="1 1 auto"))
        self.status = widgets.HTML()
        self.states = widgets.HTML()
        self._panel_closed = False
        self.picture = widgets.Output()
        self.log_view = widgets.HTML()
        self.errors_output = widgets.Output()

        advance = self._button(
            "advance clock", lambda: self.advance_clock(self.clock_seconds.value)
        )
        advance.disabled = self._manual_clock is None
        lead_row = widgets.HBox(
            [
                widgets.HTML("<b>Lead</b>&nbsp;"),
                self.recipient,
                self.message_text,
                self._button(
                    "send message",
                    lambda: self.send_message(self.recipient.value, self.message_text.value),
                ),
                self._button(
                    "request shutdown", lambda: self.request_shutdown(self.recipient.value)
                ),
                self._button("approve plan", lambda: self.review_latest_plan(approve=True)),
                self._button("reject plan", lambda: self.review_latest_plan(approve=False)),
            ],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        teammate_row = widgets.HBox(
            [
                widgets.HTML("<b>Teammate</b>&nbsp;"),
                self._button(
                    "submit plan",
                    lambda: self.submit_plan(self.recipient.value, self.message_text.value),
                ),
                widgets.HTML("&nbsp;(the message text, as a plan of the teammate chosen in 'to')"),
            ]
        )
        approval_row = widgets.HBox(
            [
                widgets.HTML("<b>Approval</b>&nbsp;"),
                self._button("approve request", lambda: self.answer_approval(approve=True)),
                self._button("deny request", lambda: self.answer_approval(approve=False)),
                self.approval_label,
            ]
        )
        self.widget = widgets.VBox(
            [
                widgets.HBox([self._step_row, advance, self.clock_seconds]),
                self.states,
                lead_row,
                teammate_row,
                approval_row,
                self.status,
                self.picture,
                self.log_view,
                self.errors_output,
            ]
        )
        self.refresh()

    # -- what tests and notebooks read ------------------------------------------------

    @property
    def log(self) -> tuple[str, ...]:
        """Every log line so far, oldest first."""
        return tuple(self._log)

    @property
    def errors(self) -> tuple[str, ...]:
        """Failures of button handlers ('button: Type: message'); empty on every normal path."""
        return tuple(self._errors)

    @property
    def last_outcome(self) -> TickOutcome | None:
        """The outcome of the last finished step (None before any)."""
        return self._last_outcome

    @property
    def dot_source(self) -> str:
        """The DOT source of the DAG the panel shows right now."""
        return "" if self._graph is None else str(self._graph.source)

    @property
    def pending_approval(self) -> ApprovalRequest | None:
        """The approval request the buttons would answer, or None."""
        return self.approvals.pending if self.approvals is not None else None

    def now(self) -> datetime:
        """The team's time (its injected clock, else real UTC time)."""
        clock = self.team.settings.clock
        return clock() if clock is not None else utc_now()

    def error_outputs(self) -> list[dict[str, Any]]:
        """Every `error` output in the panel's Output widgets (empty on every normal path)."""
        outputs = [*self.picture.outputs, *self.errors_output.outputs]
        return [item for item in outputs if item.get("output_type") == "error"]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Beside the widget, the board now as SVG: what GitHub and nbviewer show.
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if self._graph is None or self._panel_closed or self.team.closed:
            return bundle
        states = " · ".join(f"{name}: {state}" for name, state in self.teammate_states().items())
        return static_bundle(
            bundle, self._graph, f"TeamStepper at {wire_clock(self.now())}: {states}"
        )

    # -- actions (the buttons call exactly these) ----------------------------------------

    def step(self, name: str) -> TickOutcome | None:
        """Run one idle-loop pass of `name`; None if it stopped to wait for an approval."""
        job = self._jobs.get(name)
        if job is not None and not job.done:
            self._tell(f"{name}: still waiting for approval; answer it first")
            return None
        if name in self.team.teammates.active_workers():
            # Two drivers for one teammate would make the story unrepeatable.
            self._tell(f"{name}: runs on its own worker (runtime started); not stepped")
            return None
        teammate = self.team.teammates.teammate(name)
        if job is None:
            if self.approvals is None:
                return self._finish(teammate.tick())
            job = self.approvals.start(name, teammate.tick)
            self._jobs[name] = job
        return self._follow(job)

    def answer_approval(self, *, approve: bool) -> TickOutcome | None:
        """Approve or deny the waiting request and let its tick go on; its outcome, or None."""
        if self.approvals is None or self.approvals.pending is None:
            self._tell("human: nothing is waiting for approval")
            return None
        request = self.approvals.answer(approve)
        verdict = "approved" if approve else "denied"
        self._say(f"human: {verdict} {request.identity}'s {request.tool}")
        job = self._jobs.get(request.identity)
        if job is None:  # a request from a tick the stepper does not drive
            self.refresh()
            return None
        return self._follow(job)

    def advance_clock(self, seconds: float) -> datetime:
        """Move the team's ManualClock forward (leases run out); the new time."""
        if self._manual_clock is None:
            raise TypeError("the team's clock is not a ManualClock; time cannot be moved")
        now = self._manual_clock.advance(seconds)
        self._tell(f"clock: +{seconds:g} s -> {wire_clock(now)}")
        return now

    def send_message(self, to: str | None, content: str) -> dict[str, Any]:
        """The Lead sends `content` to `to` (through its send_message tool); the tool result."""
        return self._lead_tool("send_message", {"to": to or "", "content": content})

    def request_shutdown(self, name: str | None) -> dict[str, Any]:
        """The Lead asks `name` to shut down (through its request_shutdown tool)."""
        return self._lead_tool("request_shutdown", {"name": name or ""})

    def latest_pending_plan(self) -> PlanRecord | None:
        """The most recent plan the Lead has not answered yet, or None."""
        waiting = self.team.protocol.awaiting_review()
        return waiting[-1] if waiting else None

    def review_latest_plan(self, *, approve: bool, feedback: str = "") -> dict[str, Any]:
        """The Lead approves or rejects the latest pending plan (through review_plan)."""
        plan = self.latest_pending_plan()
        if plan is None:
            self._tell("lead: no plan is waiting for review")
            return {}
        arguments = {"request_id": plan.request_id, "approve": approve, "feedback": feedback}
        return self._lead_tool("review_plan", arguments, about=plan.agent)

    def submit_plan(self, name: str | None, plan: str) -> dict[str, Any]:
        """Teammate `name` submits `plan` to the Lead (through its own submit_plan tool)."""
        if name is None:
            self._tell("nobody to submit a plan for")
            return {}
        runner = self.team.runners.get(name)
        tool = runner.tools.get("submit_plan") if runner is not None else None
        if tool is None:
            raise LookupError(f"{name} has no submit_plan tool")
        result = tool.run({"plan": plan}, ToolContext(identity=name))
        self._tell(f"{name}: {describe_result('submit_plan', result)}")
        return result

    def close(self) -> None:
        """Deny every parked request, wait (bounded) for the ticks, and turn the buttons off."""
        self._panel_closed = True
        for button in self.buttons.values():
            button.disabled = True
        self.status.value = "this panel is closed (its team was closed): build a new team to go on"
        if self.approvals is not None:
            while self.approvals.pending is not None:
                self.approvals.answer(False)
        for job in list(self._jobs.values()):
            if job.thread is not None:
                job.thread.join(self.step_timeout)
        self._jobs.clear()

    # -- inside ---------------------------------------------------------------------

    def _follow(self, job: TickJob) -> TickOutcome | None:
        assert self.approvals is not None
        if not self.approvals.settle(job, self.step_timeout):
            raise TimeoutError(
                f"{job.name}'s step neither finished nor asked for approval"
                f" within {self.step_timeout:g} s"
            )
        if not job.done:
            request = self.approvals.request_of(job)
            if request is not None:
                self._say(f"{job.name}: waiting for approval: {describe_request(request)}")
            self.refresh()
            return None
        del self._jobs[job.name]
        if job.thread is not None:
            job.thread.join(self.step_timeout)
        if job.error is not None:
            raise job.error
        assert job.outcome is not None
        return self._finish(job.outcome)

    def _finish(self, outcome: TickOutcome) -> TickOutcome:
        self._last_outcome = outcome
        self._tell(outcome.describe())
        return outcome

    def _lead_tool(
        self, tool_name: str, arguments: dict[str, Any], *, about: str | None = None
    ) -> dict[str, Any]:
        lead = self.team.lead
        tool = lead.tools.get(tool_name)
        if tool is None:
            raise LookupError(f"the Lead has no {tool_name} tool")
        result = tool.run(arguments, ToolContext(identity=lead.identity))
        target = about or arguments.get("to") or arguments.get("name") or ""
        self._tell(
            f"{lead.identity}: {describe_result(tool_name, result)}"
            + (f" ({target})" if target else "")
        )
        return result

    def _say(self, line: str) -> None:
        self._log.append(line)

    def _tell(self, line: str) -> None:
        self._say(line)
        self.refresh()

    def _button(self, description: str, action: Callable[[], object]) -> widgets.Button:
        # max-content and no shrinking: a description is never cut off, however long
        # the text beside it (the browser test clicks by it); the text wraps instead.
        layout = widgets.Layout(width="max-content", flex="0 0 auto")
        button = widgets.Button(description=description, layout=layout)

        def click() -> None:
            if self._panel_closed or self.team.closed:
                # A panel left on screen after its team closed: say so, never a traceback.
                self.close()
                return
            try:
                action()
            except Exception as error:
                # Shown in the panel, then re-raised: ipywidgets prints the traceback too.
                self._show_error(description, error)
                raise

        def on_click(_: widgets.Button) -> None:
            if IN_BROWSER and not can_suspend() and has_stack_switching():
                # A click handler cannot wait for a parked tick in the browser; its task can.
                run_as_task(click)
            else:
                click()

        button.on_click(on_click)
        self.buttons[description] = button
        return button

    def _show_error(self, description: str, error: Exception) -> None:
        self._errors.append(f"{description}: {type(error).__name__}: {error}")
        self.errors_output.append_display_data(
            widgets.HTML(f"<b>{html.escape(description)} failed</b>")
        )
        self.errors_output.outputs += (
            {
                "output_type": "error",
                "ename": type(error).__name__,
                "evalue": str(error),
                "traceback": traceback.format_exception(error),
            },
        )

    def _sync_teammates(self) -> None:
        names = self.team.teammates.names
        if names == self._names:
            return
        self._names = names
        row = []
        for name in names:
            description = f"step {name}"
            button = self.buttons.get(description)
            if button is None:
                button = self._button(description, functools.partial(self.step, name))
                button.button_style = "primary"
            row.append(button)
        self._step_row.children = tuple(row)
        current = self.recipient.value
        self.recipient.options = list(names)
        # Keep the Lead's choice; otherwise pick the first teammate, never "nobody".
        self.recipient.value = current if current in names else (names[0] if names else None)

    def teammate_states(self) -> dict[str, str]:
        """Each teammate's state in words: closed, awaiting approval, holds X until T, idle."""
        tasks = self.team.store.list_tasks()
        leases = active_leases(self.team.store.events())
        registry = self.team.teammates.registry
        states = {}
        for name in self.team.teammates.names:
            job = self._jobs.get(name)
            plan = self.team.protocol.latest_plan(name)
            facts = TeammateFacts(
                name,
                closed=registry.is_closed(name),
                request=self.approvals.request_of(job) if self.approvals and job else None,
                plan=None if plan is None else plan.status,
            )
            states[name] = teammate_state(facts, tasks, leases)
        return states

    def refresh(self) -> None:
        """Redraw everything from the team's state: buttons, DAG, approval, status, log."""
        if self._panel_closed or self.team.closed:
            return
        self._sync_teammates()
        states = self.teammate_states()
        for name, state in states.items():
            self.buttons[f"step {name}"].disabled = state.startswith("closed")
        self.states.value = states_html(states)
        store = self.team.store
        now = self.now()
        tasks = store.list_tasks()
        events = store.events()
        for event in events:
            # Expiry happens inside the store's next transaction, not in a step: say so.
            if event.sequence > self._seen_event and event.kind is EventKind.LEASE_EXPIRED:
                self._say(f"board: {describe_event(event, tasks)}")
        self._seen_event = events[-1].sequence if events else 0
        graph = board_digraph(
            tasks,
            leases=active_leases(events, store.lease),
            now=now,
            title=f"the board at {wire_clock(now)}",
        )
        self._graph = graph
        # Filled from the kernel, never `with picture:`: strict nbval would see
        # the captured picture as a cell output.
        self.picture.outputs = ()
        self.picture.append_display_data(graph)

        request = self.pending_approval
        waiting = request is not None
        self.buttons["approve request"].disabled = not waiting
        self.buttons["deny request"].disabled = not waiting
        queued = len(self.approvals.waiting()) if self.approvals is not None else 0
        self.approval_label.value = approval_text(request, queued)
        plan_waiting = self.latest_pending_plan() is not None
        self.buttons["approve plan"].disabled = not plan_waiting
        self.buttons["reject plan"].disabled = not plan_waiting

        parked = [name for name, job in self._jobs.items() if not job.done]
        last = self._last_outcome.describe() if self._last_outcome else None
        self.status.value = status_text(now, tasks, parked, last)
        self.log_view.value = log_html(self._log[-LOG_LINES_SHOWN:])
