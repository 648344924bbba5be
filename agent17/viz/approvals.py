"""Approvals that wait for a button: the stepper's human in the loop.

A teammate's effectful tool call (write_file, shell) asks the permission
policy's approver in the middle of its tick. With a `ButtonApprover` as the
team's approver, the stepper runs each tick on a short-lived helper thread
(`start`); the click waits (`settle`) until that tick either finishes or
parks on an approval request, and the panel then shows "approve request" and
"deny request". Answering (`answer`) resumes the parked tick. Every wait is
bounded, so the same clicks always give the same story. `decide_next()`
answers the next request in advance instead; a request from any other thread
(the autonomous runtime) is denied, as it would be with no approver at all.

In the browser edition (Pyodide) no helper thread can start. Where the browser
can suspend a Python call stack (WebAssembly's JavaScript Promise Integration,
Chromium 137 and later: `agent17.browser.can_suspend`), the tick runs in an
asyncio task instead, and a request it makes parks that task exactly as it
parks the thread elsewhere: the same clicks give the same story. Where nothing
can suspend (a browser without it), `start` runs the tick inline and a request
with no answer decided in advance is denied, saying so (`BROWSER_DENIAL`);
`decide_next()` before the step is the way to approve there.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from agent17.agent.permissions import ApprovalRequest
from agent17.browser import IN_BROWSER, can_suspend, suspend_until
from agent17.team.teammate import TickOutcome

DEFAULT_ANSWER_TIMEOUT_SECONDS: Final = 900.0
BROWSER_DENIAL: Final = (
    "denied: in the browser a step runs without a helper thread, so it cannot wait for"
    " a button; decide before the step (approvals.decide_next)"
)


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """One answered approval request: the request, the verdict, and who gave it."""

    request: ApprovalRequest
    approved: bool
    how: str


@dataclass(slots=True)
class TickJob:
    """One tick running on a helper thread (set and read under the approver's condition)."""

    name: str
    thread: threading.Thread | None = None
    task: asyncio.Future[None] | None = None  # in the browser, instead of the thread
    done: bool = False
    outcome: TickOutcome | None = None
    error: BaseException | None = None


@dataclass(slots=True)
class _Parked:
    request: ApprovalRequest
    job: TickJob
    answer: bool | None = None


class ButtonApprover:
    """An Approver whose requests wait for the stepper's approve/deny buttons.

    Pass it as `TeamSettings(approver=...)`. A request made by a tick that the
    stepper runs parks that tick until `answer()` (the buttons call it), or
    until `answer_timeout` seconds pass (then: denied). `decide_next()` queues
    answers in advance. Any other caller is denied at once: nobody is at the
    buttons for it.
    """

    def __init__(self, *, answer_timeout: float = DEFAULT_ANSWER_TIMEOUT_SECONDS) -> None:
        self.answer_timeout = answer_timeout
        # One condition guards the parked requests, the queued answers and the tick jobs.
        self.condition = threading.Condition()
        self._local = threading.local()
        # The browser's helper "thread": the asyncio task of a tick sees its job here.
        self._task_job: contextvars.ContextVar[TickJob | None] = contextvars.ContextVar(
            "agent17_tick_job", default=None
        )
        self._queued: list[bool] = []
        self._parked: list[_Parked] = []
        self._answers: list[ApprovalAnswer] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        """Answer `request`: a queued answer, else park until a button answers, else deny."""
        with self.condition:
            if self._queued:
                return self._record(request, self._queued.pop(0), "decided before the step")
            job: TickJob | None = getattr(self._local, "job", None) or self._task_job.get()
            if job is None:
                return self._record(request, False, "nobody at the buttons")
            if IN_BROWSER and job.task is None:
                return self._record(request, False, BROWSER_DENIAL)
            parked = _Parked(request, job)
            self._parked.append(parked)
            self.condition.notify_all()
            if not IN_BROWSER:
                answered = self.condition.wait_for(
                    lambda: parked.answer is not None, self.answer_timeout
                )
        if IN_BROWSER:
            # The tick's task is suspended here, outside the lock: the next cells run.
            answered = suspend_until(lambda: parked.answer is not None, self.answer_timeout)
        with self.condition:
            if parked in self._parked:
                self._parked.remove(parked)
            if not answered:
                return self._record(request, False, "no answer in time")
            return self._record(request, bool(parked.answer), "button")

    def _record(self, request: ApprovalRequest, approved: bool, how: str) -> bool:
        self._answers.append(ApprovalAnswer(request, approved, how))
        self.condition.notify_all()
        return approved

    def decide_next(self, approve: bool) -> None:
        """Answer the next request in advance, without parking (decide before the step)."""
        with self.condition:
            self._queued.append(approve)

    @property
    def pending(self) -> ApprovalRequest | None:
        """The oldest request waiting for a button, or None."""
        waiting = self.waiting()
        return waiting[0] if waiting else None

    def waiting(self) -> tuple[ApprovalRequest, ...]:
        """Every request waiting for a button, oldest first (the buttons answer the first)."""
        with self.condition:
            return tuple(parked.request for parked in self._parked if parked.answer is None)

    def request_of(self, job: TickJob) -> ApprovalRequest | None:
        """The request `job`'s tick is parked on, or None."""
        with self.condition:
            for parked in self._parked:
                if parked.job is job and parked.answer is None:
                    return parked.request
            return None

    @property
    def answers(self) -> tuple[ApprovalAnswer, ...]:
        """Every request answered so far, oldest first."""
        with self.condition:
            return tuple(self._answers)

    def answer(self, approve: bool) -> ApprovalRequest:
        """Answer the oldest waiting request (LookupError if none is waiting)."""
        with self.condition:
            waiting = [parked for parked in self._parked if parked.answer is None]
            if not waiting:
                raise LookupError("no approval request is waiting")
            waiting[0].answer = approve
            self.condition.notify_all()
            return waiting[0].request

    def start(self, name: str, tick: Callable[[], TickOutcome]) -> TickJob:
        """Run `tick` on a helper thread whose approval requests wait for the buttons."""
        job = TickJob(name)
        if IN_BROWSER:
            if can_suspend():
                return self._run_as_task(job, tick)
            return self._run_inline(job, tick)

        def run() -> None:
            # Marks this thread as one the buttons answer for.
            self._local.job = job
            self._tick(job, tick)

        # Daemon: a tick forgotten while parked must never keep the kernel from exiting.
        job.thread = threading.Thread(target=run, name=f"agent17-step-{name}", daemon=True)
        job.thread.start()
        return job

    def _tick(self, job: TickJob, tick: Callable[[], TickOutcome]) -> None:
        try:
            outcome = tick()
        except BaseException as error:  # handed to the stepper, which re-raises it
            with self.condition:
                job.error = error
        else:
            with self.condition:
                job.outcome = outcome
        finally:
            with self.condition:
                job.done = True
                self.condition.notify_all()

    def _run_inline(self, job: TickJob, tick: Callable[[], TickOutcome]) -> TickJob:
        self._local.job = job
        try:
            self._tick(job, tick)
        finally:
            self._local.job = None
        return job

    def _run_as_task(self, job: TickJob, tick: Callable[[], TickOutcome]) -> TickJob:
        async def run() -> None:
            # A task runs in its own copy of the context: this job is seen by its tick only.
            self._task_job.set(job)
            self._tick(job, tick)

        job.task = asyncio.ensure_future(run())
        return job

    def settle(self, job: TickJob, timeout: float) -> bool:
        """Wait until `job` has finished or parked on a request; False if `timeout` passed."""
        if job.task is not None:
            return suspend_until(lambda: job.done or self.request_of(job) is not None, timeout)
        with self.condition:
            return self.condition.wait_for(
                lambda: job.done or self.request_of(job) is not None, timeout
            )


def _preview(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe_request(request: ApprovalRequest, *, width: int = 60) -> str:
    """An approval request as one readable line: who, which tool, on what, a short preview."""
    arguments = request.arguments
    who = request.identity
    if request.tool == "write_file" and isinstance(arguments.get("content"), str):
        content = arguments["content"]
        return (
            f"{who} asks to write {arguments.get('path')} ({len(content)} characters:"
            f" {_preview(content, width)!r})"
        )
    if request.tool == "shell" and isinstance(arguments.get("command"), str):
        return f"{who} asks to run the shell command {_preview(arguments['command'], width)!r}"
    shown = json.dumps(dict(arguments), sort_keys=True)
    return f"{who} asks to run {request.tool} {_preview(shown, width)}"
