"""`agent17 demo --processes`: the minimal scenario with alice and bob as real OS processes.

The Lead stays in this process: it puts A, B and C (blocked by both) on the
board and starts `agent17 teammate --name alice` and `... --name bob`, each its
own process that knows nothing of the other but the files on disk. Both wait
at a start gate until both are up, so neither scans first. A scripted task
takes alice 2 s and bob 3.5 s of real time: long enough that A and B are held
at once, and one of them is done first. Then the Lead asks the teammate still
working to shut down after its task: that request waits in its mailbox, and
its next pass handles it before looking at the board, so the other teammate
gets C. Who gets which task is up to the
operating system; every check below holds whatever the interleaving. With
`--store postgresql://...` the board and the mailbox are in that database and
each teammate process is started with the same `--store`, as a teammate on
another host would be.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TextIO

from agent17.demo import fresh_place, scenario_checks
from agent17.deterministic import uuid_sequence
from agent17.domain import EventKind, TaskEvent, TaskStatus, utc_now
from agent17.store.board import TaskBoard
from agent17.team.protocol import ShutdownResponse, TeamProtocol, TextMessage
from agent17.team.registry import TeamRegistry
from agent17.team.workplace import (
    open_team_state,
    parse_store_url,
    real_workspace,
)
from agent17.viz.dag import active_leases, board_table

TEAMMATES = ("alice", "bob")
WORK_SECONDS = {"alice": 2.0, "bob": 3.5}
"""Real seconds each scripted task takes in each process: one finishes first, on purpose."""
DEADLINE_SECONDS = 90.0
LOOK_EVERY_SECONDS = 0.05


def start_teammate(
    name: str, workspace: Path, *options: str, store: str | None = None
) -> subprocess.Popen[str]:
    """Start `agent17 teammate --name NAME --workspace DIR [--store URL] OPTIONS...`.

    Its own process; its output (and errors) come back as text lines on `.stdout`;
    it reads no stdin.
    """
    url, secrets = parse_store_url(store).for_a_child()
    where = [] if url is None else ["--store", url]
    command = [
        sys.executable, "-m", "agent17", "teammate", "--name", name,
        "--workspace", str(workspace), *where, *options,
    ]  # fmt: skip
    return subprocess.Popen(
        command,
        env={**os.environ, **secrets} if secrets else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> float:
    """Poll `condition` every 10 ms until it holds; the seconds it took (TimeoutError after)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:g} s waiting until {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def _start(name: str, workspace: Path, gate: Path, store: str | None) -> subprocess.Popen[str]:
    return start_teammate(
        name, workspace, "--work-seconds", str(WORK_SECONDS[name]),
        "--poll-interval", "5", "--max-idle-polls", "12", "--start-after-file", str(gate),
        store=store,
    )  # fmt: skip


def _relay(stream: IO[str], out: TextIO, lock: threading.Lock, lines: list[str]) -> None:
    for line in stream:
        with lock:
            lines.append(line.rstrip("\n"))
            out.write(f"  {line}")
            out.flush()


def run_process_demo(workspace: Path | None, out: TextIO, *, store: str | None = None) -> int:
    """Run the scenario with two teammate processes; 0 when every check holds.

    `store`: a `postgresql://` URL (a database with no board yet) for the board and
    the mailbox; each teammate process is started with the same `--store`.
    """
    title = "agent17 demo --processes: alice and bob are separate OS processes"
    place = fresh_place(store, workspace, "agent17-demo-processes-", out, title)
    if place is None:
        return 2
    location, workspace = place
    state = open_team_state(location, workspace, new_task_id=uuid_sequence(17))
    board, mailbox = state.store, state.mailbox
    protocol = TeamProtocol(mailbox)
    registry = TeamRegistry(mailbox)
    lock = threading.Lock()
    lines: list[str] = []
    a = board.create_task("A", "Independent task A.")
    b = board.create_task("B", "Independent task B.")
    board.create_task("C", "Needs both A and B.", blocked_by=[a.id, b.id])
    out.write("The Lead (this process) put A, B and C (blocked by A and B) on the board, then\n")
    out.write("starts two `agent17 teammate` processes (a task takes alice 2 s, bob 3.5 s):\n")
    gate = workspace / "start-gate"
    processes = {name: _start(name, workspace, gate, store) for name in TEAMMATES}
    relays = [
        threading.Thread(target=_relay, args=(process.stdout, out, lock, lines), daemon=True)
        for process in processes.values()
    ]
    for relay in relays:
        relay.start()
    pids = {name: process.pid for name, process in processes.items()}
    asked: set[str] = set()
    # Who was asked while still working, and the last event the board had then: on the
    # board's own order, since the Lead's clock need not be the board's (PostgreSQL).
    asked_while_working: tuple[str, int] | None = None
    overlap = False
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        # Open the gate once both have joined the team: neither scans before both are up.
        while not all(_joined(registry, name, pid) for name, pid in pids.items()):
            _check_alive(processes, deadline)
            time.sleep(LOOK_EVERY_SECONDS)
        gate.touch()
        while any(process.poll() is None for process in processes.values()):
            _check_alive(processes, deadline, allow_exit=True)
            tasks = {task.subject: task for task in board.list_tasks()}
            held = [task for task in tasks.values() if task.status is TaskStatus.IN_PROGRESS]
            if len(held) == 2 and not overlap:
                overlap = True
                with lock:
                    out.write(f"  {_now()} lead sees A and B held at once:\n")
                    table = board_table(list(tasks.values()), leases=active_leases(board.events()))
                    out.write("".join(f"    {row}\n" for row in table.splitlines()))
            first_done = [n for n in ("A", "B") if tasks[n].status is TaskStatus.COMPLETED]
            still = [
                tasks[n].owner for n in ("A", "B") if tasks[n].status is TaskStatus.IN_PROGRESS
            ]
            if len(first_done) == 1 and still and not asked and still[0] is not None:
                asked.add(still[0])
                seen = max((event.sequence for event in board.events()), default=0)
                asked_while_working = (still[0], seen)
                protocol.request_shutdown(still[0])
                with lock:
                    out.write(
                        f"  {_now()} lead asks {still[0]}, still working, to shut down after its"
                        " task: one teammate is enough for C\n"
                    )
            if all(t.status is TaskStatus.COMPLETED for t in tasks.values()):
                for name in TEAMMATES:
                    if name not in asked and not registry.is_closed(name):
                        asked.add(name)
                        protocol.request_shutdown(name)
                        with lock:
                            out.write(f"  {_now()} lead: the board is done; asks {name} to stop\n")
            time.sleep(LOOK_EVERY_SECONDS)
        for relay in relays:
            relay.join(10)
        codes = {name: process.wait() for name, process in processes.items()}
        command = location.board_command(real_workspace(workspace))
        return _report(board, protocol, pids, codes, lines, asked_while_working, command, out)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        state.close()


def _now() -> str:
    return utc_now().strftime("%H:%M:%S.%f")[:-3]


def _joined(registry: TeamRegistry, name: str, pid: int) -> bool:
    member = registry.member(name)
    return member is not None and member.pid == pid and registry.is_live(name)


def _check_alive(
    processes: dict[str, subprocess.Popen[str]], deadline: float, *, allow_exit: bool = False
) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError("the teammate processes did not finish in time")
    for name, process in processes.items():
        code = process.poll()
        if code is not None and (code != 0 or not allow_exit):
            raise RuntimeError(f"teammate {name} exited early with code {code}")


def _report(
    store: TaskBoard,
    protocol: TeamProtocol,
    pids: dict[str, int],
    codes: dict[str, int],
    lines: list[str],
    first_asked: tuple[str, int] | None,
    board_command: str,
    out: TextIO,
) -> int:
    events = store.events()
    tasks = store.list_tasks()
    subjects = {task.id: task.subject for task in tasks}
    out.write("\nThe event log, with the process behind each line:\n")
    for event in events:
        who = f"{event.owner} (pid {pids.get(event.owner or '', '?')})" if event.owner else "lead"
        out.write(
            f"  #{event.sequence:<2} {event.at_utc.strftime('%H:%M:%S.%f')[:-3]}"
            f"  {who:<18} {event.kind.value} {subjects[event.task_id]}\n"
        )
    inbox = protocol.receive_all("lead")
    shutdowns = {
        d.envelope.sender
        for d in inbox
        if isinstance(d.message, ShutdownResponse) and d.message.approved
    }
    reports = [d for d in inbox if isinstance(d.message, TextMessage)]
    out.write(f"\nThe Lead's inbox: {len(reports)} reports, shutdowns from {sorted(shutdowns)}\n")
    out.write("\nThe board at the end:\n" + board_table(tasks) + "\n\n")
    claims = [event for event in events if event.kind is EventKind.CLAIMED]
    checks = scenario_checks(events, subjects)
    checks += [
        (
            "the teammate asked to stop while it worked took no new task",
            _took_no_new_task(claims, first_asked),
        ),
        ("both processes exited 0", all(code == 0 for code in codes.values())),
        ("both shut down through the protocol", shutdowns == set(pids)),
        (
            "each process said why it ended",
            all(
                any(f"{name}[{pid}] shut down through the protocol" in line for line in lines)
                for name, pid in pids.items()
            ),
        ),
    ]
    for text, ok in checks:
        out.write(f"  [{'ok' if ok else 'FAILED'}] {text}\n")
    out.write(f"\nSee the board again: {board_command}\n")
    return 0 if all(ok for _, ok in checks) else 1


def _took_no_new_task(claims: list[TaskEvent], first_asked: tuple[str, int] | None) -> bool:
    """The teammate asked to stop while it worked handled the request before any new task."""
    if first_asked is None:
        return False
    name, seen = first_asked
    return not any(event.owner == name and event.sequence > seen for event in claims)
