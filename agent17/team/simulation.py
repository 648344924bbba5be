"""Simulated time: real threads on a manual clock, one at a time, the same story every run.

The offline demo and notebook 07 run every teammate in its own thread, as
`agent17 run` does, but they must print the same story each time. So each
thread is an *actor* of a `SimulatedTime`:

- only one actor runs at a time (it "has the floor"), from where it starts
  until it waits: for its poll interval, for a message, or for its work;
- when the running actor waits, the floor goes to the first actor (in join
  order) that can go on now: its message arrived, or its deadline has come;
- when nobody can go on, the clock jumps to the earliest deadline.

So alice can claim A and work on it for 30 simulated seconds while bob claims
B and works for 45: both hold their tasks at the same time, as real teammates
would, and the board shows it. Nothing real is slept: a run takes milliseconds.
`wait()` is the sleeper protocol of the teammate runtime; `sleep()` is a
teammate's work. Every thread that touches the team must be an actor, or hold
no floor while it waits for one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from agent17.deterministic import COURSE_START, ManualClock

STUCK_TIMEOUT_SECONDS: Final = 60.0
"""Real seconds an actor waits for the floor before the simulation calls itself stuck."""


class SimulationStuck(RuntimeError):
    """An actor never got the floor back: some thread waited outside the simulation."""


@dataclass(slots=True)
class _Actor:
    name: str
    state: str = "ready"  # ready | running | waiting | gone
    deadline: datetime | None = None
    wake: threading.Event | None = None
    woken: bool = False


class SimulatedTime:
    """A manual clock plus a scheduler that lets one actor thread run at a time."""

    def __init__(self, start: datetime = COURSE_START) -> None:
        self.clock = ManualClock(start)
        self._condition = threading.Condition()
        self._actors: dict[str, _Actor] = {}
        self._running: str | None = None
        self._local = threading.local()

    # -- actors -------------------------------------------------------------------

    def join(self, name: str) -> None:
        """Add actor `name`, ready to run now (it runs once it calls `enter`)."""
        with self._condition:
            actor = self._actors.get(name)
            if actor is not None and actor.state != "gone":
                raise ValueError(f"actor {name!r} is already in the simulation")
            self._actors.pop(name, None)
            self._actors[name] = _Actor(name)  # re-joining goes to the back of the order

    def enter(self, name: str) -> None:
        """Make the calling thread actor `name` and block until it has the floor."""
        self._local.name = name
        with self._condition:
            if name not in self._actors:
                raise ValueError(f"actor {name!r} has not joined")
            if self._running is None:
                self._pass_floor()
            self._await_floor(name)

    def leave(self) -> None:
        """The calling actor is done: it gives up the floor for good."""
        name = self._current()
        with self._condition:
            actor = self._actors[name]
            actor.state = "gone"
            if self._running == name:
                self._running = None
                self._pass_floor()

    # -- waiting ------------------------------------------------------------------

    def wait(self, seconds: float, wake: threading.Event) -> bool:
        """Sleeper protocol: wait `seconds` of simulated time or until `wake`; True if woken."""
        return self._wait(seconds, wake)

    def sleep(self, seconds: float) -> None:
        """Spend `seconds` of simulated time (a teammate's work); nothing cuts it short."""
        self._wait(seconds, None)

    def _wait(self, seconds: float, wake: threading.Event | None) -> bool:
        name = self._current()
        with self._condition:
            actor = self._actors[name]
            actor.state = "waiting"
            actor.deadline = self.clock() + timedelta(seconds=seconds)
            actor.wake = wake
            actor.woken = False
            self._running = None
            self._pass_floor()
            self._await_floor(name)
            return actor.woken

    # -- the scheduler (called with the condition held) ------------------------------

    def _pass_floor(self) -> None:
        while True:
            now = self.clock()
            for actor in self._actors.values():
                woken = actor.state == "waiting" and actor.wake is not None and actor.wake.is_set()
                due = (
                    actor.state == "waiting"
                    and actor.deadline is not None
                    and actor.deadline <= now
                )
                if actor.state == "ready" or woken or due:
                    actor.woken = woken
                    actor.state = "running"
                    self._running = actor.name
                    self._condition.notify_all()
                    return
            deadlines = [
                actor.deadline
                for actor in self._actors.values()
                if actor.state == "waiting" and actor.deadline is not None
            ]
            if not deadlines:
                return  # nobody can run: every actor is gone
            self.clock.set(min(deadlines))

    def _await_floor(self, name: str) -> None:
        if not self._condition.wait_for(lambda: self._running == name, STUCK_TIMEOUT_SECONDS):
            raise SimulationStuck(f"{name} never got the floor back (running: {self._running})")

    def _current(self) -> str:
        name: str | None = getattr(self._local, "name", None)
        if name is None:
            raise RuntimeError("this thread is not an actor of the simulation (call enter first)")
        return name

    def poke(self) -> None:
        """Let a waiting actor go on after a thread outside the simulation woke it."""
        with self._condition:
            if self._running is None:
                self._pass_floor()

    @property
    def running(self) -> str | None:
        """The actor that has the floor now, if any."""
        with self._condition:
            return self._running
