"""Exercises on reading the board: what is ready, and the claim query's plan.

Both are checked against the reference on a complete space of small boards (`search`):
`ready_in_order` on every board of up to four tasks that claim_next can meet, `claim_query`
on every `work` table of up to four rows, and then for its plan on a 20,000-row board.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import cache
from itertools import combinations, product
from typing import Any, Final

from agent17.domain import Task, TaskStatus, completed_ids, is_ready
from agent17.exercises._bounded import Checker, CheckResult, Plain, run_check, unreadable
from agent17.exercises.search import Answer, Search, shown, table, value, wrong_kind

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

_OWNERS: Final = {TaskStatus.IN_PROGRESS: "alice", TaskStatus.COMPLETED: "bob"}


def _id(number: int) -> str:
    # Ids run *backwards* against creation order, so sorting by id is caught.
    return f"{99 - number:08d}-0000-4000-8000-000000000000"


def _board(statuses: tuple[TaskStatus, ...], waits: tuple[tuple[int, ...], ...]) -> list[Task]:
    # Subjects are letters in creation order (A, B, C, ...), as on the chapter's board.
    return [
        Task(
            _id(number),
            chr(ord("A") + number),
            "",
            status,
            _OWNERS.get(status),
            tuple(_id(earlier) for earlier in waits[number]),
        )
        for number, status in enumerate(statuses)
    ]


@cache
def ready_boards() -> tuple[tuple[Task, ...], ...]:
    """Every board of up to four tasks that claim_next can meet, smallest first.

    A task waits only for tasks made before it (blocked_by names existing tasks), and a task
    that was ever claimed had every task it waits for completed.
    """
    keyed = []
    for size in range(5):
        earlier_sets = [
            [subset for count in range(n + 1) for subset in combinations(range(n), count)]
            for n in range(size)
        ]
        for waits in product(*earlier_sets):
            for statuses in product(list(TaskStatus), repeat=size):
                if all(
                    status is TaskStatus.PENDING
                    or all(statuses[dep] is TaskStatus.COMPLETED for dep in waits[number])
                    for number, status in enumerate(statuses)
                ):
                    ranks = tuple(list(TaskStatus).index(status) for status in statuses)
                    key = (size, sum(map(len, waits)), ranks, waits)
                    keyed.append((key, tuple(_board(statuses, waits))))
    return tuple(board for _, board in sorted(keyed, key=lambda pair: pair[0]))


def _named(board: tuple[Task, ...], items: list[Any]) -> str:
    """A list as the feedback shows it: a task's id by its subject, a Task as 'the Task A'."""
    subjects = {task.id: task.subject for task in board}

    def one(item: object) -> str:
        if isinstance(item, Task):
            return f"the Task {item.subject}"
        if type(item) is str and item in subjects:
            return subjects[item]
        return shown(item)

    return "[" + ", ".join(one(item) for item in items) + "]"


def _read_ids(got: object, board: tuple[Task, ...]) -> Answer:
    """The answer as a plain list of str, or why it is not a list of task ids."""
    if got is None:
        return wrong_kind("return a list of ids (did your function reach its return?)", "None")
    if type(got) is not list:
        return wrong_kind(f"return a list of ids, not a {type(got).__name__}", shown(got))
    for item in got:
        if isinstance(item, Task):
            return wrong_kind(
                "return each task's id (task.id), not the Task itself", _named(board, got)
            )
        if type(item) is not str:
            return wrong_kind(
                f"return the tasks' ids (task.id, a str each), not {type(item).__name__} values",
                _named(board, got),
            )
    return value(list(got))


def _ready(board: tuple[Task, ...]) -> Plain:
    done = completed_ids(board)
    return [task.id for task in board if is_ready(task, done)]


def _draw_board(board: tuple[Task, ...]) -> str:
    if not board:
        return "  (an empty board: no tasks)"
    subjects = {task.id: task.subject for task in board}
    rows = [
        [
            task.subject,
            task.status.value,
            ", ".join(subjects[dep] for dep in task.blocked_by) or "-",
            task.id,
        ]
        for task in board
    ]
    return table(["task", "status", "blocked_by", "id"], rows) + "\n  (rows in creation order)"


def _listed(subjects: list[str]) -> str:
    return ", ".join(subjects) + (" is" if len(subjects) == 1 else " are")


def _explain_ready(board: tuple[Task, ...], said: Plain, right: Plain) -> str:
    assert isinstance(said, list) and isinstance(right, list)
    by_id = {task.id: task for task in board}
    words = f"you said {_named(board, said)}; claim_next would take {_named(board, right)}"
    strangers = [item for item in said if item not in by_id]
    if strangers:
        if all(item in {task.subject for task in board} for item in strangers):
            return f"{words}: return the tasks' ids (task.id), not their subjects"
        return f"{words}: {shown(strangers[0])} is not the id of a task on this board"
    twice = [item for number, item in enumerate(said) if item in said[:number]]
    if twice:
        return f"{words}: {by_id[str(twice[0])].subject} is there twice; name each ready task once"
    if sorted(map(str, said)) == sorted(map(str, right)):
        return (
            f"{words}: the right tasks in the wrong order: keep creation order (the order of"
            " the list), never sort by id"
        )
    reasons = []
    extra = [by_id[str(item)] for item in said if item not in right]
    taken = [task.subject for task in extra if task.status is not TaskStatus.PENDING]
    if taken:
        reasons.append(f"{_listed(taken)} not pending: claim_next hands out only pending tasks")
    waiting = [task.subject for task in extra if task.status is TaskStatus.PENDING]
    if waiting:
        reasons.append(
            f"{_listed(waiting)} not ready: pending is not enough, every task in blocked_by"
            " must be completed"
        )
    missing = [by_id[str(item)] for item in right if item not in said]
    if missing:
        reasons.append(
            f"{_listed([task.subject for task in missing])} ready too: a pending task is ready"
            " once every task in its blocked_by is completed (and at once if it waits for none)"
        )
    return f"{words}: {'; '.join(reasons)}"


READY_SEARCH: Final = Search(
    space=ready_boards,
    ask=lambda candidate, board: candidate(list(board)),
    read=_read_ids,
    reference=_ready,
    draw=_draw_board,
    explain=_explain_ready,
    space_text=(
        "boards of up to four tasks that claim_next can meet (every status and dependency"
        " pattern; ids sort against creation order)"
    ),
    noun="board",
)


READY_IN_ORDER_CHECK: Final = READY_SEARCH.checker()
"""Compared with claim_next's rule on every board of up to four tasks it can meet."""


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

WorkRow = tuple[int, str, int]
# What a row of `work` can hold: a claimed or completed task waited for nothing unmet.
_ROW_STATES: Final = (
    ("pending", 0),
    ("pending", 1),
    ("pending", 2),
    ("in_progress", 0),
    ("completed", 0),
)
# The queries' deadline (the SQL is data: it runs in a sandbox of its own, apart from the
# candidate's code).
SQL_SECONDS: Final = 30.0


@cache
def work_tables() -> tuple[tuple[WorkRow, ...], ...]:
    """Every `work` table of up to four rows (ids 1, 2, ... in creation order), smallest first."""
    return tuple(
        tuple((number, status, unmet) for number, (status, unmet) in enumerate(states, 1))
        for size in range(5)
        for states in product(_ROW_STATES, repeat=size)
    )


@cache
def _big_table() -> tuple[WorkRow, ...]:
    rows = []
    for n in range(1, 20_001):
        status = "completed" if n < 15_000 else ("pending" if n % 3 else "in_progress")
        unmet = 0 if status != "pending" or n % 7 == 5 else 1
        rows.append((n, status, unmet))
    return tuple(rows)


def _first_ready(rows: tuple[WorkRow, ...]) -> int | None:
    return min((n for n, status, unmet in rows if status == "pending" and unmet == 0), default=None)


@cache
def _scratch_board() -> sqlite3.Connection:
    # One in-memory board per process, refilled for each small table.
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.executescript(WORK_TABLE)
    return connection


def _rows(connection: sqlite3.Connection, sql: str, reverse: bool) -> list[Plain]:
    """The query's first rows (at most 3), once in the plan's order and once reversed by
    `PRAGMA reverse_unordered_selects` (SQL promises no order unless one is asked for)."""
    connection.execute(f"PRAGMA reverse_unordered_selects = {'ON' if reverse else 'OFF'}")
    found = connection.execute(sql).fetchmany(3)
    plain: list[Plain] = [
        [cell if not isinstance(cell, bytes) else repr(cell) for cell in row] for row in found
    ]
    return [] if plain == [[None]] else plain  # min(id) of no row is NULL: no row


def _query_on(sql: str, rows: tuple[WorkRow, ...]) -> list[Plain]:
    connection = _scratch_board()
    connection.execute("DELETE FROM work")
    connection.executemany("INSERT INTO work VALUES (?, ?, ?)", rows)
    return [_rows(connection, sql, reverse) for reverse in (False, True)]


def _expected_rows(rows: tuple[WorkRow, ...]) -> Plain:
    first = _first_ready(rows)
    one: Plain = [] if first is None else [[first]]
    return [one, one]


def _rows_text(rows: Plain) -> str:
    """Rows as Python shows what fetchall() returns: [(1,)], [(3, 'pending')], []."""
    assert isinstance(rows, list)
    shown_rows = []
    for row in rows:
        cells = [shown(cell) for cell in row] if isinstance(row, list) else [shown(row)]
        shown_rows.append("(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")")
    return "[" + ", ".join(shown_rows) + "]"


def _draw_work(rows: tuple[WorkRow, ...]) -> str:
    if not rows:
        return "  (an empty table: no rows)"
    return table(
        ["id", "status", "unmet"], [[str(n), status, str(unmet)] for n, status, unmet in rows]
    )


def _explain_rows(rows: tuple[WorkRow, ...], said: Plain, right: Plain) -> str:
    assert isinstance(said, list) and isinstance(right, list)
    first = _first_ready(rows)
    if said[0] != right[0]:
        truth = (
            "there is no ready task, so no row"
            if first is None
            else f"the first ready task is {first}"
        )
        return (
            f"your query returned {_rows_text(said[0])}; {truth}: ready is pending with unmet = 0,"
            " first is the lowest id, and one row only"
        )
    return (
        f"the right answer, {_rows_text(said[0])}, but only because of the order in which the"
        " rows happen to come: SQL promises no order unless you ask for one, and with SQLite's"
        f" PRAGMA reverse_unordered_selects on, your query returned {_rows_text(said[1])}."
        " Say which task is first."
    )


WORK_SEARCH: Final = Search(
    space=work_tables,
    ask=_query_on,
    read=lambda got, rows: value(got),  # type: ignore[arg-type]
    reference=_expected_rows,
    draw=_draw_work,
    explain=_explain_rows,
    space_text="work tables of up to four rows (every status and unmet count a task can have)",
    noun="table",
)


def _on_the_big_board(sql: str) -> dict[str, Plain]:
    """The query on 20,000 rows after ANALYZE: its rows either way round, and its plan."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    try:
        connection.executescript(WORK_TABLE)
        connection.execute("BEGIN")
        connection.executemany("INSERT INTO work VALUES (?, ?, ?)", _big_table())
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
        plan: list[Plain] = [str(row[3]) for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}")]
        found, backwards = (_rows(connection, sql, reverse) for reverse in (False, True))
        return {"found": found, "reversed": backwards, "plan": plan}
    finally:
        connection.close()


def _run_sql(sql: object) -> Plain:
    """The SQL on every small table, then on the big board (in a sandbox of its own)."""
    assert isinstance(sql, str)
    try:
        _query_on(sql, ())
    except sqlite3.Error as error:
        return {"refused": str(error)}
    return {"tables": WORK_SEARCH.answers(sql), "big": _on_the_big_board(sql)}


def _judge_sql(data: Plain) -> CheckResult:
    if not isinstance(data, dict):
        return unreadable(data)
    if "refused" in data:
        return CheckResult(False, f"SQLite refused your query: {data['refused']}")
    on_small_tables = WORK_SEARCH.judge(data["tables"])
    if not on_small_tables.passed:
        return on_small_tables
    big = data["big"]
    assert isinstance(big, dict) and isinstance(big["plan"], list)
    expected = _first_ready(_big_table())
    if big["found"] != [[expected]]:
        return CheckResult(
            False,
            f"right on every small table, but on a 20,000-row board the first ready task is"
            f" {expected} and your query returned {_rows_text(big['found'])}: ready is pending"
            " with unmet = 0, first is the lowest id, and one row only",
        )
    plan = "; ".join(map(str, big["plan"]))
    if big["reversed"] != big["found"]:
        return CheckResult(
            False,
            "the right id on a 20,000-row board, but only because of the order in which the"
            " index happens to hand back its rows: SQL promises no order unless you ask for"
            " one, and with SQLite's PRAGMA reverse_unordered_selects on, your query returned"
            f" {_rows_text(big['reversed'])}. Say which task is first.",
        )
    if not any(str(step).split()[1:2] == ["work"] for step in big["plan"]):
        return CheckResult(
            False,
            f"your query never reads the table work ({plan}): the id must come from the board,"
            " found by the query, not written into it",
        )
    if any(str(step).startswith("SCAN") for step in big["plan"]):
        return CheckResult(
            False,
            f"the right id, but SQLite reads the whole table to find it ({plan}): a claim would"
            " get slower as the board grows. Compare with equality on status and unmet so the"
            " index work_ready can be used.",
        )
    if "TEMP B-TREE" in plan:
        # A range on unmet (or anything but equality) leaves the matches out of id order.
        return CheckResult(
            False,
            f"the right id, but SQLite sorts every matching row to find it ({plan}): the more"
            " ready tasks, the slower the claim. With equality on both status and unmet, the"
            " index entries are already in id order and the first one is the answer.",
        )
    if "work_ready" not in plan:
        return CheckResult(
            False,
            f"the right id, but SQLite walks the table for it, not the index work_ready ({plan}):"
            " write plain equality on the indexed columns (status = 'pending' AND unmet = 0)",
        )
    return CheckResult(
        True,
        f"right on all {len(work_tables()):,} {WORK_SEARCH.space_text}, and on a"
        f" 20,000-row board the first ready task is found with one seek: {plan}",
    )


def _ask_for_sql(candidate: ClaimQuery) -> Plain:
    sql = candidate()
    return {"sql": sql} if type(sql) is str else {"not_sql": shown(sql)}


def _judge_claim_query(data: Plain) -> CheckResult:
    if not isinstance(data, dict):
        return unreadable(data)
    sql = data.get("sql")
    if not isinstance(sql, str) or not sql.lstrip().upper().startswith("SELECT"):
        said = shown(sql) if isinstance(sql, str) else data.get("not_sql")
        return CheckResult(False, f"return the text of one SELECT statement, not {said}")
    # The SQL is data now: it runs in a fresh sandbox, which the candidate's code never saw.
    return run_check(Checker(_run_sql, _judge_sql), sql, SQL_SECONDS)


CLAIM_QUERY_CHECK: Final = Checker(_ask_for_sql, _judge_claim_query)
"""The right row on every small table, then one seek on work_ready for 20,000 rows."""
