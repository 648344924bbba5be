"""Replaying the event log: the board as it was after any number of events.

The store appends one event per transition (created, claimed, completed,
lease_expired) in the same transaction as the transition itself, so the log
is a complete history and the board at step n is a pure function of its
first n events. The slider scrubs through those boards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol

import ipywidgets as widgets

from agent17.domain import EventKind, Task, TaskEvent, TaskStatus
from agent17.viz.dag import active_leases, board_digraph
from agent17.wire import wire_clock


class EventSource(Protocol):
    """What the slider needs of a store: its event log, its tasks and its lease length."""

    lease: timedelta

    def events(self, after_sequence: int = 0) -> list[TaskEvent]: ...

    def list_tasks(self) -> list[Task]: ...


def board_at(events: Sequence[TaskEvent], tasks: Sequence[Task], step: int) -> list[Task]:
    """The board after the first `step` events: later tasks absent, status and owner replayed.

    Subjects, descriptions and blocked_by come from `tasks` (they never change);
    status and owner come only from the events.
    """
    ordered = sorted(events, key=lambda event: event.sequence)
    if not 0 <= step <= len(ordered):
        raise ValueError(f"step must be between 0 and {len(ordered)}: {step}")
    final = {task.id: task for task in tasks}
    board: dict[str, Task] = {}
    for event in ordered[:step]:
        if event.kind is EventKind.CREATED:
            if event.task_id not in final:
                raise ValueError(f"event #{event.sequence} creates a task not in `tasks`")
            board[event.task_id] = replace(
                final[event.task_id], status=TaskStatus.PENDING, owner=None
            )
            continue
        if event.task_id not in board:
            raise ValueError(f"event #{event.sequence} touches a task created later or never")
        task = board[event.task_id]
        if event.kind is EventKind.CLAIMED:
            board[event.task_id] = replace(task, status=TaskStatus.IN_PROGRESS, owner=event.owner)
        elif event.kind is EventKind.COMPLETED:
            board[event.task_id] = replace(task, status=TaskStatus.COMPLETED, owner=event.owner)
        else:
            board[event.task_id] = replace(task, status=TaskStatus.PENDING, owner=None)
    return list(board.values())


def describe_event(event: TaskEvent, tasks: Sequence[Task], *, timed: bool = True) -> str:
    """One event as a sentence: '#7 09:00:00Z alice claimed A (lease until 09:05:00Z)'.

    `timed=False` leaves the time out (for a timeline that prints it already).
    """
    subjects = {task.id: task.subject for task in tasks}
    subject = subjects.get(event.task_id, event.task_id)
    prefix = f"#{event.sequence} {wire_clock(event.at_utc)}" if timed else f"#{event.sequence}"
    if event.kind is EventKind.CREATED:
        return f"{prefix} created {subject}"
    if event.kind is EventKind.CLAIMED:
        lease = event.lease_expires_at_utc
        until = "" if lease is None else f" (lease until {wire_clock(lease)})"
        return f"{prefix} {event.owner} claimed {subject}{until}"
    if event.kind is EventKind.COMPLETED:
        return f"{prefix} {event.owner} completed {subject}"
    return f"{prefix} {event.owner}'s lease on {subject} expired; {subject} is pending again"


def replay_slider(
    store_or_events: EventSource | Sequence[TaskEvent],
    tasks: Sequence[Task] | None = None,
    *,
    lease: timedelta | None = None,
    step: int | None = None,
) -> Any:
    """An ipywidgets VBox: an IntSlider over the event log, a caption and the DAG at that step.

    Pass a store (its events, tasks and lease are read once, now) or a list of
    events with the final `tasks`. Children: (slider, caption Label, Output).
    The Output is filled kernel-side, so its content can be inspected in tests.
    """
    if isinstance(store_or_events, Sequence):
        events = sorted(store_or_events, key=lambda event: event.sequence)
        if tasks is None:
            raise ValueError("pass the final tasks along with a list of events")
        final = list(tasks)
    else:
        events = store_or_events.events()
        final = list(tasks) if tasks is not None else store_or_events.list_tasks()
        lease = lease if lease is not None else store_or_events.lease
    start = len(events) if step is None else step
    if not 0 <= start <= len(events):
        raise ValueError(f"step must be between 0 and {len(events)}: {start}")

    slider = widgets.IntSlider(
        value=start, min=0, max=len(events), step=1, description="step", continuous_update=False
    )
    caption = widgets.Label(value="")
    picture = widgets.Output()

    def show(step_now: int) -> None:
        caption.value = (
            describe_event(events[step_now - 1], final) if step_now else "#0 the empty board"
        )
        board = board_at(events, final, step_now)
        leases = active_leases(events[:step_now], lease) if lease is not None else None
        # Filled from the kernel, never `with picture:`: strict nbval would see
        # the captured picture as a cell output.
        picture.outputs = ()
        picture.append_display_data(board_digraph(board, leases=leases))

    slider.observe(lambda change: show(int(change["new"])), names="value")
    show(start)
    return widgets.VBox([slider, caption, picture])
