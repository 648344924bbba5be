"""Benchmark of `agent17 teammate` processes: wake-ups, idle cost, and a team draining a board.

Run it from the repository root:

    .venv/bin/python benchmarks/team_bench.py [--quick] [--dir DIR]

Every teammate here is a real OS process, started as `sys.executable -m agent17
teammate ...` with the scripted model, exactly as a user would start one; this
process plays the Lead through the public API (`SqliteTaskStore`, `Mailbox`,
`TeamProtocol`). Nothing is a test: no time is asserted; a run that goes wrong
(a teammate that exits early, a reply that never comes) stops with an error.

1) Wake-up latency across processes, both ways in the same run: one teammate woken
   by file notifications (inotify on the state folder, then a look at the board's and
   the mailbox's `PRAGMA data_version`), then one with `AGENT17_WAKEUPS=poll`, which
   looks at those every 0.1 s (its check interval; the fallback where there are no
   notifications, and how every teammate woke before). Each waits with
   `--poll-interval 30`, so the poll never does the waking: the `ChangeWatchingSleeper`
   does. Before each wake this process waits a random 0.25-0.45 s, so the teammate is
   asleep again and the wake lands at a random phase of its checks. Before the first
   wake, each teammate's CPU time (/proc/<pid>/stat) is read over an idle window.
   a) a message: `send_text(teammate, ...)` from the Lead. Latency = from the send's
      commit (send_text returned) to the moment the teammate's answer
      ("Acknowledged.") is in the Lead's mailbox, seen by this process on a read-only
      connection of its own that looks every 0.5 ms (it never writes, so it wakes
      nobody). This is the whole round trip: the wake, the teammate's handling (its
      claim of the message, the scripted model, its reply committed together with the
      ack) and up to ~0.6 ms of our looking. The teammate's own view of the wake is
      not reported: mailbox rows carry no time, and the teammate's only timestamp (its
      stdout line, in milliseconds) is written after its reply commit.
   b) a newly ready task: `create_task(...)` on the board. Latency = from the create's
      commit (create_task returned, real UTC) to the `claimed` event of that task
      (`at_utc`, read by the teammate under the write lock of its claim, real UTC:
      one machine, one clock). This is the teammate's own view: the wake plus its
      scan up to the claim (mailbox first, then the plan gate, then claim_next).
      Also shown: claimed -> completed, the scripted model's work on the task.
   Both are held against the poll interval (30 s), and the polling teammate's against
   its check interval (0.1 s). The first few wakes (imports, caches) are a warm-up and
   are not counted. A table puts the two side by side.
2) Idle CPU per teammate process. Four teammates woken by file notifications and four
   with `AGENT17_WAKEUPS=poll` wait on an empty board (`--poll-interval 5
   --max-idle-polls 1000`); after they settle, each process's user+system CPU time is
   read from /proc/<pid>/stat (utime+stime, in clock ticks) at the start and the end of
   a window. Baselines in the same window: a bare Python process waking every 0.1 s on
   a threading.Event (the polling sleeper's wake rate, nothing else), and one that also
   reads both files' PRAGMA data_version at every wake (its check, without the
   teammate around it).
3) Eight teammates drain a layered board (each task after the first layer waits for
   two tasks of the layer before it), created in one `create_tasks` transaction:
   `--work-seconds 0 --poll-interval 1 --max-idle-polls 2`, released together by
   `--start-after-file`, so they leave by idle timeout once the board is empty.
   Tasks per second from the first `claimed` to the last `completed` event; errors
   (non-zero exit codes, stderr lines, a report that is not "Completed ..."), tasks
   claimed more than once, tasks completed more than once, tasks left unfinished,
   one report per task in the Lead's mailbox. The baseline: the same board drained
   by 8 plain processes (multiprocessing spawn) calling claim_next/complete_task in
   a loop, timed the same way from its own event log. Their ratio is what the
   teammate machinery (mailbox check, plan gate, the scripted model and its audit
   record, the report message per task, the sleeper's 0.1 s checks when a layer is
   not ready yet) costs on top of the bare store. CPU per task: user+system time of
   all eight processes from the start signal until the board is done (teammates:
   /proc/<pid>/stat at the gate and once every task is completed, while they idle
   before their timeout; bare: each worker's own process_time over its loop), over
   the tasks. The full run does five rounds, alternating which side goes first, and
   shows the median of each side (the ratio: the median of the rounds' ratios): the
   fsync latency of a shared machine swings by several times within seconds.
3b) The same without contention: one teammate process, then one bare process, each
   alone on a board of 2,000 ready tasks, with the teammate's CPU per task over the
   first and over the last tenth of the drain (read in /proc as the board passes 10%
   and 90% done): what a teammate's task costs as it does more of them. Three rounds
   in the full run.

With `--postgres [DSN]` part 1 also has a teammate whose board and mailbox are in
a PostgreSQL database (`--store postgresql://...`), waiting and woken alongside the
two SQLite ones in the same run, and the table puts the three side by side. There
the teammate's `NotifySleeper` waits on LISTEN: the schemas' triggers send a
NOTIFY in the very transaction that queues the message or makes the task ready,
so no check interval stands between the commit and the wake. The Lead's side
watches its own mailbox the same way (a LISTEN session of its own, which wakes no
teammate): a) is again the whole round trip, without the ~0.5 ms of looking. b)
compares the create's commit (this host's clock) with the `claimed` event's time
(the server's clock_timestamp()): the server runs on this machine, so it is the
same clock. Without a DSN a throwaway cluster (agent17.store.pg_cluster, durable:
fsync and synchronous commit on) is started for the run on a Unix socket and
removed afterwards; a DSN names a server whose role may create databases (one is
made and dropped).
`--wakeups-only` runs part 1 alone.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import agent17
from agent17 import EventKind, Mailbox, SqliteTaskStore, TaskEvent, TaskStatus
from agent17.armour.paths import STATE_DIRNAME, TASK_DB_NAME
from agent17.team.file_wakeups import SAFETY_LOOK_SECONDS, WAKEUPS_VARIABLE
from agent17.team.protocol import DEFAULT_LEAD_NAME, TeamProtocol, TextMessage, decode_message
from agent17.team.registry import TeamRegistry
from agent17.team.sleepers import LOOK_EVERY_SECONDS

LEAD: Final = DEFAULT_LEAD_NAME
CHECK_SECONDS: Final = LOOK_EVERY_SECONDS  # the polling sleeper's check interval (0.1 s)
POLL_ENVIRONMENT: Final = {WAKEUPS_VARIABLE: "poll"}  # a teammate without file notifications
WAKE_POLL_SECONDS: Final = 30.0  # 1) long enough that the poll never does the waking
SETTLE_SECONDS: Final = (0.25, 0.45)  # 1) random pause before each wake: two check periods
WARMUP_WAKES: Final = 3  # 1) wakes of each kind run first and not counted
WAKE_SETTLE_SECONDS: Final = 1.0  # 1) after joining: its first scan is over, it sleeps
WATCH_SECONDS: Final = 0.0005  # how often this process looks at the Lead's mailbox
IDLE_POLL_SECONDS: Final = 5.0  # 2)
IDLE_TEAMMATES: Final = 4  # 2)
IDLE_SETTLE_SECONDS: Final = 3.0  # 2) after joining: imports done, first scan over
DRAIN_PROCESSES: Final = 8  # 3)
DRAIN_LAYERS: Final = 10  # 3)
WAIT_SECONDS: Final = 120.0  # how long anything here waits for one step before giving up
MAX_WORKER_ERRORS: Final = 100
SEED: Final = 17

Draft = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each part of a run is."""

    wakes: int  # 1) counted wakes of each kind
    wake_idle_seconds: float  # 1) the idle window before the wakes
    idle_seconds: float  # 2) the measured window
    drain_tasks: int  # 3) tasks on the drained board
    drain_rounds: int  # 3) teammates/bare rounds, alternating which side goes first
    alone_tasks: int  # 3b) ready tasks on the board (enough for the tenths to show the growth)
    alone_rounds: int  # 3b) the same, one process each


FULL: Final = Sizes(
    wakes=100,
    wake_idle_seconds=20.0,
    idle_seconds=60.0,
    drain_tasks=2_000,
    drain_rounds=5,
    alone_tasks=2_000,
    alone_rounds=3,
)
QUICK: Final = Sizes(
    wakes=30,
    wake_idle_seconds=5.0,
    idle_seconds=10.0,
    drain_tasks=500,
    drain_rounds=1,
    alone_tasks=2_000,
    alone_rounds=1,
)


@dataclass(slots=True)
class Section:
    """One printed table: a title, a header, rows of cells, and notes below it."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _progress(message: str) -> None:
    sys.stdout.flush()
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- processes -----------------------------------------------------------------------------


@dataclass(slots=True)
class Started:
    """One process this benchmark started, with the files its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def stderr_lines(self) -> list[str]:
        """What it wrote on stderr, line by line."""
        text = self.stderr.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if line.strip()]

    def check_alive(self) -> None:
        """Raise if it has ended (with its exit code and the end of its stderr)."""
        code = self.process.poll()
        if code is not None:
            tail = " | ".join(self.stderr_lines()[-3:])
            raise RuntimeError(f"{self.name} (pid {self.pid}) exited with code {code}: {tail}")


def _package_environment() -> dict[str, str]:
    """The environment of a child: this process's, with our agent17 first on its path."""
    environment = dict(os.environ)
    root = str(Path(agent17.__file__).resolve().parent.parent)
    inherited = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = root + (os.pathsep + inherited if inherited else "")
    return environment


class ProcessGroup:
    """Every process the benchmark starts; whatever is still running at exit is killed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started: list[Started] = []
        self._environment = _package_environment()

    def start(
        self, name: str, argv: Sequence[str], environment: dict[str, str] | None = None
    ) -> Started:
        """Start `argv` (with `environment` added to ours) with its stdout and stderr in files."""
        stdout = self.folder / f"{name}-{len(self.started)}.out"
        stderr = self.folder / f"{name}-{len(self.started)}.err"
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env={**self._environment, **(environment or {})},
            )
        started = Started(name, process, stdout, stderr)
        self.started.append(started)
        return started

    def teammate(
        self,
        name: str,
        workspace: Path,
        *options: str,
        environment: dict[str, str] | None = None,
    ) -> Started:
        """Start `agent17 teammate --name NAME --workspace WORKSPACE OPTIONS...`."""
        argv = [sys.executable, "-m", "agent17", "teammate", "--name", name]
        return self.start(name, [*argv, "--workspace", str(workspace), *options], environment)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for started in self.started:
            if started.process.poll() is None:
                started.process.kill()  # by its own handle: only what this run started
        for started in self.started:
            started.process.wait()


def wait_joined(mailbox: Mailbox, teammates: Sequence[Started]) -> None:
    """Block until every teammate has joined the team (its row names its pid)."""
    registry = TeamRegistry(mailbox)
    deadline = time.monotonic() + WAIT_SECONDS
    waiting = list(teammates)
    while waiting:
        for started in waiting:
            started.check_alive()
        member_pids = {member.name: member.pid for member in registry.members()}
        waiting = [s for s in waiting if member_pids.get(s.name) != s.pid]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{[s.name for s in waiting]} never joined the team")
        time.sleep(0.02)


def wait_exit(processes: Sequence[Started], timeout: float = WAIT_SECONDS) -> dict[str, int]:
    """Block until every process has ended; their exit codes by name."""
    deadline = time.monotonic() + timeout
    codes: dict[str, int] = {}
    for started in processes:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            codes[started.name] = started.process.wait(left)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{started.name} did not exit within {timeout:.0f} s") from None
    return codes


def cpu_seconds(pid: int) -> float:
    """User+system CPU time of a live process so far, from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of the line
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


# -- the Lead's side -------------------------------------------------------------------------


class InboxWatcher:
    """Looks at the Lead's mailbox on a read-only connection of its own.

    It only reads (PRAGMA data_version, then one indexed SELECT when that moved), so
    it never changes what the teammates watch and never wakes one of them.
    """

    def __init__(self, mailbox: Mailbox) -> None:
        self._connection = sqlite3.connect(
            f"{mailbox.path.as_uri()}?mode=ro", uri=True, isolation_level=None
        )
        self._version = -1
        (after,) = self._connection.execute(
            "SELECT coalesce(max(sequence), 0) FROM messages"
        ).fetchone()
        self._after = int(after)

    def next_text_from(self, sender: str, watching: Started) -> tuple[float, str]:
        """Wait for the next text message from `sender` to the Lead.

        Returns the perf_counter time at which it was first seen, and its content.
        """
        deadline = time.perf_counter() + WAIT_SECONDS
        looks = 0
        while True:
            (version,) = self._connection.execute("PRAGMA data_version").fetchone()
            if version != self._version:
                self._version = version
                row = self._connection.execute(
                    "SELECT sequence, kind, body FROM messages"
                    " WHERE recipient = ? AND sender = ? AND sequence > ?"
                    " ORDER BY sequence LIMIT 1",
                    (LEAD, sender, self._after),
                ).fetchone()
                if row is not None:
                    seen = time.perf_counter()
                    self._after = int(row[0])
                    message = decode_message(row[1], row[2])
                    if not isinstance(message, TextMessage):
                        raise RuntimeError(f"{sender} sent the Lead a {message.kind}, not text")
                    return seen, message.content
            looks += 1
            if looks % 200 == 0:
                watching.check_alive()
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"no message from {sender} within {WAIT_SECONDS:.0f} s")
            time.sleep(WATCH_SECONDS)

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def quantiles(samples: Sequence[float]) -> tuple[float, float, float, float]:
    """p50, p90, p99 and max of `samples`."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[89], cuts[98], max(samples)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


class NotifyInboxWatcher:
    """Looks at the Lead's mailbox in PostgreSQL: a LISTEN session of its own on agent17_mail.

    It only listens and reads, so it never wakes a teammate; it is woken by the very
    NOTIFY the teammate's reply commits with, so no polling stands in the way.
    """

    def __init__(self, dsn: str) -> None:
        import psycopg

        self._connection = psycopg.connect(dsn, autocommit=True)
        self._connection.execute("LISTEN agent17_mail")
        (after,) = self._connection.execute(
            "SELECT coalesce(max(sequence), 0) FROM agent17.messages"
        ).fetchone() or (0,)
        self._after = int(after)

    def next_text_from(self, sender: str, watching: Started) -> tuple[float, str]:
        """Wait for the next text message from `sender` to the Lead (see InboxWatcher)."""
        deadline = time.perf_counter() + WAIT_SECONDS
        while True:
            # Consumed whole before the next statement: the generator holds the connection.
            notes = list(self._connection.notifies(timeout=0.1, stop_after=1))
            seen = time.perf_counter()
            if any(note.payload == LEAD for note in notes):
                row = self._connection.execute(
                    "SELECT sequence, kind, body FROM agent17.messages"
                    " WHERE recipient = %s AND sender = %s AND sequence > %s"
                    " ORDER BY sequence LIMIT 1",
                    (LEAD, sender, self._after),
                ).fetchone()
                if row is not None:
                    self._after = int(row[0])
                    message = decode_message(row[1], row[2])
                    if not isinstance(message, TextMessage):
                        raise RuntimeError(f"{sender} sent the Lead a {message.kind}, not text")
                    return seen, message.content
            watching.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no message from {sender} within {WAIT_SECONDS:.0f} s")

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


@dataclass(frozen=True, slots=True)
class WakeEngine:
    """Where part 1's board and mailbox live, and how the Lead's side watches its inbox."""

    name: str
    mechanism: str
    url: str | None  # None: the workspace's SQLite files
    dsn: str | None = None
    environment: dict[str, str] = field(default_factory=dict)  # the teammate's, added
    check_seconds: float | None = None  # how often it looks, when it polls

    def open(self, workspace: Path) -> tuple[Any, Any]:
        """The board and the mailbox."""
        from agent17.team.workplace import open_team_state, parse_store_url

        state = open_team_state(parse_store_url(self.url), workspace)
        return state.store, state.mailbox

    def watcher(self, mailbox: Any) -> InboxWatcher | NotifyInboxWatcher:
        return InboxWatcher(mailbox) if self.dsn is None else NotifyInboxWatcher(self.dsn)

    @property
    def options(self) -> list[str]:
        return [] if self.url is None else ["--store", self.url]


SQLITE_NOTIFIED: Final = WakeEngine("SQLite", "inotify, then PRAGMA data_version", None)
SQLITE_POLLED: Final = WakeEngine(
    "SQLite polling",
    f"PRAGMA data_version every {CHECK_SECONDS * 1000:g} ms ({WAKEUPS_VARIABLE}=poll)",
    None,
    environment=POLL_ENVIRONMENT,
    check_seconds=CHECK_SECONDS,
)


# -- 1) wake-up latency ----------------------------------------------------------------------


@dataclass(slots=True)
class Wakes:
    """Part 1's samples on one engine (seconds), warm-up included."""

    engine: WakeEngine
    message: list[float]
    task: list[float]
    handling: list[float]
    idle_cpu: float  # CPU seconds over the idle window before the wakes
    idle_window: float


class WakeTarget:
    """One engine's sleeping teammate in part 1, this process's side of it, and its samples."""

    def __init__(self, root: Path, engine: WakeEngine, group: ProcessGroup, stack: ExitStack):
        self.engine = engine
        self.name = "sleeper"
        workspace = root / f"wake-{'-'.join(engine.name.lower().split())}"
        self.store, self.mailbox = engine.open(workspace)
        stack.callback(self.store.close)
        stack.callback(self.mailbox.close)
        self.protocol = TeamProtocol(self.mailbox)
        self.teammate = group.teammate(
            self.name, workspace, *engine.options, "--poll-interval", f"{WAKE_POLL_SECONDS:g}",
            "--max-idle-polls", "1000", environment=engine.environment,
        )  # fmt: skip
        self._stack = stack
        self.watcher: InboxWatcher | NotifyInboxWatcher | None = None
        self.message: list[float] = []
        self.created: list[tuple[str, datetime]] = []

    def start_watching(self) -> None:
        """Open this process's look at the Lead's mailbox (after the idle window)."""
        self.watcher = self.engine.watcher(self.mailbox)
        self._stack.callback(self.watcher.close)

    def _reply(self) -> tuple[float, str]:
        assert self.watcher is not None
        return self.watcher.next_text_from(self.name, self.teammate)

    def wake_by_message(self, number: int) -> None:
        """a) Send a message; time it until the teammate's answer is seen."""
        self.protocol.send_text(self.name, f"wake-up {number}", sender=LEAD)
        sent = time.perf_counter()
        seen, content = self._reply()
        if content != "Acknowledged.":
            raise RuntimeError(f"{self.engine.name}: answered {content!r}, not 'Acknowledged.'")
        self.message.append(seen - sent)

    def wake_by_task(self, number: int) -> None:
        """b) Create a ready task; wait for its report (the claim's time is in the events)."""
        task = self.store.create_task(f"wake-up task {number}")
        self.created.append((task.id, datetime.now(UTC)))
        _, content = self._reply()  # its report: the pass is over
        if content != f"Completed wake-up task {number}.":
            raise RuntimeError(f"{self.engine.name}: reported {content!r}")


def bench_wakeups(
    root: Path, sizes: Sizes, group: ProcessGroup, engines: Sequence[WakeEngine]
) -> list[tuple[Section, Wakes]]:
    """A message and a ready task, each `sizes.wakes` times, to one sleeping teammate per engine.

    The engines' teammates wait side by side: their idle CPU is read over one window,
    and their wakes alternate (which engine goes first changes every round), so a
    machine that gets busier or quieter meanwhile weighs on each the same.
    """
    rng = random.Random(SEED)
    total = WARMUP_WAKES + sizes.wakes
    with ExitStack() as stack:
        targets = [WakeTarget(root, engine, group, stack) for engine in engines]
        for target in targets:
            wait_joined(target.mailbox, [target.teammate])
        time.sleep(WAKE_SETTLE_SECONDS)  # their first scans are over: they sleep
        heard_by = [_heard_by(target.teammate) for target in targets]
        _progress(f"1) {len(targets)} teammates idle for {sizes.wake_idle_seconds:g} s")
        before = [cpu_seconds(target.teammate.pid) for target in targets]
        idle_started = time.monotonic()
        time.sleep(sizes.wake_idle_seconds)
        idle_cpu = [cpu_seconds(t.teammate.pid) - b for t, b in zip(targets, before, strict=True)]
        idle_window = time.monotonic() - idle_started
        for target in targets:
            target.start_watching()

        def rounds(what: str, wake: Callable[[WakeTarget, int], None]) -> None:
            _progress(f"1{what} to each sleeping teammate, one at a time, alternating")
            for number in range(total):
                shift = number % len(targets)
                for target in [*targets[shift:], *targets[:shift]]:
                    time.sleep(rng.uniform(*SETTLE_SECONDS))
                    wake(target, number)

        rounds(f"a) {total} messages", WakeTarget.wake_by_message)
        rounds(f"b) {total} ready tasks", WakeTarget.wake_by_task)
        events = [target.store.events() for target in targets]
        for target in targets:
            target.protocol.request_shutdown(target.name)
        codes = [wait_exit([target.teammate])[target.name] for target in targets]
    return [
        _wake_section(target, sizes, events[i], (idle_cpu[i], idle_window), heard_by[i], codes[i])
        for i, target in enumerate(targets)
    ]


def _wake_section(
    target: WakeTarget,
    sizes: Sizes,
    events: list[TaskEvent],
    idle: tuple[float, float],
    heard_by: str,
    code: int,
) -> tuple[Section, Wakes]:
    """One engine's table in part 1 (`idle`: CPU seconds over a window of so many seconds)."""
    engine, message_latency = target.engine, target.message
    idle_cpu, idle_window = idle
    claimed = {e.task_id: e.at_utc for e in events if e.kind is EventKind.CLAIMED}
    completed = {e.task_id: e.at_utc for e in events if e.kind is EventKind.COMPLETED}
    task_latency = [(claimed[task_id] - at).total_seconds() for task_id, at in target.created]
    handling = [
        (completed[task_id] - claimed[task_id]).total_seconds() for task_id, _ in target.created
    ]
    counted = slice(WARMUP_WAKES, None)
    kinds = [
        ("a) message sent -> its reply in the Lead's mailbox", message_latency[counted]),
        ("b) ready task created -> its claimed event", task_latency[counted]),
        ("   claimed -> completed event (the task's handling)", handling[counted]),
    ]
    wakes = Wakes(engine, message_latency, task_latency, handling, idle_cpu, idle_window)
    title = (
        f"1) wake-up latency on {engine.name}: 1 teammate process, --poll-interval"
        f" {WAKE_POLL_SECONDS:g} s, woken by {engine.mechanism}; {sizes.wakes} wakes each"
    )
    section = Section(title, ["measurement", "n", "p50", "p90", "p99", "max", "unit"])
    for label, samples in kinds:
        section.rows.append([label, str(len(samples)), *map(_ms, quantiles(samples)), "ms"])
    check = engine.check_seconds
    if check is not None:
        for label, samples in kinds[:2]:
            values = [f"{value / check:.2f}" for value in quantiles(samples)]
            section.rows.append([f"{label[:2]} in check intervals", "", *values, f"x {check:g} s"])
    for label, samples in kinds[:2]:
        values = [f"{100 * value / WAKE_POLL_SECONDS:.2f}" for value in quantiles(samples)]
        section.rows.append([f"{label[:2]} in poll intervals", "", *values, "% of 30 s"])
    worst = max(range(len(message_latency)), key=message_latency.__getitem__)
    worst_task = max(range(len(task_latency)), key=task_latency.__getitem__)
    section.notes.append(f"the teammate said it hears of changes by {heard_by}")
    if engine.dsn is None:
        section.notes.append(
            "a) includes the teammate's claim of the message, the scripted model and its reply"
            " commit (with the ack), and up to ~0.6 ms of this process's looking"
        )
    else:
        section.notes += [
            "a) includes the teammate's claim of the message, the scripted model and its reply"
            " commit (with the ack); the Lead's side hears that commit's own NOTIFY",
            "b) the create's commit on this host's clock, the claimed event on the server's"
            " clock_timestamp(): one machine, one clock",
        ]
    if check is not None:
        section.notes.append(
            f"a pure wake at a random phase of a {check * 1000:g} ms check would be"
            f" uniform on 0..{check * 1000:g} ms: p50 {check * 500:g}, p90"
            f" {check * 900:g}, max {check * 1000:g}"
        )
    section.notes += [
        f"warm-up (not counted): a) {', '.join(map(_ms, message_latency[:WARMUP_WAKES]))} ms;"
        f" b) {', '.join(map(_ms, task_latency[:WARMUP_WAKES]))} ms",
        f"slowest: a) wake {worst} ({_ms(message_latency[worst])} ms), b) wake {worst_task}"
        f" ({_ms(task_latency[worst_task])} ms) (numbers count the warm-up)",
        f"idle before the wakes: {idle_cpu:.3f} CPU s over {idle_window:.1f} s"
        f" ({100 * idle_cpu / idle_window:.3f}% of one core)",
        f"shutdown handshake at the end: exit code {code}",
    ]
    return section, wakes


def _heard_by(teammate: Started) -> str:
    """What the teammate printed once about how it hears of changes."""
    marker = "hears of changes by "
    for line in teammate.stdout.read_text(encoding="utf-8").splitlines():
        if marker in line:
            return line.split(marker, 1)[1]
    raise RuntimeError(f"{teammate.name} never said how it hears of changes")


def side_by_side(runs: Sequence[Wakes]) -> Section:
    """Part 1 on each engine, one row per engine and kind of wake."""
    section = Section(
        f"1) side by side, one run: the same wakes, --poll-interval {WAKE_POLL_SECONDS:g} s",
        ["wake", "engine, woken by", "n", "p50", "p90", "p99", "max", "unit"],
    )
    counted = slice(WARMUP_WAKES, None)
    kinds: list[tuple[str, Callable[[Wakes], list[float]]]] = [
        ("a) message -> reply seen", lambda run: run.message),
        ("b) ready task -> claimed", lambda run: run.task),
    ]
    for label, pick in kinds:
        for run in runs:
            samples = pick(run)[counted]
            section.rows.append(
                [label, f"{run.engine.name}: {run.engine.mechanism}", str(len(samples)),
                 *map(_ms, quantiles(samples)), "ms"]
            )  # fmt: skip
    for run in runs:
        section.rows.append(
            [f"c) idle, CPU over {run.idle_window:.0f} s",
             f"{run.engine.name}: {run.engine.mechanism}", "",
             f"{100 * run.idle_cpu / run.idle_window:.3f}", "", "", "", "% of a core"]
        )  # fmt: skip
    section.notes.append(
        "each run above gives the warm-up, the slowest wakes and the handling; c) is the"
        " waiting teammate's user+system CPU (/proc/<pid>/stat, 10 ms ticks) before the wakes,"
        " in its p50 column"
    )
    return section


# -- 2) idle CPU ----------------------------------------------------------------------------

EVENT_LOOP_CODE: Final = """
import threading
wake = threading.Event()
while True:
    wake.wait(0.1)
"""

CHECK_LOOP_CODE: Final = """
import sqlite3, sys, threading
files = [sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
         for path in sys.argv[1:]]
wake = threading.Event()
while True:
    for connection in files:
        connection.execute("PRAGMA data_version").fetchone()
    wake.wait(0.1)
"""


def bench_idle_cpu(root: Path, sizes: Sizes, group: ProcessGroup) -> Section:
    """CPU time of idle teammates over a window, against two bare waiting loops."""
    title = (
        f"2) idle CPU over {sizes.idle_seconds:g} s: {IDLE_TEAMMATES} teammates each way on an"
        f" empty board, --poll-interval {IDLE_POLL_SECONDS:g} --max-idle-polls 1000"
    )
    section = Section(title, ["process", "CPU", "unit", "% of one core"])
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        section.notes.append("skipped: no /proc/<pid>/stat on this system")
        return section
    workspace = root / "idle"
    store = SqliteTaskStore(workspace)
    mailbox = Mailbox(workspace)
    protocol = TeamProtocol(mailbox)
    notified = [f"idle-{n}" for n in range(IDLE_TEAMMATES)]
    polling = [f"idle-polling-{n}" for n in range(IDLE_TEAMMATES)]
    names = [*notified, *polling]
    idle_options = ["--poll-interval", f"{IDLE_POLL_SECONDS:g}", "--max-idle-polls", "1000"]
    try:
        teammates = [group.teammate(name, workspace, *idle_options) for name in notified]
        teammates += [
            group.teammate(name, workspace, *idle_options, environment=POLL_ENVIRONMENT)
            for name in polling
        ]
        bare = group.start("bare-event-wait", [sys.executable, "-c", EVENT_LOOP_CODE])
        checks = group.start(
            "bare-event-wait-and-checks",
            [sys.executable, "-c", CHECK_LOOP_CODE, str(store.path), str(mailbox.path)],
        )
        wait_joined(mailbox, teammates)
        _progress(f"2) {len(names)} idle teammates joined; settling, then a window")
        time.sleep(IDLE_SETTLE_SECONDS)
        watched = [*teammates, bare, checks]
        before = {s.name: cpu_seconds(s.pid) for s in watched}
        started = time.monotonic()
        time.sleep(sizes.idle_seconds)
        after = {s.name: cpu_seconds(s.pid) for s in watched}
        window = time.monotonic() - started
        for s in watched:
            s.check_alive()
        for name in names:
            protocol.request_shutdown(name)
        codes = wait_exit(teammates)
        bare.process.kill()
        checks.process.kill()
        bare.process.wait()
        checks.process.wait()
    finally:
        store.close()
        mailbox.close()
    used = {name: after[name] - before[name] for name in before}

    def row(label: str, seconds: float) -> list[str]:
        return [label, f"{seconds:.3f}", "CPU s", f"{100 * seconds / window:.3f}"]

    for way, group_names in (("file notifications", notified), ("polling", polling)):
        per_teammate = [used[name] for name in group_names]
        section.rows += [
            row(f"teammate ({way}), mean of {len(group_names)}", statistics.mean(per_teammate)),
            row(f"teammate ({way}), max of {len(group_names)}", max(per_teammate)),
        ]
    section.rows += [
        row("bare python: Event.wait(0.1) loop", used["bare-event-wait"]),
        row("bare python: + 2 PRAGMA data_version", used["bare-event-wait-and-checks"]),
    ]
    ticks = os.sysconf("SC_CLK_TCK")
    section.notes += [
        f"window {window:.1f} s: each teammate scanned the board ~{window / IDLE_POLL_SECONDS:.0f}"
        f" times (one scan per poll); a polling one looked at the files"
        f" ~{window / CHECK_SECONDS:.0f} times, a notified one ~{window / SAFETY_LOOK_SECONDS:.0f}"
        f" times (its safety look) plus after each event; /proc counts in 1/{ticks} s ticks",
        "per teammate: " + ", ".join(f"{used[name]:.2f}" for name in names) + " CPU s",
        "shutdown handshakes at the end: exit codes "
        + ", ".join(str(codes[name]) for name in names),
    ]
    return section


# -- 3) a team draining a board --------------------------------------------------------------


def layered_board(count: int, layers: int) -> tuple[list[str], list[Draft]]:
    """Task ids and drafts: `layers` layers; each task after the first waits for two tasks
    of the layer before it, so finishing a layer keeps unblocking the next."""
    rng = random.Random(SEED)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]
    width = math.ceil(count / layers)
    drafts: list[Draft] = []
    for index in range(count):
        layer, j = divmod(index, width)
        blocked_by: tuple[str, ...] = ()
        if layer > 0:
            previous = ids[(layer - 1) * width : layer * width]
            pair = (previous[j % len(previous)], previous[(7 * j + 3) % len(previous)])
            blocked_by = tuple(dict.fromkeys(pair))
        drafts.append((f"layer {layer} task {j}", "", blocked_by))
    return ids, drafts


def build_board(workspace: Path, ids: list[str], drafts: list[Draft]) -> None:
    """The board of `drafts`, in one create_tasks transaction, with the ids given."""
    with SqliteTaskStore(workspace, new_task_id=iter(ids).__next__) as store:
        tasks = store.create_tasks(drafts)
    if [task.id for task in tasks] != ids:
        raise RuntimeError("the board did not get the ids it was built with")


@dataclass(slots=True)
class Drain:
    """What one drain of the board showed."""

    tasks: int
    seconds: float  # first claimed -> last completed event
    cpu_seconds: float  # all workers, from the start signal until the board is done
    errors: int
    first_error: str
    claimed_twice: int
    completed_twice: int
    unfinished: int
    expired_leases: int
    claims_per_worker: list[int]
    reports: int | None = None  # teammates only: text messages to the Lead
    bad_reports: int | None = None
    cpu_tenths: tuple[float, float] | None = None  # teammates: CPU ms per task, first/last tenth
    audit: tuple[int, int] | None = None  # teammates: audit.jsonl records, distinct seq values

    @property
    def rate(self) -> float:
        """Tasks per second."""
        return self.tasks / self.seconds


def _tally(workspace: Path, errors: int, first_error: str, cpu: float) -> Drain:
    with SqliteTaskStore(workspace) as store:
        events: list[TaskEvent] = store.events()
        tasks = store.list_tasks()
    claims = [e for e in events if e.kind is EventKind.CLAIMED]
    completions = [e for e in events if e.kind is EventKind.COMPLETED]
    if not claims or not completions:
        raise RuntimeError(f"nothing was claimed or completed on {workspace}")
    claimed = Counter(e.task_id for e in claims)
    completed = Counter(e.task_id for e in completions)
    owners = Counter(e.owner for e in claims)
    first_claim, last_completion = min(e.at_utc for e in claims), max(e.at_utc for e in completions)
    return Drain(
        tasks=len(completed),
        seconds=(last_completion - first_claim).total_seconds(),
        cpu_seconds=cpu,
        errors=errors,
        first_error=first_error,
        claimed_twice=sum(1 for n in claimed.values() if n > 1),
        completed_twice=sum(1 for n in completed.values() if n > 1),
        unfinished=sum(1 for task in tasks if task.status is not TaskStatus.COMPLETED),
        expired_leases=sum(1 for e in events if e.kind is EventKind.LEASE_EXPIRED),
        claims_per_worker=sorted(owners.values()),
    )


def wait_board_done(
    workspace: Path, count: int, teammates: Sequence[Started]
) -> list[tuple[int, float]]:
    """Block until all `count` tasks are completed (read-only looks every 20 ms).

    Returns (tasks completed, the teammates' CPU seconds so far) as first seen past a
    tenth, past nine tenths, and at the end.
    """
    path = workspace / STATE_DIRNAME / TASK_DB_NAME
    board = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None)
    deadline = time.monotonic() + 10 * WAIT_SECONDS
    marks = [math.ceil(count / 10), math.floor(count * 9 / 10), count]
    samples: list[tuple[int, float]] = []
    try:
        while marks:
            (done,) = board.execute(
                "SELECT count(*) FROM tasks WHERE status = 'completed'"
            ).fetchone()
            if done >= marks[0]:
                samples.append((done, sum(cpu_seconds(s.pid) for s in teammates)))
                while marks and done >= marks[0]:
                    del marks[0]
                continue
            for started in teammates:
                if started.process.poll() is not None:
                    return samples  # it ended early: the tally says what is left
            if time.monotonic() > deadline:
                raise TimeoutError(f"the board was not done within {10 * WAIT_SECONDS:.0f} s")
            time.sleep(0.02)
        return samples
    finally:
        board.close()


def drain_with_teammates(
    workspace: Path,
    ids: list[str],
    drafts: list[Draft],
    group: ProcessGroup,
    processes: int = DRAIN_PROCESSES,
) -> Drain:
    """`processes` `agent17 teammate` processes, released together, drain the board."""
    build_board(workspace, ids, drafts)
    gate = workspace / "start-gate"
    mailbox = Mailbox(workspace)
    try:
        options = ["--work-seconds", "0", "--poll-interval", "1", "--max-idle-polls", "2"]
        teammates = [
            group.teammate(f"mate-{n}", workspace, *options, "--start-after-file", str(gate))
            for n in range(processes)
        ]
        wait_joined(mailbox, teammates)
        time.sleep(0.5)  # from joining to the gate's loop: a few statements
        at_gate = sum(cpu_seconds(s.pid) for s in teammates)
        gate.touch()
        # At the end they are idle (until their idle timeout): what they used since the gate.
        samples = wait_board_done(workspace, len(ids), teammates)
        cpu = samples[-1][1] - at_gate if samples else math.nan
        codes = wait_exit(teammates, timeout=10 * WAIT_SECONDS)
        inbox = [e for e in mailbox.messages(LEAD) if e.kind == "text"]
    finally:
        mailbox.close()
    stderr = [line for s in teammates for line in s.stderr_lines()]
    reports = [decode_message(e.kind, e.body) for e in inbox]
    bad = [m for m in reports if not (isinstance(m, TextMessage) and m.content.startswith("Comp"))]
    bad_exits = [f"{name} exited {code}" for name, code in codes.items() if code != 0]
    errors = len(bad_exits) + len(stderr) + len(bad)
    first = next(iter([*bad_exits, *stderr, *(repr(m) for m in bad)]), "")
    drain = _tally(workspace, errors, first, cpu)
    drain.reports, drain.bad_reports = len(reports), len(bad)
    audit = workspace / STATE_DIRNAME / "audit.jsonl"
    if audit.exists():
        records = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
        drain.audit = (len(records), len({record.get("seq") for record in records}))
    if len(samples) == 3:
        (tenth, tenth_cpu), (nine, nine_cpu), (end, end_cpu) = samples
        drain.cpu_tenths = (
            (tenth_cpu - at_gate) / tenth * 1000,
            (end_cpu - nine_cpu) / (end - nine) * 1000,
        )
    return drain


def bare_worker(
    workspace: str,
    owner: str,
    total: int,
    completed: Synchronized[int],
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """The baseline: claim_next and complete_task until all `total` tasks are done.

    An empty claim only ends the loop once the shared count says the board is done
    (the next layer waits for tasks others still hold).
    """
    store = SqliteTaskStore(Path(workspace))
    errors = 0
    first_error = ""
    ready.put(os.getpid())
    go.wait(WAIT_SECONDS)
    cpu_started = time.process_time()
    deadline = time.monotonic() + 10 * WAIT_SECONDS
    while errors < MAX_WORKER_ERRORS and time.monotonic() < deadline:
        try:
            claim = store.claim_next(owner)
            if claim is None:
                if completed.value >= total:
                    break
                time.sleep(0.001)
                continue
            store.complete_task(claim.task.id, owner, claim.claim_token)
            with completed.get_lock():
                completed.value += 1
        except Exception as error:  # counted, not hidden
            errors += 1
            first_error = first_error or f"{type(error).__name__}: {error}"
    results.put((errors, first_error, time.process_time() - cpu_started))
    store.close()  # after the report: the last close checkpoints the WAL, not counted


def drain_bare(
    workspace: Path, ids: list[str], drafts: list[Draft], processes: int = DRAIN_PROCESSES
) -> Drain:
    """`processes` spawned processes on the bare store drain the same board."""
    build_board(workspace, ids, drafts)
    context = multiprocessing.get_context("spawn")
    completed = context.Value("i", 0)
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    workers = [
        context.Process(
            target=bare_worker,
            args=(str(workspace), f"bare-{n}", len(ids), completed, ready, go, results),
        )
        for n in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            ready.get(timeout=WAIT_SECONDS)
        time.sleep(0.2)  # from ready.put to go.wait
        go.set()
        reports = [results.get(timeout=10 * WAIT_SECONDS) for _ in workers]
        for worker in workers:
            worker.join(WAIT_SECONDS)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()
    bad_exits = [f"exit code {w.exitcode}" for w in workers if w.exitcode != 0]
    errors = sum(count for count, _, _ in reports) + len(bad_exits)
    first = next((text for _, text, _ in reports if text), next(iter(bad_exits), ""))
    return _tally(workspace, errors, first, sum(cpu for _, _, cpu in reports))


def run_rounds(
    rounds: int,
    teammates: Callable[[int], Drain],
    bare: Callable[[int], Drain],
    what: str,
) -> tuple[list[Drain], list[Drain]]:
    """`rounds` drains of each side, alternating which side goes first in a round."""
    mates: list[Drain] = []
    bares: list[Drain] = []
    for number in range(rounds):
        _progress(f"{what}: round {number + 1}/{rounds}")
        if number % 2 == 1:
            bares.append(bare(number))
        mates.append(teammates(number))
        if number % 2 == 0:
            bares.append(bare(number))
    return mates, bares


def bench_drain(root: Path, sizes: Sizes, group: ProcessGroup) -> Section:
    """Teammates against bare store processes on the same layered board, in rounds."""
    ids, drafts = layered_board(sizes.drain_tasks, DRAIN_LAYERS)
    mates, bares = run_rounds(
        sizes.drain_rounds,
        lambda number: drain_with_teammates(root / f"teammates-{number}", ids, drafts, group),
        lambda number: drain_bare(root / f"bare-{number}", ids, drafts),
        f"3) {DRAIN_PROCESSES} teammates and {DRAIN_PROCESSES} bare processes drain"
        f" {sizes.drain_tasks:,} tasks",
    )
    ratios = [m.rate / b.rate for m, b in zip(mates, bares, strict=True)]
    section = Section(
        f"3) {DRAIN_PROCESSES} processes drain {sizes.drain_tasks:,} tasks ({DRAIN_LAYERS}"
        f" layers, 2 deps each), median of {sizes.drain_rounds} round(s): teammates vs bare store",
        ["measurement", "teammates", "bare store", "teammates / bare", "unit"],
    )

    def median(drains: list[Drain], value: Callable[[Drain], float]) -> float:
        return statistics.median(value(d) for d in drains)

    def total(drains: list[Drain], value: Callable[[Drain], int]) -> int:
        return sum(value(d) for d in drains)

    rate_m, rate_b = median(mates, lambda d: d.rate), median(bares, lambda d: d.rate)
    cpu_m = median(mates, lambda d: d.cpu_seconds / d.tasks * 1000)
    cpu_b = median(bares, lambda d: d.cpu_seconds / d.tasks * 1000)
    secs_m, secs_b = median(mates, lambda d: d.seconds), median(bares, lambda d: d.seconds)
    section.rows += [
        ["tasks/s, first claim -> last completion", f"{rate_m:,.0f}", f"{rate_b:,.0f}",
         f"{statistics.median(ratios):.2f}", "tasks/s"],
        ["  wall time of the drain", f"{secs_m:.2f}", f"{secs_b:.2f}", f"{secs_m / secs_b:.2f}",
         "s"],
        ["  CPU per task (user+sys, 8 processes)", f"{cpu_m:.2f}", f"{cpu_b:.2f}",
         f"{cpu_m / cpu_b:.2f}", "ms"],
    ]  # fmt: skip
    checks: list[tuple[str, Callable[[Drain], int]]] = [
        ("errors (exits, stderr, bad reports)", lambda d: d.errors),
        ("tasks claimed more than once", lambda d: d.claimed_twice),
        ("tasks completed more than once", lambda d: d.completed_twice),
        ("tasks left unfinished", lambda d: d.unfinished),
        ("leases that ran out", lambda d: d.expired_leases),
    ]
    for label, value in checks:
        section.rows.append([label, str(total(mates, value)), str(total(bares, value)), "", ""])
    reports = total(mates, lambda d: d.reports or 0)
    section.rows.append(
        ["reports in the Lead's mailbox", f"{reports:,}", "", "", f"of {len(mates) * len(ids):,}"]
    )
    for drains, label in ((mates, "teammates"), (bares, "bare")):
        spread = "; ".join(
            f"{min(d.claims_per_worker)}..{max(d.claims_per_worker)}" for d in drains
        )
        section.notes.append(f"claims per process, {label}: {spread} (min..max, per round)")
    audits = [d.audit for d in mates if d.audit is not None]
    if audits:
        records = sorted({n for n, _ in audits})
        distinct = [k for _, k in audits]
        section.notes.append(
            f"the teammates' shared audit.jsonl: {'/'.join(f'{n:,}' for n in records)}"
            f" records per round, {min(distinct):,}..{max(distinct):,} distinct seq values"
            " (one dense sequence when they match)"
        )
    if len(ratios) > 1:
        section.notes.append("ratio per round: " + ", ".join(f"{r:.2f}" for r in ratios))
        section.notes.append(
            "tasks/s per round: teammates "
            + ", ".join(f"{d.rate:,.0f}" for d in mates)
            + "; bare "
            + ", ".join(f"{d.rate:,.0f}" for d in bares)
        )
    for drains, label in ((mates, "teammates"), (bares, "bare")):
        first = next((d.first_error for d in drains if d.first_error), "")
        if first:
            section.notes.append(f"first error, {label}: {first[:160]}")
    return section


def bench_alone(root: Path, sizes: Sizes, group: ProcessGroup) -> Section:
    """One teammate process alone against one bare store process, on a board of ready tasks."""
    ids, drafts = layered_board(sizes.alone_tasks, 1)
    mates, bares = run_rounds(
        sizes.alone_rounds,
        lambda n: drain_with_teammates(root / f"alone-mate-{n}", ids, drafts, group, processes=1),
        lambda n: drain_bare(root / f"alone-bare-{n}", ids, drafts, processes=1),
        f"3b) one teammate and one bare process, each alone on {sizes.alone_tasks:,} tasks",
    )
    section = Section(
        f"3b) 1 process alone drains {sizes.alone_tasks:,} ready tasks (no contention),"
        f" median of {sizes.alone_rounds} round(s): 1 teammate vs the bare store",
        ["measurement", "teammate", "bare store", "teammate / bare", "unit"],
    )

    def row(label: str, value: Callable[[Drain], float], unit: str, digits: int) -> list[str]:
        mate, bare = (statistics.median(value(d) for d in side) for side in (mates, bares))
        return [label, f"{mate:,.{digits}f}", f"{bare:,.{digits}f}", f"{mate / bare:.2f}", unit]

    section.rows += [
        row("tasks/s, first claim -> last completion", lambda d: d.rate, "tasks/s", 0),
        row("  CPU per task (user+sys)", lambda d: d.cpu_seconds / d.tasks * 1000, "ms", 2),
    ]
    tenths = [d.cpu_tenths for d in mates if d.cpu_tenths is not None]
    bare_cpu = statistics.median(d.cpu_seconds / d.tasks * 1000 for d in bares)
    if tenths:
        first, last = (statistics.median(t[i] for t in tenths) for i in (0, 1))
        section.rows += [
            ["  CPU per task, first tenth", f"{first:.2f}", "", f"{first / bare_cpu:.2f}", "ms"],
            ["  CPU per task, last tenth", f"{last:.2f}", "", f"{last / bare_cpu:.2f}", "ms"],
            ["  last tenth / first tenth", f"{last / first:.2f}", "", "", "x"],
        ]
    problems = [
        sum(d.errors + d.claimed_twice + d.completed_twice + d.unfinished for d in side)
        for side in (mates, bares)
    ]
    section.rows.append(
        ["errors + double claims/completions + unfinished", *map(str, problems), "", ""]
    )
    section.notes.append(
        "a teammate's conversation keeps its last runs only (AgentRunner.history_runs), so"
        " a task should cost the same CPU late in the drain as early: last tenth / first"
        " tenth near 1 (the tenths' CPU is read in /proc, in 10 ms ticks, as the board"
        " passes 10% and 90% done; their ratio column is against the bare store's"
        " whole-drain CPU per task)"
    )
    if len(mates) > 1:
        section.notes.append(
            "tasks/s per round: teammate "
            + ", ".join(f"{d.rate:,.0f}" for d in mates)
            + "; bare "
            + ", ".join(f"{d.rate:,.0f}" for d in bares)
        )
    return section


# -- the run, and its tables ----------------------------------------------------------------


def format_section(section: Section) -> str:
    """The section's title, its table (numbers right-aligned), and its notes."""
    table = [section.header, *section.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(section.header))]
    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))

    def render(cells: list[str]) -> str:
        parts = [
            f"{cell:<{widths[i]}}" if i == 0 or i == len(cells) - 1 else f"{cell:>{widths[i]}}"
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    lines = [section.title, rule, render(section.header), rule]
    lines += [render(row) for row in section.rows]
    lines.append(rule)
    lines += [f"  - {note}" for note in section.notes]
    return "\n".join(lines)


@contextmanager
def postgres_wakes(dsn: str | None) -> Iterator[WakeEngine]:
    """Part 1's PostgreSQL database: on the server `dsn` names, or on a throwaway cluster."""
    import psycopg

    from agent17.store.pg_cluster import start_cluster

    dbname = f"agent17_team_bench_{os.getpid()}"
    cluster = None
    if dsn:
        admin = dsn
    else:
        _progress("starting a throwaway PostgreSQL cluster (durable: fsync on)")
        cluster = start_cluster(durable=True)
        admin = cluster.admin_dsn
    try:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {dbname}")
            version = connection.execute("SHOW server_version").fetchone()
        try:
            board = psycopg.conninfo.make_conninfo(admin, dbname=dbname)
            parts = psycopg.conninfo.conninfo_to_dict(board)
            url = "postgresql:///?" + urllib.parse.urlencode({k: str(v) for k, v in parts.items()})
            yield WakeEngine(
                f"PostgreSQL {str(version[0]).split()[0] if version else '?'}",
                "LISTEN/NOTIFY",
                url,
                board,
            )
        finally:
            with psycopg.connect(admin, autocommit=True) as connection:
                connection.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
    finally:
        if cluster is not None:
            cluster.stop()


def run_all(
    sizes: Sizes,
    directory: Path | None,
    *,
    postgres: bool = False,
    dsn: str | None = None,
    wakeups_only: bool = False,
) -> list[Section]:
    """Every part, in a fresh temporary directory that is removed afterwards."""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=directory)))
        engines = [SQLITE_NOTIFIED, SQLITE_POLLED]
        if postgres:
            engines.append(stack.enter_context(postgres_wakes(dsn)))
        # Entered last, left first: every process is gone before its folder is removed.
        group = stack.enter_context(ProcessGroup(folder / "logs"))
        runs = bench_wakeups(folder, sizes, group, engines)
        sections = [section for section, _ in runs]
        sections.append(side_by_side([wakes for _, wakes in runs]))
        if wakeups_only:
            return sections
        return [
            *sections,
            bench_idle_cpu(folder, sizes, group),
            bench_drain(folder, sizes, group),
            bench_alone(folder, sizes, group),
        ]


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(
        prog="team_bench.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer wakes, shorter, smaller")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the temporary boards")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const="",
        default=None,
        metavar="DSN",
        help="part 1 on PostgreSQL too (a throwaway cluster, or the server DSN names)",
    )
    parser.add_argument("--wakeups-only", action="store_true", help="run part 1 only")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.dir is not None:
        args.dir = args.dir.resolve()
        args.dir.mkdir(parents=True, exist_ok=True)
    print(
        f"agent17 team benchmark ({'quick' if args.quick else 'full'}):"
        f" SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} CPUs",
        flush=True,
    )
    print(f"agent17 from {Path(agent17.__file__).resolve().parent}", flush=True)
    print(f"workspaces in: {args.dir or tempfile.gettempdir()}", flush=True)
    # A SIGTERM ends the run like Ctrl-C: through the cleanup (processes, then folders).
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    try:
        sections = run_all(
            sizes,
            args.dir,
            postgres=args.postgres is not None,
            dsn=args.postgres or None,
            wakeups_only=args.wakeups_only,
        )
    except KeyboardInterrupt:
        print("interrupted: every process it started is stopped, its folders are removed")
        return 130
    for section in sections:
        print()
        print(format_section(section))
    print(f"\nran for {time.perf_counter() - started:.0f} s")
    return 0


def _main_by_name() -> int:
    """Run through this file imported as the module `team_bench`, not as `__main__`.

    Spawned children unpickle `bare_worker` by module name; `team_bench` resolves in
    every child because spawn hands them the parent's sys.path, which holds this
    directory. (`__main__` would mean a different module in the child.)
    """
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import team_bench

    return team_bench.main()


if __name__ == "__main__":
    sys.exit(_main_by_name())
