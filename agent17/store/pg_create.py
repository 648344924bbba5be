"""How PostgresTaskStore creates tasks: a whole batch in three statements.

One lookup of every named dependency, one INSERT of the batch (in draft order,
so sequences and `created` events follow it), one INSERT of its edges, whatever
the batch's size: an array parameter each, never a statement per task. The
refusals, and which one comes first, are the SQLite store's (draft by draft).
"""

from __future__ import annotations

from datetime import datetime

from agent17.domain import IdFactory, Task, TaskError, TaskStatus, is_canonical_uuid
from agent17.store.board import dependencies_not_found, invalid
from agent17.store.pg_statements import INSERT_EDGES_SQL, INSERT_SQL
from agent17.store.pg_transaction import ConstraintViolation, PgTransaction


def insert_drafts(
    tx: PgTransaction,
    now: datetime,
    drafts: list[tuple[str, str, tuple[str, ...]]],
    new_task_id: IdFactory,
) -> list[Task]:
    """Insert checked drafts as pending tasks, in draft order, with their edges."""
    named = sorted({dep for _, _, deps in drafts for dep in deps})
    known: dict[str, tuple[int, str]] = {}
    if named:
        rows = tx.execute(
            "SELECT id, sequence, status FROM tasks WHERE id = ANY(%s::text[])", (named,)
        ).fetchall()
        known = {task_id: (int(sequence), status) for task_id, sequence, status in rows}
    batch: dict[str, int] = {}  # id -> position in the batch
    unmet: list[int] = []
    try:
        for _, _, dependencies in drafts:
            task_id = new_task_id()
            if not is_canonical_uuid(task_id):
                raise ValueError(f"new_task_id returned a non-canonical UUID: {task_id!r}")
            if task_id in dependencies:
                raise invalid(f"task {task_id} cannot depend on itself")
            missing = [dep for dep in dependencies if dep not in known and dep not in batch]
            if missing:
                raise dependencies_not_found(missing)
            if task_id in batch:
                raise invalid(f"a task with id {task_id} already exists")
            batch[task_id] = len(batch)
            unmet.append(
                sum(
                    1
                    for dep in dependencies
                    if dep in batch or known[dep][1] != TaskStatus.COMPLETED
                )
            )
    except TaskError:
        # The SQLite store inserts draft by draft: an id drawn earlier in this batch
        # that already exists would have been refused first.
        _refuse_existing_ids(tx, list(batch))
        raise
    ids = list(batch)
    try:
        inserted = tx.execute(
            INSERT_SQL,
            {
                "now": now,
                "ids": ids,
                "subjects": [subject for subject, _, _ in drafts],
                "descriptions": [description for _, description, _ in drafts],
                "unmet": unmet,
            },
        ).fetchall()
    except ConstraintViolation as violation:
        if violation.constraint != "tasks_id_key":
            raise
        raise invalid(f"a task id the generator returned already exists: {violation}") from None
    sequences = {task_id: int(sequence) for sequence, task_id in inserted}
    if [sequences[task_id] for task_id in ids] != sorted(sequences.values()):
        raise AssertionError("the batch was not inserted in draft order")
    edges: tuple[list[int], list[int], list[int]] = ([], [], [])
    for task_id, (_, _, dependencies) in zip(ids, drafts, strict=True):
        for position, dep in enumerate(dependencies):
            target = sequences[dep] if dep in sequences else known[dep][0]
            edges[0].append(sequences[task_id])
            edges[1].append(target)
            edges[2].append(position)
    if edges[0]:
        tx.execute(INSERT_EDGES_SQL, edges)
    return [
        Task(task_id, subject, description, TaskStatus.PENDING, None, dependencies)
        for task_id, (subject, description, dependencies) in zip(ids, drafts, strict=True)
    ]


def _refuse_existing_ids(tx: PgTransaction, ids: list[str]) -> None:
    if not ids:
        return
    row = tx.execute(
        "SELECT id FROM tasks WHERE id = ANY(%s::text[]) ORDER BY sequence LIMIT 1", (ids,)
    ).fetchone()
    if row is not None:
        raise invalid(f"a task with id {row[0]} already exists")
