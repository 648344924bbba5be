"""Replaying the event log: the board as it was after any number of events.

The store appends one event per transition (created, claimed, completed,
lease_expired) in the same transaction as the transition itself, so the log
is a complete history and the board at step n is a pure function of its
first n events. The slider scrubs through those boards.

A widget is drawn only by a live kernel: GitHub and nbviewer have no widget
state and would print `VBox(children=...)`. So every panel here is displayed
with a static picture beside the widget (`static_bundle`): JupyterLab shows the
widget, a page without widgets shows the board as it was when the cell ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol

import ipywidgets as widgets

from agent17.domain import EventKind, Task, TaskEvent, TaskStatus
from agent17.viz.dag import BoardGraph, active_leases, board_digraph
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


def static_bundle(widget_bundle: dict[str, Any], graph: BoardGraph, text: str) -> dict[str, Any]:
    """A widget's mime bundle plus the board as SVG and a line of text, for pages without widgets.

    JupyterLab prefers the widget view; GitHub and nbviewer fall back to the
    SVG (or, without Graphviz's dot, to `text`, which then carries the board).
    """
    bundle = dict(widget_bundle)
    picture = graph._repr_mimebundle_()
    if "image/svg+xml" in picture:
        bundle["image/svg+xml"] = picture["image/svg+xml"]
        bundle["text/plain"] = text
    else:
        bundle["text/plain"] = f"{text}\n{graph.board_text}"
    return bundle


class ReplaySlider(widgets.VBox):  # type: ignore[misc]  # ipywidgets ships no type hints
    """The replay panel: children (slider, caption Label, Output with the DAG at that step).

    Displayed, it also leaves the board at the slider's current step as a
    static SVG (see `static_bundle`).
    """

    graph: BoardGraph
    """The board at the slider's current step, as drawn in the panel."""

    def __init__(
        self,
        events: Sequence[TaskEvent],
        tasks: Sequence[Task],
        lease: timedelta | None,
        start: int,
    ) -> None:
        # Full width: on a projector a short slider cannot be hit step by step.
        self.slider = widgets.IntSlider(
            value=start,
            min=0,
            max=len(events),
            step=1,
            description="step",
            continuous_update=False,
            layout=widgets.Layout(width="100%"),
        )
        self.caption = widgets.Label(
            value="", layout=widgets.Layout(width="100%"), style={"font_size": "15px"}
        )
        self.picture = widgets.Output(layout=widgets.Layout(width="100%"))
        super().__init__(
            [self.slider, self.caption, self.picture], layout=widgets.Layout(width="100%")
        )
        self._events = list(events)
        self._tasks = list(tasks)
        self._lease = lease
        self._show(start)
        self.slider.observe(lambda change: self._show(int(change["new"])), names="value")

    def _draw(self, step: int) -> BoardGraph:
        self.caption.value = (
            describe_event(self._events[step - 1], self._tasks) if step else "#0 the empty board"
        )
        board = board_at(self._events, self._tasks, step)
        leases = None if self._lease is None else active_leases(self._events[:step], self._lease)
        return board_digraph(board, leases=leases, title=f"replay, step {self.caption.value}")

    def _show(self, step: int) -> None:
        self.graph = self._draw(step)
        # Filled from the kernel, never `with picture:`: strict nbval would see
        # the captured picture as a cell output.
        self.picture.outputs = ()
        self.picture.append_display_data(self.graph)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        text = f"replay of {len(self._events)} events at step {self.caption.value}"
        return static_bundle(super()._repr_mimebundle_(**kwargs), self.graph, text)


def replay_slider(
    store_or_events: EventSource | Sequence[TaskEvent],
    tasks: Sequence[Task] | None = None,
    *,
    lease: timedelta | None = None,
    step: int | None = None,
) -> ReplaySlider:
    """A slider over the event log, a caption and the DAG at that step; it starts at `step`.

    Pass a store (its events, tasks and lease are read once, now) or a list of
    events with the final `tasks`. `step` is where the slider starts (the
    moment the text talks about); default: after the last event. Children:
    (slider, caption Label, Output). The Output is filled kernel-side, so its
    content can be inspected in tests.
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
    return ReplaySlider(events, final, lease, start)
