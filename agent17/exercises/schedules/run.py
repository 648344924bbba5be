"""One schedule, played: workers paused at their points, resumed one at a time in a chosen order.

A *point* is where a worker may be switched: just before each statement it
sends through the connection it was handed, and before each lock or file step
the exercise allows. The scheduler resumes one worker; it runs that step and
its own Python up to its next point, and pauses there. So one *decision* (which
worker goes next) is one step, and the schedule is the list of decisions.

A step that would wait in the real world (SQLite's busy handler waiting for
the write lock, a lock another worker holds) raises `WouldWait` inside the
worker: the worker is then not chosen again until what it waits for is free,
and retries there, exactly where the real wait would have ended.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal, Protocol, TypeVar

from agent17.exercises.schedules.baton import Abandoned, Baton

T = TypeVar("T")

MAX_DECISIONS: Final = 400


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a timeline: in which step which worker did what, and what came of it."""

    step: int
    worker: str
    action: str  # a statement, a lock or file step, or "returns"
    arguments: str  # the statement's parameters, or the step's argument, as text ("" if none)
    result: str


@dataclass(frozen=True, slots=True)
class Problem:
    """What broke the rule: `kind` names the rule (shrinking keeps it), `words` say it."""

    kind: str
    words: str


class Resource(Protocol):
    """Something a worker can wait for: a lock it could not take yet."""

    def is_free(self, worker: Worker) -> bool:
        """Whether `worker` would get it now."""


class WouldWait(Exception):
    """Raised inside a worker's step that would wait here for `resource` (`why`: in words)."""

    def __init__(self, resource: Resource, why: str) -> None:
        super().__init__(why)
        self.resource = resource
        self.why = why


@dataclass(eq=False)
class Worker:
    """A worker of one schedule: its name, its lane, and where it stands."""

    name: str
    index: int
    finished: bool = False
    blocked_on: Resource | None = None
    yielded: bool = False  # its last step was refused at once: the others go first
    abandoned: bool = False
    next_action: str = ""
    error: Exception | None = None  # what its calls raised, if they did
    # What ended it that is not the candidate's error (a deadline, SystemExit): the
    # scheduler raises it again in its own stack, where the check will see it.
    fatal: BaseException | None = None


@dataclass(eq=False)
class _Entry:
    step: int
    worker: str
    action: str
    arguments: str
    result: str

    def frozen(self) -> Row:
        return Row(self.step, self.worker, self.action, self.arguments, self.result)


Previous = Literal["gone", "ready", "refused"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One choice of the schedule: who could run, who ran, and where the last worker stood.

    `previous`: the worker of the step before could not go on ("gone": finished or
    waiting), could ("ready"), or had just been refused and should let the others go
    first ("refused": a retry that came at once would starve whoever it waits for).
    """

    runnable: tuple[int, ...]
    chosen: int
    previous: Previous
    last: int | None  # the worker of the step before (None: this is the first decision)

    @property
    def preempts(self) -> bool:
        """Whether this choice is a preemption: a switch away from a worker that could go
        on, or the refused worker again while another could run."""
        if self.previous == "ready":
            return self.chosen != self.last
        return self.previous == "refused" and self.chosen == self.last and len(self.runnable) > 1


# choose(decisions so far, runnable workers, the default choice) -> the worker to run
Chooser = Callable[[Sequence[Decision], tuple[int, ...], int], int]


class World(Protocol):
    """What the workers share in one schedule (a database file, a notes file, a board)."""

    def script(self, worker: Worker) -> None:
        """In `worker`: its calls of the candidate."""

    def after_step(self) -> Problem | None:
        """After each step: the rule broken so far, if any."""

    def at_end(self) -> Problem | None:
        """After every worker finished: the rule broken, if any (by default every rule was
        judged step by step)."""
        return None

    def close(self) -> None:
        """Let go of files and connections."""


@dataclass(eq=False)
class Run:
    """One schedule being played (see the module docstring)."""

    names: tuple[str, ...]
    baton: Baton
    workers: list[Worker] = field(init=False)
    decisions: list[Decision] = field(default_factory=list)
    current: Worker | None = None
    last: Worker | None = None  # the worker whose step ended last
    step: int = 0
    problem: Problem | None = None
    ended: bool = False  # every worker finished
    _entries: list[_Entry] = field(default_factory=list)
    _hidden: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workers = [Worker(name, index) for index, name in enumerate(self.names)]

    # -- inside a worker ---------------------------------------------------------------

    def point(self, action: str) -> Worker:
        """A point before `action`: pause until the scheduler resumes this worker."""
        worker = self._running()
        worker.next_action = action
        self.baton.pause(worker.name)
        if worker.abandoned:
            raise Abandoned
        return worker

    def attempt(self, action: str, arguments: str, do: Callable[[], T]) -> T:
        """`do()` at a point of its own, as often as it would wait (see `WouldWait`)."""
        while True:
            worker = self.point(action)
            try:
                return do()
            except WouldWait as wait:
                self.record(action, arguments, f"waits: {wait.why}")
                worker.blocked_on = wait.resource

    def record(self, action: str, arguments: str, result: str) -> _Entry:
        """A line of the timeline, in the running worker's lane; its result can still change."""
        entry = _Entry(self.step, self._running().name, action, arguments, result)
        self._entries.append(entry)
        return entry

    def hide(self, text: str, shown_as: str = "") -> None:
        """Show `text` (a scratch folder's path, a uuid) as `shown_as` in every result."""
        self._hidden.append((text, shown_as))

    def give_way(self) -> None:
        """The running worker's step was refused at once: let another worker go next."""
        self._running().yielded = True

    def _running(self) -> Worker:
        # No current worker: this is one the scheduler gave up on (it never came back in
        # time) going on by itself; it must not touch the schedule any more.
        if self.current is None or self.current.abandoned:
            raise Abandoned
        return self.current

    # -- the scheduler -------------------------------------------------------------------

    def rows(self) -> tuple[Row, ...]:
        """The timeline so far."""
        rows = [entry.frozen() for entry in self._entries]
        for text, shown_as in self._hidden:
            rows = [replace(row, result=row.result.replace(text, shown_as)) for row in rows]
        return tuple(rows)

    def play(self, world: World, choose: Chooser) -> None:
        """Start every worker, then resume one at a time as `choose` says, judging each step."""
        for worker in self.workers:
            self.baton.start(worker.name, self._body(world, worker))
        try:
            for worker in self.workers:  # each to its first point, in lane order
                self.problem = self.problem or self._resume(worker) or world.after_step()
            while self.problem is None and not self.ended:
                self.problem = self._decide(world, choose)
            if self.ended and self.problem is None:
                self.problem = world.at_end()
        finally:
            self._abandon()

    def _decide(self, world: World, choose: Chooser) -> Problem | None:
        """One decision and its step, and the problem it shows (None: go on)."""
        runnable = tuple(
            worker.index
            for worker in self.workers
            if not worker.finished
            and (worker.blocked_on is None or worker.blocked_on.is_free(worker))
        )
        if not runnable:
            self.ended = all(worker.finished for worker in self.workers)
            return None if self.ended else self._deadlock()
        if len(self.decisions) >= MAX_DECISIONS:
            return Problem(
                "endless",
                f"after {MAX_DECISIONS} steps the calls had still not finished: a loop that"
                " never ends, or one that only ends when no one else runs?",
            )
        default, previous = self._default(runnable)
        chosen = choose(self.decisions, runnable, default)
        if chosen not in runnable:
            chosen = default
        last = self.decisions[-1].chosen if self.decisions else None
        self.decisions.append(Decision(runnable, chosen, previous, last))
        self.step += 1
        worker = self.workers[chosen]
        worker.blocked_on = None
        worker.yielded = False
        problem = self._resume(worker)
        return problem or world.after_step()

    def _default(self, runnable: tuple[int, ...]) -> tuple[int, Previous]:
        """Go on with the last worker while it can; else the next lane round."""
        if not self.decisions:
            return runnable[0], "gone"
        last = self.workers[self.decisions[-1].chosen]
        if last.index in runnable and not last.yielded:
            return last.index, "ready"
        later = [index for index in runnable if index > last.index]
        others = [index for index in runnable if index != last.index]
        return (later or others or list(runnable))[0], "refused" if last.yielded else "gone"

    def _resume(self, worker: Worker, *, unwinding: bool = False) -> Problem | None:
        self.current = self.last = worker
        try:
            done = self.baton.resume(worker.name)
        finally:
            self.current = None
        if worker.fatal is not None and not unwinding:
            raise worker.fatal
        if done:
            return None
        # As far as this schedule goes it is over: if it ever comes back, it unwinds.
        worker.finished = worker.abandoned = True
        return Problem(
            "stuck",
            f"{worker.name}'s call stopped somewhere the checker cannot switch workers: it"
            " waited on something that is not the database (a threading lock, a long sleep?)"
            " while another worker was paused, or it loops without end",
        )

    def _deadlock(self) -> Problem:
        waiting = [worker for worker in self.workers if not worker.finished]
        said = "; ".join(f"{worker.name} to run {worker.next_action}" for worker in waiting)
        return Problem(
            "deadlock",
            f"every worker still running waits for a lock another one holds, so none can go"
            f" on: {said}",
        )

    def _body(self, world: World, worker: Worker) -> Callable[[], None]:
        def body() -> None:
            try:
                world.script(worker)
            except Abandoned:
                pass
            except Exception as error:  # the candidate's: the world judges it
                worker.error = error
                with contextlib.suppress(Abandoned):
                    self.record("raises", "", f"{type(error).__name__}: {error}")
            except BaseException as error:
                worker.fatal = error
            finally:
                worker.finished = True

        return body

    def _abandon(self) -> None:
        """Unwind every worker still paused at a point (its points now raise `Abandoned`)."""
        for worker in self.workers:
            if not worker.finished:
                worker.abandoned = True
                self._resume(worker, unwinding=True)
