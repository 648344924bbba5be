"""The classic wrong answers to the exercises a search checks, and some other right ones.

Each wrong answer is a small function with one line above it saying the mistake it makes;
`wrong_answers.WRONG_ANSWERS` lists them with words their feedback must contain. Some are
not honest mistakes but tries at forging a pass (an answer that equals anything, a patch to
the checker): the sandbox must turn those down too.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from agent17.domain import Task, TaskStatus
from agent17.exercises._bounded import CheckResult

PENDING, COMPLETED = TaskStatus.PENDING, TaskStatus.COMPLETED

# -- ready_in_order ------------------------------------------------------------------------


def _done(tasks: list[Task]) -> set[str]:
    return {t.id for t in tasks if t.status is COMPLETED}


# Sorts the ready ids, as if a UUID said when its task was made.
def sorted_by_id(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return sorted(t.id for t in tasks if t.status is PENDING and set(t.blocked_by) <= done)


# Counts a dependency that is only in progress as done.
def in_progress_counts_as_done(tasks: list[Task]) -> list[str]:
    started = {t.id for t in tasks if t.status is not PENDING}
    return [t.id for t in tasks if t.status is PENDING and set(t.blocked_by) <= started]


# Takes only the pending tasks that wait for nothing.
def no_dependencies_only(tasks: list[Task]) -> list[str]:
    return [t.id for t in tasks if t.status is PENDING and not t.blocked_by]


# Its loop overwrites the verdict for each dependency: the last one decides for all.
def last_dependency_decides(tasks: list[Task]) -> list[str]:
    done, ready = _done(tasks), []
    for t in tasks:
        if t.status is not PENDING:
            continue
        ok = True
        for dep in t.blocked_by:
            ok = dep in done
        if ok:
            ready.append(t.id)
    return ready


# Its loop stops at the first completed dependency: one is enough for all.
def one_completed_dependency_is_enough(tasks: list[Task]) -> list[str]:
    done, ready = _done(tasks), []
    for t in tasks:
        if t.status is PENDING:
            for dep in t.blocked_by:
                if dep in done:
                    ready.append(t.id)
                    break
            else:
                if not t.blocked_by:
                    ready.append(t.id)
    return ready


# Looks only at the first task in blocked_by.
def first_dependency_only(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return [
        t.id for t in tasks if t.status is PENDING and (not t.blocked_by or t.blocked_by[0] in done)
    ]


# Takes every task that is not completed, in progress too.
def not_completed_is_ready(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return [t.id for t in tasks if t.status is not COMPLETED and set(t.blocked_by) <= done]


# Names only the first ready task: the one claim_next takes now, not all it could take.
def only_the_first(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return [t.id for t in tasks if t.status is PENDING and set(t.blocked_by) <= done][:1]


# Newest first: the list reversed.
def newest_first(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return [t.id for t in reversed(tasks) if t.status is PENDING and set(t.blocked_by) <= done]


# Returns the Task objects instead of their ids.
def returns_the_tasks(tasks: list[Task]) -> list[Task]:
    done = _done(tasks)
    return [t for t in tasks if t.status is PENDING and set(t.blocked_by) <= done]


# Returns the subjects (A, B) instead of the ids.
def returns_the_subjects(tasks: list[Task]) -> list[str]:
    done = _done(tasks)
    return [t.subject for t in tasks if t.status is PENDING and set(t.blocked_by) <= done]


class _EqualsAnything(list[str]):
    """A list that says it equals whatever it is compared with."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


# A forgery: an answer whose == is always true.
def equals_anything(tasks: list[Task]) -> list[str]:
    return _EqualsAnything()


# A forgery: patches the checker's modules from inside the candidate, then answers nothing.
def patches_the_checker(tasks: list[Task]) -> list[str]:
    from agent17.exercises import _bounded, search

    setattr(search, "same", lambda a, b: True)  # noqa: B010 (a patch, on purpose)
    setattr(search.Search, "judge", lambda self, data: CheckResult(True, "forged"))  # noqa: B010
    setattr(_bounded, "unreadable", lambda data: CheckResult(True, "forged"))  # noqa: B010
    return []


# -- claim_query ---------------------------------------------------------------------------

_READY_WHERE = "WHERE status = 'pending' AND unmet = 0"


# Forgets unmet: a pending task that still waits is taken.
def forgets_unmet() -> str:
    return "SELECT id FROM work WHERE status = 'pending' ORDER BY id LIMIT 1"


# No LIMIT: every ready row comes back.
def every_ready_row() -> str:
    return f"SELECT id FROM work {_READY_WHERE} ORDER BY id"


# ORDER BY id DESC: the newest ready task.
def the_last_one() -> str:
    return f"SELECT id FROM work {_READY_WHERE} ORDER BY id DESC LIMIT 1"


# Wraps the columns in expressions, so the index cannot be used.
def defeats_the_index() -> str:
    return "SELECT min(id) FROM work WHERE status || '' = 'pending' AND unmet + 0 = 0"


# No ORDER BY: "first" is whatever order the index happens to give.
def unordered_limit_one() -> str:
    return f"SELECT id FROM work {_READY_WHERE} LIMIT 1"


# Not a SELECT at all.
def not_a_select() -> str:
    return "DELETE FROM work"


# A table that does not exist.
def no_such_table() -> str:
    return "SELECT id FROM nowhere"


# Anything not completed, so a task in progress too.
def in_progress_too() -> str:
    return "SELECT id FROM work WHERE status != 'completed' AND unmet = 0 ORDER BY id LIMIT 1"


# unmet < 2: a task still waiting for one dependency counts as ready.
def unmet_below_two() -> str:
    return "SELECT id FROM work WHERE status = 'pending' AND unmet < 2 ORDER BY id LIMIT 1"


# A range on unmet: the right row, but every match is sorted to find it.
def range_on_unmet() -> str:
    return "SELECT id FROM work WHERE status = 'pending' AND unmet < 1 ORDER BY id LIMIT 1"


# LIKE instead of equality: the whole table is read.
def like_instead_of_equality() -> str:
    return "SELECT id FROM work WHERE status LIKE 'pending' AND unmet = 0 ORDER BY id LIMIT 1"


# The id seen on one board, written into the query.
def hard_coded_id() -> str:
    return "SELECT 15013"


# OFFSET 1: skips the first ready task.
def offset_one() -> str:
    return f"SELECT id FROM work {_READY_WHERE} ORDER BY id LIMIT 1 OFFSET 1"


# The whole row, not the id.
def whole_row() -> str:
    return f"SELECT * FROM work {_READY_WHERE} ORDER BY id LIMIT 1"


# Returns the query in a list, not its text.
def query_in_a_list() -> str:
    query: Any = [f"SELECT id FROM work {_READY_WHERE} ORDER BY id LIMIT 1"]
    return query  # type: ignore[no-any-return]


# -- lease_is_live -------------------------------------------------------------------------


# A closed interval: still live at the expiry instant.
def closed_interval(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at <= now <= lease_expires_at


# Open at both ends: not yet live at the claim instant.
def open_interval(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at < now < lease_expires_at


# Compares the ISO text, which sorts by wall clock, not by instant.
def compares_text(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at.isoformat() <= now.isoformat() < lease_expires_at.isoformat()


# Looks only at the end of the lease.
def forgets_the_start(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return now < lease_expires_at


# Drops the UTC offsets and compares the wall clocks.
def drops_the_offsets(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    def naive(when: datetime) -> datetime:
        return when.replace(tzinfo=None)

    return naive(claimed_at) <= naive(now) < naive(lease_expires_at)


# Compares whole seconds: the fraction of a second is lost.
def whole_seconds(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    def second(when: datetime) -> int:
        return int(when.timestamp())

    return second(claimed_at) <= second(now) < second(lease_expires_at)


# Compares the clock fields (hour, minute, second), as if every clock were in one zone.
def compares_clock_fields(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    def fields(when: datetime) -> tuple[int, ...]:
        return (when.year, when.month, when.day, when.hour, when.minute, when.second)

    return fields(claimed_at) <= fields(now) < fields(lease_expires_at)


# Returns 1 or 0, not a bool.
def answers_with_a_number(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    live: Any = 1 if claimed_at <= now < lease_expires_at else 0
    return live  # type: ignore[no-any-return]


class _Yes:
    """An answer that says it equals anything, True and False alike."""

    def __eq__(self, other: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]


# A forgery: an answer whose == is always true.
def always_equal(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    answer: Any = _Yes()
    return answer  # type: ignore[no-any-return]


# -- next_pass -----------------------------------------------------------------------------


def _message(mailbox: list[str], index: int) -> str:
    return "message_handled" if mailbox[index] == "text" else "protocol_handled"


def _blocks(plan: str | None) -> bool:
    return plan in ("pending", "rejected")


# Claims ready work before reading its mail.
def work_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if ready and not _blocks(latest_plan):
        return f"claimed {ready[0]}"
    if mailbox:
        return _message(mailbox, 0)
    return "plan_blocked" if _blocks(latest_plan) else "idle"


# Never asks the plan gate.
def ignores_the_gate(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    return f"claimed {ready[0]}" if ready else "idle"


# Reads the newest message first.
def newest_message_first(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, -1)
    if _blocks(latest_plan):
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# Looks at the board before the plan gate: with nothing ready it says idle.
def board_before_the_gate(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    if not ready:
        return "idle"
    return "plan_blocked" if _blocks(latest_plan) else f"claimed {ready[0]}"


# Asks the plan gate before the mailbox.
def gate_before_the_mailbox(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if _blocks(latest_plan):
        return "plan_blocked"
    if mailbox:
        return _message(mailbox, 0)
    return f"claimed {ready[0]}" if ready else "idle"


# Only a pending plan blocks; a rejected one lets her claim.
def rejected_plan_passes(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    if latest_plan == "pending":
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# Any plan blocks, an approved one too.
def any_plan_blocks(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    if latest_plan is not None:
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# Calls every message a protocol message, a text too.
def every_message_is_protocol(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return "protocol_handled"
    if _blocks(latest_plan):
        return "plan_blocked"
    return f"claimed {ready[0]}" if ready else "idle"


# Claims the last ready task, not the first.
def claims_the_last(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    if mailbox:
        return _message(mailbox, 0)
    if _blocks(latest_plan):
        return "plan_blocked"
    return f"claimed {ready[-1]}" if ready else "idle"


# -- wait_or_wake ----------------------------------------------------------------------------


# Asks the event over and over: the wait burns a CPU core.
def busy_waits(seconds: float, wake: threading.Event) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if wake.is_set():
            return True
    return False


# Looks once, then sleeps the whole time.
def checks_once(seconds: float, wake: threading.Event) -> bool:
    if wake.is_set():
        return True
    time.sleep(seconds)
    return False


# Says False when woken and True when not.
def upside_down(seconds: float, wake: threading.Event) -> bool:
    return not wake.wait(seconds)


def _sleeps_in_slices(slice_seconds: float, seconds: float, wake: threading.Event) -> bool:
    end = time.monotonic() + seconds
    while not wake.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(slice_seconds, left))
    return True


# Sleeps in slices of 0.8 s and looks between them: woken up to 0.8 s late.
def sleeps_in_slices_of_08(seconds: float, wake: threading.Event) -> bool:
    return _sleeps_in_slices(0.8, seconds, wake)


# Sleeps in slices of 0.3 s and looks between them: woken up to 0.3 s late.
def sleeps_in_slices_of_03(seconds: float, wake: threading.Event) -> bool:
    return _sleeps_in_slices(0.3, seconds, wake)


# Waits, but forgets to return what the wait said.
def forgets_to_return(seconds: float, wake: threading.Event) -> bool:
    wake.wait(seconds)
    result: Any = None
    return result  # type: ignore[no-any-return]


# -- other right answers ---------------------------------------------------------------------


# Right: min(id) of the ready rows (NULL, read as no task, when none is ready).
def min_of_the_ready() -> str:
    return f"SELECT min(id) FROM work {_READY_WHERE}"


# Right: the domain's own rule, asked for each task.
def asks_is_ready(tasks: list[Task]) -> list[str]:
    from agent17.domain import completed_ids, is_ready

    done = completed_ids(tasks)
    return [t.id for t in tasks if is_ready(t, done)]


# Right: compares the instants as UTC timestamps.
def compares_timestamps(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at.timestamp() <= now.timestamp() < lease_expires_at.timestamp()


# Right: everything converted to UTC first.
def in_utc(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    return claimed_at.astimezone(UTC) <= now.astimezone(UTC) < lease_expires_at.astimezone(UTC)


# Right: a table of what the oldest message does.
def by_table(mailbox: list[str], latest_plan: str | None, ready: list[str]) -> str:
    handled = {"text": "message_handled"}
    if mailbox:
        return handled.get(mailbox[0], "protocol_handled")
    if latest_plan in {"pending", "rejected"}:
        return "plan_blocked"
    return "idle" if not ready else "claimed " + ready[0]


# Right: slices of 0.05 s, woken well within 0.2 s.
def sleeps_in_short_slices(seconds: float, wake: threading.Event) -> bool:
    return _sleeps_in_slices(0.05, seconds, wake)
