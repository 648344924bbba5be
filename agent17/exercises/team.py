"""Exercises on the idle loop: what one pass does, and a wait that a message can cut short.

`next_pass` is checked against the reference in every situation of a small complete space
(`search`); the tests hold that reference to alice's real tick(). `wait_or_wake` is measured
with a real second thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from itertools import product
from pathlib import Path
from typing import Final

from agent17.agent.models import lead_script, teammate_script
from agent17.bootstrap import TeamSettings, build_team
from agent17.deterministic import ManualClock, counted_ids
from agent17.exercises._bounded import Checker, CheckResult, Plain, unreadable
from agent17.exercises.search import Answer, Search, listing, shown, value, wrong_kind
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


def real_pass(case: PassCase, workspace: Path) -> TickOutcome:
    """Build the situation on a real team and run alice's real tick()."""
    team = build_team(
        TeamSettings(
            workspace=workspace,
            lead_model=lead_script((), ()),
            teammate_model=lambda name: teammate_script(),
            clock=ManualClock(),
            **counted_ids(),
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


def what_tick_did(outcome: TickOutcome) -> str:
    """A real tick's outcome in next_pass's words: 'claimed A', 'plan_blocked', ..."""
    if outcome.kind is TickKind.CLAIMED and outcome.claim is not None:
        return f"claimed {outcome.claim.task.subject}"
    return outcome.kind.value


_KINDS: Final = ("shutdown_request", "plan_response", "text")
_PLANS: Final = (None, "approved", "pending", "rejected")
_READY: Final = ((), ("A",), ("A", "B"))


@cache
def pass_cases() -> tuple[PassCase, ...]:
    """Every mailbox of up to three messages x every plan state x 0-2 ready tasks, smallest
    first (a plan response needs a plan)."""
    keyed = []
    for plan_rank, plan in enumerate(_PLANS):
        for length in range(4):
            for mailbox in product(_KINDS, repeat=length):
                if plan is None and "plan_response" in mailbox:
                    continue
                for ready in _READY:
                    size = length + (plan is not None) + len(ready)
                    kinds = tuple(_KINDS.index(kind) for kind in mailbox)
                    key = (size, length, plan_rank, len(ready), kinds)
                    keyed.append((key, PassCase(mailbox, plan, ready)))
    return tuple(case for _, case in sorted(keyed, key=lambda pair: pair[0]))


def _draw_pass(case: PassCase) -> str:
    return listing(
        [
            ("mailbox, oldest first:", ", ".join(case.mailbox) or "empty"),
            ("latest plan:", case.latest_plan or "none"),
            ("ready tasks:", ", ".join(case.ready) or "none"),
        ]
    )


def _read_outcome(got: object, case: PassCase) -> Answer:
    if type(got) is not str:
        return wrong_kind(f"return the outcome as a str, not a {type(got).__name__}", shown(got))
    return value(got)


_HANDLED: Final = ("protocol_handled", "message_handled")


def _explain_pass(case: PassCase, said: Plain, right: Plain) -> str:
    assert isinstance(said, str) and isinstance(right, str)
    words = f"you said {said!r}; alice's pass does {right!r}."
    if said not in (*_HANDLED, "plan_blocked", "idle") and not said.startswith("claimed "):
        return (
            f"{words} One pass ends in one of 'protocol_handled', 'message_handled',"
            " 'plan_blocked', 'claimed <subject>' or 'idle'."
        )
    if case.mailbox:
        if said in _HANDLED:
            return (
                f"{words} The oldest message decides: a text is message_handled, a shutdown"
                " request or a plan response is protocol_handled."
            )
        return (
            f"{words} The mailbox comes before the plan gate and the board: one message per"
            " pass, the oldest first."
        )
    if right == "plan_blocked":
        return (
            f"{words} A pending or rejected latest plan stops the pass before claim_next,"
            " whether or not a task is ready."
        )
    if said == "plan_blocked":
        return (
            f"{words} Only a pending or rejected latest plan blocks: an approved plan, or none,"
            " lets the pass go on to claim_next."
        )
    if said in _HANDLED:
        return f"{words} Her mailbox is empty: there is no message to handle."
    if said.startswith("claimed ") and right.startswith("claimed "):
        return f"{words} claim_next takes the first ready task, in creation order."
    if right == "idle":
        return f"{words} Nothing is ready, so claim_next finds nothing: the pass is idle."
    return f"{words} With no mail and no plan in the way, the pass claims the first ready task."


NEXT_PASS_SEARCH: Final = Search(
    space=pass_cases,
    ask=lambda candidate, case: candidate(list(case.mailbox), case.latest_plan, list(case.ready)),
    read=_read_outcome,
    reference=lambda case: next_pass_solution(
        list(case.mailbox), case.latest_plan, list(case.ready)
    ),
    draw=_draw_pass,
    explain=_explain_pass,
    space_text=(
        "situations: every mailbox of up to three messages, every plan state, 0-2 ready tasks"
    ),
    noun="situation",
)

NEXT_PASS_CHECK: Final = NEXT_PASS_SEARCH.checker()
"""Compared with alice's pass (the reference, which the tests hold to her real tick()) in
every situation of the space above."""


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


WAIT_OR_WAKE_HINT = (
    "You want to sleep, but be woken early. time.sleep cannot be woken, and a loop that keeps"
    " asking burns a CPU core. Read the documentation of threading.Event: one of its methods"
    " already does both, and its return value tells you which happened."
)


# A message is sent at these moments of a 2 s wait: a wait that sleeps in slices longer than
# 0.2 s sleeps through at least one of them by more than 0.2 s.
_WAKE_AFTER: Final = (0.02, 0.08, 0.14)
WAKE_WITHIN: Final = 0.2


# A quiet 0.3 s wait that runs, or waits to run, for longer than this keeps asking.
BUSY_WITHIN: Final = 0.2


def _busy_seconds() -> float:
    """How long this thread has run or waited for a CPU to run on (Linux), else its CPU time.

    Time spent waiting for a CPU counts: on a loaded machine a busy loop gets little CPU, but
    it is runnable all along, while a sleeping wait is neither.
    """
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as stat:
            ran, queued = stat.read().split()[:2]
        return (int(ran) + int(queued)) / 1e9
    except (OSError, ValueError):
        return time.thread_time()


def _said_plain(said: object) -> Plain:
    return said if type(said) is bool else shown(said)


def _measure_waits(candidate: WaitOrWake) -> Plain:
    """How late each early wake was, the already-set wait, and a quiet one (in the sandbox)."""
    monotonic, busy_seconds = time.monotonic, _busy_seconds  # before the candidate runs
    woken: list[Plain] = []
    for delay in _WAKE_AFTER:
        wake, sent_at = threading.Event(), list[float]()

        def send(wake: threading.Event = wake, sent_at: list[float] = sent_at) -> None:
            sent_at.append(monotonic())
            wake.set()

        timer = threading.Timer(delay, send)
        timer.start()
        try:
            said = candidate(2.0, wake)
        finally:
            returned = monotonic()
            timer.cancel()
            timer.join()
        late = returned - sent_at[0] if sent_at else None
        woken.append({"said": _said_plain(said), "late": late})
        if said is not True or late is None or late > WAKE_WITHIN:
            return {"woken": woken}  # the verdict is already no: the rest would take long
    already = threading.Event()
    already.set()
    started = monotonic()
    said = candidate(5.0, already)
    already_took = monotonic() - started
    busy_before, started = busy_seconds(), monotonic()
    quiet = candidate(0.3, threading.Event())
    wall, busy = monotonic() - started, busy_seconds() - busy_before
    return {
        "woken": woken,
        "already": {"said": _said_plain(said), "took": already_took},
        "quiet": {"said": _said_plain(quiet), "wall": wall, "busy": busy},
    }


def _judge_waits(data: Plain) -> CheckResult:
    # Feedback never prints a measured time: the same mistake must read the same every run.
    woken = data.get("woken") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(woken, list):
        return unreadable(data)
    for wake in woken:
        assert isinstance(wake, dict)
        said, late = wake["said"], wake["late"]
        if late is None:
            return CheckResult(
                False,
                f"asked to wait 2 s, you came back (with {said}) before any message arrived:"
                " wait until a message comes or the time is up",
            )
        assert isinstance(late, float)
        if late > WAKE_WITHIN:
            return CheckResult(
                False,
                "a message arrived during a 2 s wait, and you went on waiting for more than"
                f" {WAKE_WITHIN:g} s after it: an idle teammate must wake as soon as the Lead"
                " writes to it",
            )
        if said is not True:
            return CheckResult(False, f"woken early, you returned {said}: say True when woken")
    already, quiet = data.get("already"), data.get("quiet")
    if not isinstance(already, dict) or not isinstance(quiet, dict):
        return unreadable(data)
    if already["said"] is not True or not already["took"] <= WAKE_WITHIN:  # type: ignore[operator]
        return CheckResult(False, "with the wake already set, return True at once")
    if quiet["said"] is not False:
        return CheckResult(False, f"when nothing woke you, you returned {quiet['said']}: say False")
    if not quiet["wall"] >= 0.28:  # type: ignore[operator]
        return CheckResult(
            False, "asked to wait 0.3 s with nothing to wake you, you came back early"
        )
    if not quiet["busy"] <= BUSY_WITHIN:  # type: ignore[operator]
        return CheckResult(
            False,
            "your 0.3 s wait kept a CPU busy for most of it: it keeps asking instead of"
            " sleeping. Ten idle teammates would keep ten cores busy doing nothing.",
        )
    return CheckResult(
        True,
        f"woken within {WAKE_WITHIN:g} s of a message sent by another thread, at"
        f" {len(_WAKE_AFTER)} moments of a 2 s wait; True at once when already woken; and with"
        f" nothing to wake it, False after 0.3 s, on a CPU (or waiting for one) for under"
        f" {BUSY_WITHIN:g} s of them.",
    )


WAIT_OR_WAKE_CHECK: Final = Checker(_measure_waits, _judge_waits)
"""Measured with a real thread: each early wake within 0.2 s, the already-set wait, a quiet
one that sleeps (CPython only: the browser runs no second thread)."""
