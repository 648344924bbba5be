"""Exercises on reading the board: what is ready, the claim query's plan, the half-open lease."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from agent17.domain import Task, TaskStatus, completed_ids, is_ready
from agent17.exercises._bounded import CheckResult, raised

# -- ready_in_order ------------------------------------------------------------------------

ReadyInOrder = Callable[[list[Task]], list[str]]


def ready_in_order_starter(tasks: list[Task]) -> list[str]:
    """The ids claim_next could take, in the order it takes them (`tasks`: creation order)."""
    return [task.id for task in tasks if task.status is TaskStatus.PENDING]


def ready_in_order_solution(tasks: list[Task]) -> list[str]:
    """The ids claim_next could take, in the order it takes them (`tasks`: creation order)."""
    done = {task.id for task in tasks if task.status is TaskStatus.COMPLETED}
    # Creation order is the order given; a task id says nothing about it.
    return [
        task.id
        for task in tasks
        if task.status is TaskStatus.PENDING and all(dep in done for dep in task.blocked_by)
    ]


READY_IN_ORDER_HINT = (
    "Pending is one of two conditions for ready: what must be true of the tasks a task waits"
    " for (and is 'started' enough)? As for the order: which order were you given, and what"
    " could a UUID tell you about when a task was made?"
)


def _task(
    number: int, status: str, blocked_by: tuple[int, ...] = (), owner: str | None = None
) -> Task:
    # Ids run *backwards* against creation order, so sorting by id is caught. Subjects are
    # letters in creation order (A, B, C, ...), as on the chapter's board.
    return Task(
        _id(number),
        chr(ord("A") + number - 1),
        "",
        TaskStatus(status),
        owner,
        tuple(_id(dep) for dep in blocked_by),
    )


def _id(number: int) -> str:
    return f"{99 - number:08d}-0000-4000-8000-000000000000"


READY_CASES: tuple[tuple[str, list[Task]], ...] = (
    ("an empty board", []),
    (
        "the chapter's board: A and B pending, C waiting for both",
        [_task(1, "pending"), _task(2, "pending"), _task(3, "pending", (1, 2))],
    ),
    (
        "A completed, B still in progress: C waits for B",
        [
            _task(1, "completed", owner="alice"),
            _task(2, "in_progress", owner="bob"),
            _task(3, "pending", (1, 2)),
        ],
    ),
    (
        "A and B completed: C is ready",
        [
            _task(1, "completed", owner="alice"),
            _task(2, "completed", owner="bob"),
            _task(3, "pending", (1, 2)),
        ],
    ),
    (
        "a longer board in creation order (ids sort the other way round)",
        [
            _task(1, "completed", owner="alice"),
            _task(2, "pending", (1,)),
            _task(3, "in_progress", (1,), owner="bob"),
            _task(4, "pending"),
            _task(5, "pending", (3,)),
            _task(6, "pending", (1, 4)),
            _task(7, "completed", owner="carol"),
            _task(8, "pending", (7,)),
        ],
    ),
)


def _name(tasks: list[Task], ids: object) -> str:
    if not isinstance(ids, list):
        return repr(ids)
    subjects = {task.id: task.subject for task in tasks}

    def named(item: object) -> str:
        if isinstance(item, Task):
            return f"the Task {item.subject}"
        return subjects.get(item, repr(item)) if isinstance(item, str) else repr(item)

    return "[" + ", ".join(named(item) for item in ids) + "]"


def _not_ids(tasks: list[Task], got: object) -> str | None:
    """What is wrong with the kind of answer, if it is not a list of task ids."""
    if got is None:
        return "return a list of ids (did your function reach its return?)"
    if not isinstance(got, list):
        return f"return a list of ids, not a {type(got).__name__}"
    ids = {task.id for task in tasks}
    subjects = {task.subject for task in tasks}
    for item in got:
        if isinstance(item, Task):
            return "return each task's id (task.id), not the Task itself"
        if not isinstance(item, str):
            return f"return the tasks' ids (task.id, a str each), not {type(item).__name__} values"
        if item not in ids and item in subjects:
            return "return the tasks' ids (task.id), not their subjects"
    return None


def _subjects(tasks: list[Task], ids: list[str]) -> str:
    subjects = {task.id: task.subject for task in tasks}
    return ", ".join(subjects.get(task_id, repr(task_id)) for task_id in ids)


def check_ready_in_order(candidate: ReadyInOrder) -> CheckResult:
    """Compared with claim_next's rule on five boards, one of them with UUIDs against the order."""
    for what, tasks in READY_CASES:
        expected = [task.id for task in tasks if is_ready(task, completed_ids(tasks))]
        try:
            got = candidate(list(tasks))
        except Exception as error:
            return CheckResult(False, f"on {what}, {raised(error)}")
        if got == expected:
            continue
        named_got, named_expected = _name(tasks, got), _name(tasks, expected)
        wrong_kind = _not_ids(tasks, got)
        if wrong_kind is not None:
            reason = wrong_kind
        elif isinstance(got, list) and sorted(got) == sorted(expected):
            reason = "the right tasks in the wrong order: keep creation order, never sort by id"
        elif isinstance(got, list) and set(got) > set(expected):
            extra = [task_id for task_id in got if task_id not in expected]
            reason = (
                f"{_subjects(tasks, extra)} {'is' if len(extra) == 1 else 'are'} not ready:"
                " pending is not enough, every task in blocked_by must be completed"
            )
        elif isinstance(got, list) and set(got) < set(expected):
            missing = [task_id for task_id in expected if task_id not in got]
            reason = (
                f"{_subjects(tasks, missing)} {'is' if len(missing) == 1 else 'are'} ready too:"
                " a task that waits for others is ready once every one of them is completed"
            )
        else:
            reason = "claim_next would take something else"
        return CheckResult(
            False,
            f"on {what}, you said {named_got}; claim_next would take {named_expected}: {reason}",
        )
    return CheckResult(
        True, "on all five boards you named exactly the ready tasks, in creation order."
    )


# -- claim_query: the claim's SELECT and its plan --------------------------------------------

ClaimQuery = Callable[[], str]

WORK_TABLE = """
CREATE TABLE work (
    id     INTEGER PRIMARY KEY,      -- creation order
    status TEXT NOT NULL,            -- pending | in_progress | completed
    unmet  INTEGER NOT NULL          -- dependencies not completed yet
);
CREATE INDEX work_ready ON work (status, unmet, id);
"""


def claim_query_starter() -> str:
    """The SELECT that finds the id of the first ready task of `work` (see WORK_TABLE)."""
    return "SELECT id FROM work ORDER BY id LIMIT 1"


def claim_query_solution() -> str:
    """The SELECT that finds the id of the first ready task of `work` (see WORK_TABLE)."""
    return "SELECT id FROM work WHERE status = 'pending' AND unmet = 0 ORDER BY id LIMIT 1"


CLAIM_QUERY_HINT = (
    "Look at the columns of the work_ready index, in their order. A WHERE that pins the"
    " leading columns to single values lets SQLite jump straight to the first matching entry,"
    " and the entries after it are already sorted by the last column: which one is 'first'?"
)


def check_claim_query(candidate: ClaimQuery) -> CheckResult:
    """The right id on a 20,000-row board, found by a seek on work_ready (EXPLAIN QUERY PLAN)."""
    try:
        sql = candidate()
    except Exception as error:
        return CheckResult(False, raised(error))
    if not isinstance(sql, str) or not sql.lstrip().upper().startswith("SELECT"):
        return CheckResult(False, f"return the text of one SELECT statement, not {sql!r}")
    with tempfile.TemporaryDirectory(prefix="agent17-exercise-") as folder:
        connection = sqlite3.connect(Path(folder) / "work.sqlite3", isolation_level=None)
        try:
            connection.executescript(WORK_TABLE)
            rows = []
            for n in range(1, 20_001):
                status = "completed" if n < 15_000 else ("pending" if n % 3 else "in_progress")
                unmet = 0 if status != "pending" or n % 7 == 5 else 1
                rows.append((n, status, unmet))
            connection.execute("BEGIN")
            connection.executemany("INSERT INTO work VALUES (?, ?, ?)", rows)
            connection.execute("COMMIT")
            connection.execute("ANALYZE")
            expected = min(n for n, status, unmet in rows if status == "pending" and unmet == 0)
            try:
                found = connection.execute(sql).fetchall()
                plan = [str(row[3]) for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
                # Rows of a SELECT without ORDER BY come in whatever order the plan yields;
                # this pragma reverses that order, so "first" must be asked for.
                connection.execute("PRAGMA reverse_unordered_selects = ON")
                reversed_found = connection.execute(sql).fetchall()
            except sqlite3.Error as error:
                return CheckResult(False, f"SQLite refused your query: {error}")
        finally:
            connection.close()
    if found != [(expected,)]:
        got = found[:3]
        return CheckResult(
            False,
            f"the first ready task is {expected}; your query returned {got}"
            + ("..." if len(found) > 3 else "")
            + ": ready is pending with unmet = 0, first is the lowest id, and one row only",
        )
    shown = "; ".join(plan)
    if reversed_found != found:
        return CheckResult(
            False,
            f"the right id this time, but only because of the order in which the index happens"
            f" to hand back its rows: SQL promises no order unless you ask for one, and with"
            f" SQLite's PRAGMA reverse_unordered_selects on, your query returned"
            f" {reversed_found[:3]}. Say which task is first.",
        )
    if not any(step.split()[1:2] == ["work"] for step in plan):
        return CheckResult(
            False,
            f"your query never reads the table work ({shown}): the id must come from the board,"
            " found by the query, not written into it",
        )
    if any(step.startswith("SCAN") for step in plan):
        return CheckResult(
            False,
            f"the right id, but SQLite reads the whole table to find it ({shown}): a claim would"
            " get slower as the board grows. Compare with equality on status and unmet so the"
            " index work_ready can be used.",
        )
    if "TEMP B-TREE" in shown:
        # A range on unmet (or anything but equality) leaves the matches out of id order.
        return CheckResult(
            False,
            f"the right id, but SQLite sorts every matching row to find it ({shown}): the more"
            " ready tasks, the slower the claim. With equality on both status and unmet, the"
            " index entries are already in id order and the first one is the answer.",
        )
    if "work_ready" not in shown:
        return CheckResult(
            False,
            f"the right id, but SQLite walks the table for it, not the index work_ready ({shown}):"
            " write plain equality on the indexed columns (status = 'pending' AND unmet = 0)",
        )
    return CheckResult(True, f"the right task, found with one seek: {shown}")


# -- lease_is_live ---------------------------------------------------------------------------

LeaseIsLive = Callable[[datetime, datetime, datetime], bool]


def lease_is_live_starter(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    """True if a lease [claimed_at, lease_expires_at) still holds at `now`."""
    return claimed_at <= now <= lease_expires_at


def lease_is_live_solution(now: datetime, claimed_at: datetime, lease_expires_at: datetime) -> bool:
    """True if a lease [claimed_at, lease_expires_at) still holds at `now`."""
    # Half-open: the first instant is in, the expiry instant is already out. Aware
    # datetimes compare as instants, whatever their UTC offsets.
    return claimed_at <= now < lease_expires_at


LEASE_HINT = (
    "Draw the lease on a time line: is its first instant inside it? Its last? At"
    " lease_expires_at exactly, may bob take the task? And compare the instants themselves:"
    " two clocks in different time zones can show different text for the same moment."
)

_START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
_END = _START + timedelta(minutes=5)
_TOKYO = timezone(timedelta(hours=9))
_TICK = timedelta(microseconds=1)

LEASE_CASES: tuple[tuple[str, datetime, bool], ...] = (
    ("in the middle of the lease", _START + timedelta(minutes=2), True),
    ("at the claim instant itself", _START, True),
    ("one microsecond before the end", _END - _TICK, True),
    ("at the expiry instant exactly", _END, False),
    ("one microsecond after the end", _END + _TICK, False),
    ("one microsecond before the claim", _START - _TICK, False),
    (
        "in the middle, written in Tokyo time (UTC+9)",
        (_START + timedelta(minutes=2)).astimezone(_TOKYO),
        True,
    ),
    ("at the expiry instant, written in Tokyo time", _END.astimezone(_TOKYO), False),
)


def check_lease_is_live(candidate: LeaseIsLive) -> CheckResult:
    """Eight instants around a five-minute lease, two of them in another time zone."""
    for what, now, expected in LEASE_CASES:
        try:
            got = candidate(now, _START, _END)
        except Exception as error:
            return CheckResult(False, f"{what}: {raised(error)}")
        if got is not expected:
            extra = (
                " The lease is over at its expiry instant: [claimed_at, lease_expires_at) is"
                " half-open."
                if "exactly" in what or "expiry instant" in what
                else ""
            )
            return CheckResult(
                False,
                f"{what} ({now.isoformat()}) the lease is {'live' if expected else 'over'},"
                f" you said {got!r}.{extra}",
            )
    return CheckResult(True, "all eight instants right, the expiry instant included.")
