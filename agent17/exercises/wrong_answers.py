"""The classic wrong answers a class writes, per exercise, each with the feedback it must get.

    from agent17.exercises.wrong_answers import WRONG_ANSWERS

    for wrong in WRONG_ANSWERS["claim_one"]:
        print(wrong.label, check("claim_one", wrong.candidate))

Every entry must fail its check on every run, with feedback containing its
`fragment` (a checker that lets one through now and then would teach the
wrong lesson). The tests run the whole catalogue every time, and
benchmarks/exercise_reliability.py runs it many times and counts. `RIGHT_ANSWERS`
holds answers other than the reference solution that must pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from agent17.domain import Task, TaskClaim, TaskError, TaskStatus
from agent17.exercises.effects import NotesFile
from agent17.exercises.wrong_claims import (
    deferred_begin,
    gives_up_after_losing,
    ignores_the_rowcount,
    leaves_its_transaction_open,
    look_then_write,
    looks_under_the_lock_takes_after,
    looks_under_the_write_lock,
    never_takes,
    no_order_by,
    one_statement,
    plain_begin_look_then_write,
    returns_the_row,
    returns_the_rowcount,
    select_then_update,
    take_ignoring_the_rowcount,
    takes_blindly_reports_what_it_saw,
    takes_every_pending_job,
    takes_the_newest,
    takes_with_returning,
    through_a_cursor,
    tries_the_next_candidate,
    two_transactions,
    under_a_thread_lock,
)
from agent17.store.sqlite import SqliteTaskStore


@dataclass(frozen=True, slots=True)
class WrongAnswer:
    """A wrong answer: what it gets wrong, the function, and words its feedback must contain."""

    label: str
    candidate: Callable[..., Any]
    fragment: str


# -- ready_in_order ------------------------------------------------------------------------


def sorted_by_id(tasks: list[Task]) -> list[str]:
    done = {t.id for t in tasks if t.status is TaskStatus.COMPLETED}
    ready = [t for t in tasks if t.status is TaskStatus.PENDING]
    return sorted(t.id for t in ready if all(d in done for d in t.blocked_by))


def in_progress_counts_as_done(tasks: list[Task]) -> list[str]:
    started = {t.id for t in tasks if t.status is not TaskStatus.PENDING}
    return [
        t.id
        for t in tasks
        if t.status is TaskStatus.PENDING and all(d in started for d in t.blocked_by)
    ]


def no_dependencies_only(tasks: list[Task]) -> list[str]:
    return [t.id for t in tasks if t.status is TaskStatus.PENDING and not t.blocked_by]


# -- lease_is_live --------------------------------------------------------------------------


def closed_interval(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at <= now <= lease_expires_at


def compares_text(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at.isoformat() <= now.isoformat() < lease_expires_at.isoformat()


def forgets_the_start(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return now < lease_expires_at


# -- fenced_effect --------------------------------------------------------------------------

Effect = Callable[[], None]


def trusts_its_memory(store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect) -> bool:
    if claim.task.owner == owner:
        effect()
        return True
    return False


def lets_the_error_escape(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    store.verify_claim(claim.task.id, owner, claim.claim_token)
    effect()
    return True


def uses_its_own_clock(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    if datetime.now(claim.lease_expires_at_utc.tzinfo) >= claim.lease_expires_at_utc:
        return False
    effect()
    return True


def owner_and_status_only(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    task = store.get_task(claim.task.id)
    if task.owner != owner or task.status is not TaskStatus.IN_PROGRESS:
        return False
    effect()
    return True


def fence_after_the_effect(
    store: SqliteTaskStore, claim: TaskClaim, owner: str, effect: Effect
) -> bool:
    effect()
    try:
        store.verify_claim(claim.task.id, owner, claim.claim_token)
    except TaskError:
        return False
    return True


# -- next_pass -----------------------------------------------------------------------------


def _message(mailbox: list[str], index: int) -> str:
    return "message_handled" if mailbox[index] == "text" else "protocol_handled"


def work_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if ready and latest_plan not in ("pending", "rejected"):
        return f"claimed {ready[0]}"
    if mailbox:
        return _message(mailbox, 0)
    return "plan_blocked" if latest_plan in ("pending", "rejected") else "idle"


def ignores_the_gate(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    return f"claimed {ready[0]}" if ready else "idle"


def newest_message_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, -1)
    if latest_plan in ("pending", "rejected"):
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# -- wait_or_wake ----------------------------------------------------------------------------


def busy_waits(seconds: float, wake: threading.Event) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if wake.is_set():
            return True
    return False


def checks_once(seconds: float, wake: threading.Event) -> bool:
    if wake.is_set():
        return True
    time.sleep(seconds)
    return False


def upside_down(seconds: float, wake: threading.Event) -> bool:
    return not wake.wait(seconds)


# -- append_note -----------------------------------------------------------------------------


def locks_only_the_write(notes: NotesFile, line: str) -> None:
    text = notes.read()
    with notes.lock():
        notes.write(text + line + "\n")


def forgets_the_newline(notes: NotesFile, line: str) -> None:
    notes.append(line)


def appends_twice(notes: NotesFile, line: str) -> None:
    notes.append(line + "\n")
    notes.append(line + "\n")


def appends(notes: NotesFile, line: str) -> None:
    """Right: O_APPEND adds the line in one system call."""
    notes.append(line + "\n")


def _sql(text: str) -> Callable[[], str]:
    def claim_query() -> str:
        return text

    return claim_query


W = WrongAnswer
WRONG_ANSWERS: Final[Mapping[str, tuple[WrongAnswer, ...]]] = {
    "ready_in_order": (
        W("sorts by id", sorted_by_id, "never sort by id"),
        W("in progress counts as done", in_progress_counts_as_done, "not ready"),
        W("only tasks without dependencies", no_dependencies_only, "C is ready too"),
    ),
    "claim_query": (
        W(
            "forgets unmet",
            _sql("SELECT id FROM work WHERE status = 'pending' ORDER BY id LIMIT 1"),
            "unmet = 0",
        ),
        W(
            "every ready row",
            _sql("SELECT id FROM work WHERE status = 'pending' AND unmet = 0"),
            "one row only",
        ),
        W(
            "the last one",
            _sql(
                "SELECT id FROM work WHERE status = 'pending' AND unmet = 0"
                " ORDER BY id DESC LIMIT 1"
            ),
            "first",
        ),
        W(
            "defeats the index",
            _sql("SELECT min(id) FROM work WHERE status || '' = 'pending' AND unmet + 0 = 0"),
            "work_ready",
        ),
        W(
            "no ORDER BY: the index's order",
            _sql("SELECT id FROM work WHERE status = 'pending' AND unmet = 0 LIMIT 1"),
            "reverse_unordered_selects",
        ),
        W("not a SELECT", _sql("DELETE FROM work"), "one SELECT"),
        W("no such table", _sql("SELECT id FROM nowhere"), "refused"),
    ),
    "lease_is_live": (
        W("closed interval", closed_interval, "half-open"),
        W("compares text", compares_text, "Tokyo"),
        W("forgets the start", forgets_the_start, "before the claim"),
    ),
    "take_if_pending": (
        W("ignores the rowcount", take_ignoring_the_rowcount, "Answer with what your UPDATE did"),
        W("unconditional UPDATE", takes_blindly_reports_what_it_saw, "someone else's job"),
        W("look, then write", look_then_write, "wrote over erin's claim"),
        W("returns the rowcount", returns_the_rowcount, "must return a bool"),
        W("never takes", never_takes, "job 1 was pending"),
        W("plain BEGIN, look, then write", plain_begin_look_then_write, "was stale"),
    ),
    "claim_one": (
        W("select, then update", select_then_update, "two separate steps"),
        W("two transactions", two_transactions, "two separate steps"),
        W("through a cursor", through_a_cursor, "two separate steps"),
        W("ignores the rowcount", ignores_the_rowcount, "changed no row"),
        W("gives up after losing a race", gives_up_after_losing, "returned None while jobs"),
        W("deferred BEGIN", deferred_begin, "BEGIN IMMEDIATE"),
        W("takes the newest", takes_the_newest, "lowest pending id"),
        W("transaction left open", leaves_its_transaction_open, "still open"),
        W("a threading.Lock", under_a_thread_lock, "its own copy of the lock"),
        W(
            "looks under the lock, takes after it",
            looks_under_the_lock_takes_after,
            "two separate steps",
        ),
        W("no ORDER BY", no_order_by, "lowest pending id"),
        W("every pending job at once", takes_every_pending_job, "One call takes one job"),
        W("returns the row", returns_the_row, "not the row"),
    ),
    "fenced_effect": (
        W("trusts its memory", trusts_its_memory, "completed"),
        W("lets the error escape", lets_the_error_escape, "answer False"),
        W("its own clock", uses_its_own_clock, "must run"),
        W("owner and status, not the token", owner_and_status_only, "claimed D again"),
        W("fences after the effect", fence_after_the_effect, "the effect ran"),
    ),
    "next_pass": (
        W("work first", work_first, "mailbox comes before the board"),
        W("ignores the plan gate", ignores_the_gate, "before claim_next"),
        W("newest message first", newest_message_first, "text, shutdown_request"),
    ),
    "wait_or_wake": (
        W("busy-waits", busy_waits, "CPU"),
        W("checks once, then sleeps", checks_once, "went on waiting"),
        W("upside down", upside_down, "say True when woken"),
    ),
    "append_note": (
        W("locks only the write", locks_only_the_write, "were lost"),
        W("forgets the newline", forgets_the_newline, "run together"),
        W("appends twice", appends_twice, "doubled"),
    ),
}
"""Each exercise's classic wrong answers, in course order."""

RIGHT_ANSWERS: Final[Mapping[str, tuple[Callable[..., Any], ...]]] = {
    "claim_query": (_sql("SELECT min(id) FROM work WHERE status = 'pending' AND unmet = 0"),),
    "take_if_pending": (looks_under_the_write_lock, takes_with_returning),
    "claim_one": (one_statement, tries_the_next_candidate),
    "append_note": (appends,),
}
"""Answers other than the reference solution that must pass."""
