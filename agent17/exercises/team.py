"""Exercises on the idle loop: what one pass does, and a wait that a message can cut short."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent17.agent.models import lead_script, teammate_script
from agent17.bootstrap import TeamSettings, build_team
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.exercises._bounded import CheckResult, raised
from agent17.team.sleepers import ScriptedSleeper
from agent17.team.teammate import TickKind, TickOutcome

# -- next_pass: predict one tick ---------------------------------------------------------

NextPass = Callable[[list[str], "str | None", list[str]], str]


def next_pass_starter(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    """What alice's next pass does: 'protocol_handled', 'message_handled', 'plan_blocked',
    'claimed <subject>' or 'idle'.

    mailbox: the kinds of her queued messages, oldest first ('shutdown_request',
    'plan_response' or 'text'); latest_plan: None, 'pending', 'approved' or 'rejected';
    ready: the subjects of the ready tasks, in creation order.
    """
    if ready:
        return f"claimed {ready[0]}"
    return "idle"


def next_pass_solution(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    """What alice's next pass does: 'protocol_handled', 'message_handled', 'plan_blocked',
    'claimed <subject>' or 'idle'.

    mailbox: the kinds of her queued messages, oldest first ('shutdown_request',
    'plan_response' or 'text'); latest_plan: None, 'pending', 'approved' or 'rejected';
    ready: the subjects of the ready tasks, in creation order.
    """
    if mailbox:  # one message per pass, the oldest, before any work
        return "message_handled" if mailbox[0] == "text" else "protocol_handled"
    if latest_plan in ("pending", "rejected"):
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


NEXT_PASS_HINT = (
    "Read tick() from the top: which does a teammate look at first, its mailbox or the"
    " board, and how many messages does one pass handle, which one first? What can stop a"
    " pass before it ever reaches claim_next?"
)


@dataclass(frozen=True, slots=True)
class PassCase:
    """One situation for alice's next pass."""

    mailbox: tuple[str, ...]
    latest_plan: str | None
    ready: tuple[str, ...]


PASS_CASES: tuple[PassCase, ...] = (
    PassCase((), None, ()),
    PassCase((), None, ("A", "B")),
    PassCase(("shutdown_request",), None, ("A",)),
    PassCase(("text",), None, ("A", "B")),
    PassCase((), "pending", ("A",)),
    PassCase((), "rejected", ("A",)),
    PassCase((), "approved", ("B",)),
    PassCase(("plan_response",), "pending", ("A",)),
    PassCase(("text", "shutdown_request"), None, ()),
)


def _describe_case(case: PassCase) -> str:
    mail = ", ".join(case.mailbox) or "no mail"
    plan = "no plan" if case.latest_plan is None else f"a {case.latest_plan} plan"
    ready = ", ".join(case.ready) or "nothing"
    return f"with {mail}, {plan} and {ready} ready"


def real_pass(case: PassCase, workspace: Path) -> TickOutcome:
    """Build the situation on a real team and run alice's real tick()."""
    team = build_team(
        TeamSettings(
            workspace=workspace,
            lead_model=lead_script((), ()),
            teammate_model=lambda name: teammate_script(),
            clock=ManualClock(),
            new_task_id=uuid_sequence(17),
            new_claim_token=uuid_sequence(71),
            new_request_id=uuid_sequence(99),
            sleeper=ScriptedSleeper(),
            persistent_audit=False,
        )
    )
    try:
        alice = team.teammates.spawn("alice")
        for subject in case.ready:
            team.store.create_task(subject)
        if case.latest_plan is not None:
            plan = team.protocol.submit_plan("alice", "my plan")
            if case.latest_plan != "pending" or "plan_response" in case.mailbox:
                approve = case.latest_plan != "rejected"
                team.protocol.review_plan(plan.request_id, approve=approve)
                if "plan_response" not in case.mailbox:
                    alice.tick()  # she reads the verdict now: the gate moves
        for kind in case.mailbox:
            if kind == "shutdown_request":
                team.protocol.request_shutdown("alice")
            elif kind == "text":
                team.protocol.send_text("alice", "How is it going?", sender="lead")
        return alice.tick()
    finally:
        team.close()


def _said(outcome: TickOutcome) -> str:
    if outcome.kind is TickKind.CLAIMED and outcome.claim is not None:
        return f"claimed {outcome.claim.task.subject}"
    return outcome.kind.value


def check_next_pass(candidate: NextPass) -> CheckResult:
    """Each prediction against alice's real tick() in that very situation."""
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        for number, case in enumerate(PASS_CASES):
            truth = _said(real_pass(case, Path(folder) / f"case-{number}"))
            try:
                guess = candidate(list(case.mailbox), case.latest_plan, list(case.ready))
            except Exception as error:
                return CheckResult(False, f"{_describe_case(case)}: {raised(error)}")
            if guess != truth:
                why = ""
                if case.mailbox and truth.endswith("handled"):
                    why = " The mailbox comes before the board: one message per pass."
                elif truth == "plan_blocked":
                    why = " A pending or rejected latest plan stops the pass before claim_next."
                return CheckResult(
                    False,
                    f"{_describe_case(case)}, you said {guess!r}; alice's real pass did"
                    f" {truth!r}.{why}",
                )
    return CheckResult(True, f"all {len(PASS_CASES)} predictions match alice's real tick().")


# -- wait_or_wake: a sleeper that a message cuts short -------------------------------------

WaitOrWake = Callable[[float, threading.Event], bool]


def wait_or_wake_starter(seconds: float, wake: threading.Event) -> bool:
    """Wait up to `seconds`, or less if `wake` is set: True if woken early, False if not."""
    time.sleep(seconds)
    return False


def wait_or_wake_solution(seconds: float, wake: threading.Event) -> bool:
    """Wait up to `seconds`, or less if `wake` is set: True if woken early, False if not."""
    # The thread sleeps inside the kernel until one of the two happens: no polling, no CPU.
    return wake.wait(seconds)


WAIT_HINT = (
    "You want to sleep, but be woken early. time.sleep cannot be woken, and a loop that keeps"
    " asking burns a CPU core. Read the documentation of threading.Event: one of its methods"
    " already does both, and its return value tells you which happened."
)


def check_wait_or_wake(candidate: WaitOrWake) -> CheckResult:
    """Woken early by another thread, already woken, and left to time out without busy-waiting."""
    wake = threading.Event()
    timer = threading.Timer(0.05, wake.set)
    timer.start()
    started = time.monotonic()
    try:
        woken = candidate(2.0, wake)
    except Exception as error:
        return CheckResult(False, raised(error))
    finally:
        timer.cancel()
    # Feedback never prints a measured time: the same mistake must read the same every run.
    if time.monotonic() - started > 1.0:
        return CheckResult(
            False,
            "a message arrived after 0.05 s of a 2 s wait, and you went on waiting (more than"
            " 1 s): an idle teammate must wake as soon as the Lead writes to it",
        )
    if woken is not True:
        return CheckResult(False, f"woken early, you returned {woken!r}: say True when woken")
    already = threading.Event()
    already.set()
    if candidate(5.0, already) is not True:
        return CheckResult(False, "with the wake already set, return True at once")
    quiet = threading.Event()
    cpu_before, wall_before = time.thread_time(), time.monotonic()
    result = candidate(0.3, quiet)
    cpu, wall = time.thread_time() - cpu_before, time.monotonic() - wall_before
    if result is not False:
        return CheckResult(False, f"when nothing woke you, you returned {result!r}: say False")
    if wall < 0.28:
        return CheckResult(
            False, "asked to wait 0.3 s with nothing to wake you, you came back early"
        )
    if cpu > 0.1:
        return CheckResult(
            False,
            "your 0.3 s wait used more than 0.1 s of CPU: it keeps asking instead of sleeping."
            " Ten idle teammates would keep ten cores busy doing nothing.",
        )
    return CheckResult(True, "woken at once by a message, and asleep (no CPU) when nothing came.")
