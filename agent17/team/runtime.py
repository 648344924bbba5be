"""TeammateRuntime: spawns teammates and, once started, runs each one's idle loop in a worker.

Wiring order is part of the contract: `configure_protocol()` before
`configure_work_stealing()` (automatic claims depend on the plan gate), both
and `configure_agent_factory()` before `start()`, each exactly once, nothing
after `start()`. Getting it wrong raises TeammateStateError at wiring time.

A worker loops over `Teammate.tick()`. After a pass that found nothing (idle
or plan-blocked) it waits on the injected sleeper; a message wakes it early
and an early wake does not use up its poll budget. After `max_idle_polls`
empty polls in a row the teammate stays idle, its idle-timeout counter goes
up and its worker ends. Nothing is faked: no shutdown request, no
response, no summary. A later message to that teammate starts a fresh worker.
Workers are plain threads owned by the runtime; `stop()` joins them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent17.claims import WiringError, WorkStealingRuntime
from agent17.domain import Refusal, TaskStatus, completed_ids, is_ready
from agent17.team.idle_loop import run_idle_loop
from agent17.team.mailbox import TeamMailbox
from agent17.team.protocol import DEFAULT_LEAD_NAME, TeamProtocol
from agent17.team.registry import TeamCode, TeamError, TeamRegistry, require_teammate_name
from agent17.team.simulation import SimulatedTime
from agent17.team.sleepers import EventSleeper, Sleeper, WatcherFactory
from agent17.team.teammate import Teammate, TeammateAgent, TickOutcome

AgentFactory = Callable[[str], TeammateAgent]
"""Builds the agent of the teammate with the given name."""

OutcomeListener = Callable[[TickOutcome], None]
"""Called with every outcome a worker's tick produces (from the worker's thread)."""


class TeammateStateError(WiringError):
    """The runtime was configured in the wrong order, twice, or after start."""


class TeammateRuntime:
    """The team's teammates, their wiring, and (after `start()`) their worker threads."""

    def __init__(
        self,
        mailbox: TeamMailbox,
        *,
        lead_name: str = DEFAULT_LEAD_NAME,
        sleeper: Sleeper | None = None,
        on_outcome: OutcomeListener | None = None,
        simulation: SimulatedTime | None = None,
        watch: WatcherFactory | None = None,
    ) -> None:
        self.mailbox = mailbox
        self.registry = TeamRegistry(mailbox)
        # Optional simulated time (the offline demo): workers are its actors, one runs at
        # a time and waits are simulated. None: free concurrency in real time.
        self.simulation = simulation
        self.lead_name = lead_name
        self.sleeper: Sleeper = sleeper if sleeper is not None else simulation or EventSleeper()
        self._on_outcome = on_outcome
        # Real time only: each worker gets a sleeper of its own that other processes'
        # (other hosts') changes wake, instead of the shared in-process `sleeper`.
        if watch is not None and (sleeper is not None or simulation is not None):
            raise ValueError("watch is a sleeper of each worker's own: give it alone")
        self._watch = watch
        # One re-entrant condition guards all state below and signals every change of it.
        self._state = threading.Condition()
        self._protocol: TeamProtocol | None = None
        self._work_stealing: WorkStealingRuntime | None = None
        self._agent_factory: AgentFactory | None = None
        self._started = False
        self._stopping = False
        self._teammates: dict[str, Teammate] = {}
        self._workers: dict[str, threading.Thread] = {}
        self._threads: list[threading.Thread] = []
        self._sleeping: set[str] = set()
        self._idle_timeouts: dict[str, int] = {}
        self._failures: dict[str, BaseException] = {}

    # -- wiring --------------------------------------------------------------------

    def _refuse_after_start(self, step: str) -> None:
        if self._started:
            raise TeammateStateError(f"{step}() must be called before start()")

    def configure_protocol(self, protocol: TeamProtocol) -> None:
        """Set the team protocol (first step; once; before start)."""
        with self._state:
            self._refuse_after_start("configure_protocol")
            if self._protocol is not None:
                raise TeammateStateError("the protocol is already configured")
            if protocol.mailbox is not self.mailbox:
                raise TeammateStateError("the protocol must use the runtime's own mailbox")
            if protocol.lead_name != self.lead_name:
                raise TeammateStateError(
                    f"the protocol's lead is {protocol.lead_name!r},"
                    f" the runtime's is {self.lead_name!r}"
                )
            self._protocol = protocol

    def configure_work_stealing(self, work_stealing: WorkStealingRuntime) -> None:
        """Set the shared board (after the protocol, since claims ask its plan gate; once)."""
        with self._state:
            self._refuse_after_start("configure_work_stealing")
            if self._protocol is None:
                raise TeammateStateError(
                    "configure_protocol() must come before configure_work_stealing():"
                    " automatic claims depend on the protocol's plan gate"
                )
            if self._work_stealing is not None:
                raise TeammateStateError("work stealing is already configured")
            self._work_stealing = work_stealing

    def configure_agent_factory(self, factory: AgentFactory) -> None:
        """Set how a teammate's agent is built from its name (once; before start)."""
        with self._state:
            self._refuse_after_start("configure_agent_factory")
            if self._agent_factory is not None:
                raise TeammateStateError("the agent factory is already configured")
            self._agent_factory = factory

    @property
    def protocol(self) -> TeamProtocol:
        """The configured protocol."""
        if self._protocol is None:
            raise TeammateStateError("configure_protocol() has not been called")
        return self._protocol

    @property
    def work_stealing(self) -> WorkStealingRuntime:
        """The configured work-stealing runtime (the one shared board)."""
        if self._work_stealing is None:
            raise TeammateStateError("configure_work_stealing() has not been called")
        return self._work_stealing

    def _require_wired(self, step: str) -> AgentFactory:
        missing = [
            name
            for name, part in (
                ("configure_protocol()", self._protocol),
                ("configure_work_stealing()", self._work_stealing),
                ("configure_agent_factory()", self._agent_factory),
            )
            if part is None
        ]
        if missing or self._agent_factory is None:
            raise TeammateStateError(f"{step} needs {', '.join(missing)} first")
        return self._agent_factory

    # -- teammates -----------------------------------------------------------------

    def spawn(self, name: str) -> Teammate:
        """Create teammate `name` (unique, lowercase); if started, its worker starts too."""
        with self._state:
            factory = self._require_wired("spawn()")
            require_teammate_name(name, self.lead_name)
            if name in self._teammates:
                raise TeamError(TeamCode.TEAMMATE_EXISTS, f"teammate {name!r} already exists")
            if self._stopping:
                raise TeammateStateError("the runtime is stopped")
            teammate = Teammate(
                name,
                agent=factory(name),
                protocol=self.protocol,
                work_stealing=self.work_stealing,
            )
            self._teammates[name] = teammate
            self._idle_timeouts[name] = 0
            if self._started:
                self._start_worker(teammate)
            self._state.notify_all()
            return teammate

    @property
    def names(self) -> tuple[str, ...]:
        """Teammate names in spawn order."""
        with self._state:
            return tuple(self._teammates)

    def teammate(self, name: str) -> Teammate:
        """The teammate called `name` (TeamError `unknown_teammate` otherwise)."""
        with self._state:
            found = self._teammates.get(name)
        if found is None:
            raise TeamError(TeamCode.UNKNOWN_TEAMMATE, f"there is no teammate {name!r}")
        return found

    # -- autonomous mode -------------------------------------------------------------

    def start(self) -> None:
        """Start one worker per teammate (and for every teammate spawned later)."""
        with self._state:
            self._require_wired("start()")
            if self._started:
                raise TeammateStateError("the runtime is already started")
            self._started = True
            self.mailbox.wakeups.subscribe(self._on_wake)
            for teammate in self._teammates.values():
                if not teammate.closed:
                    self._start_worker(teammate)

    def _start_worker(self, teammate: Teammate) -> None:
        if self.simulation is not None:
            self.simulation.join(teammate.name)
        thread = threading.Thread(
            target=self._work, args=(teammate,), name=f"agent17-teammate-{teammate.name}"
        )
        self._workers[teammate.name] = thread
        self._threads = [old for old in self._threads if old.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _on_wake(self, name: str) -> None:
        # A message to a teammate whose worker ended (idle timeout) brings it back.
        with self._state:
            teammate = self._teammates.get(name)
            if (
                self._started
                and not self._stopping
                and teammate is not None
                and not teammate.closed
                and name not in self._workers
            ):
                self._start_worker(teammate)
            self._state.notify_all()

    def _work(self, teammate: Teammate) -> None:
        name = teammate.name
        wake = self.mailbox.wakeups.event_for(name)

        def stopping() -> bool:
            with self._state:
                return self._stopping

        def on_wait(waiting: bool) -> None:
            with self._state:
                if waiting:
                    self._sleeping.add(name)
                else:
                    self._sleeping.discard(name)
                self._state.notify_all()

        sleeper: Sleeper = self.sleeper
        before_scan: Callable[[], None] | None = None
        stop_watching: Callable[[], None] | None = None
        try:
            if self.simulation is not None:
                self.simulation.enter(name)
            if self._watch is not None:
                watcher, stop_watching = self._watch(name)
                sleeper, before_scan = watcher, watcher.mark
            teammate.recover_unacked()
            run_idle_loop(
                teammate,
                sleeper=sleeper,
                wake=wake,
                poll_interval_seconds=self.work_stealing.poll_interval_seconds,
                max_idle_polls=self.work_stealing.max_idle_polls,
                stopping=stopping,
                time_out=lambda: self._time_out(name, wake),
                on_outcome=self._on_outcome,
                on_wait=on_wait,
                before_scan=before_scan,
            )
        except Refusal as error:
            # A coded stop (its model server refused or kept failing): reported by
            # whoever reads failures(), in one line, not as this thread's traceback.
            with self._state:
                self._failures[name] = error
        except BaseException as error:
            with self._state:
                self._failures[name] = error
            raise
        finally:
            if stop_watching is not None:
                stop_watching()
            with self._state:
                if self._workers.get(name) is threading.current_thread():
                    del self._workers[name]
                self._sleeping.discard(name)
                self._state.notify_all()
            if self.simulation is not None:
                self.simulation.leave()

    def _time_out(self, name: str, wake: threading.Event) -> bool:
        # Decided under the lock that _on_wake takes: a message that arrives now
        # either keeps this worker going or finds it gone and starts a new one.
        with self._state:
            if wake.is_set() or self._stopping:
                return False
            self._idle_timeouts[name] += 1
            del self._workers[name]
            self._state.notify_all()
            return True

    def idle_timeout_count(self, name: str) -> int:
        """How many times teammate `name` ran out of idle polls."""
        with self._state:
            return self._idle_timeouts.get(name, 0)

    def wait_for_idle_timeout(
        self, name: str, count: int = 1, timeout: float | None = None
    ) -> bool:
        """Block until `name` has timed out `count` times; False if `timeout` passed first."""
        with self._state:
            return self._state.wait_for(lambda: self._idle_timeouts.get(name, 0) >= count, timeout)

    def active_workers(self) -> tuple[str, ...]:
        """Names of teammates whose worker is running, in spawn order."""
        with self._state:
            return tuple(name for name in self._teammates if name in self._workers)

    def wait_for_workers(self, timeout: float | None = None) -> bool:
        """Block until no worker is running (all timed out, closed or failed); False on timeout."""
        with self._state:
            return self._state.wait_for(lambda: not self._workers, timeout)

    def failures(self) -> dict[str, BaseException]:
        """The exception that ended each teammate's worker, if any did."""
        with self._state:
            return dict(self._failures)

    def run_until_quiet(self, timeout: float | None = None) -> bool:
        """Wait until every worker sleeps or has ended, no teammate has mail and the board is done.

        "Done" means no task in progress and no pending task whose dependencies
        are all completed. Returns True when quiet; False on timeout, or when no
        worker is left running although work remains (nothing could change it).
        """
        with self._state:
            self._state.wait_for(self._quiet_or_stalled, timeout)
            return self._quiet()

    def _settled(self) -> bool:
        return all(name not in self._workers or name in self._sleeping for name in self._teammates)

    def _quiet(self) -> bool:
        return (
            self._settled()
            and all(
                teammate.closed or self.mailbox.unacked_count(name) == 0
                for name, teammate in self._teammates.items()
            )
            and self._board_done()
        )

    def _quiet_or_stalled(self) -> bool:
        return self._quiet() or not self._workers

    def _board_done(self) -> bool:
        tasks = self.work_stealing.store.list_tasks()
        completed = completed_ids(tasks)
        return not any(
            task.status is TaskStatus.IN_PROGRESS or is_ready(task, completed) for task in tasks
        )

    def stop(self, timeout: float | None = None) -> None:
        """Stop every worker after its current tick and join them (idempotent)."""
        with self._state:
            self._stopping = True
            self.mailbox.wakeups.unsubscribe(self._on_wake)
            threads = list(self._threads)
            names = list(self._teammates)
        for name in names:
            self.mailbox.wakeups.event_for(name).set()
        if self.simulation is not None:
            self.simulation.poke()  # the woken workers are actors: let them see the stop
        for thread in threads:
            thread.join(timeout)
        for teammate in list(self._teammates.values()):
            teammate.leave()

    def __enter__(self) -> TeammateRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
