"""The board as a picture: one graphviz node per task, edges from dependency to dependent.

Colours come from the Okabe-Ito palette (readable with every common form of
colour blindness), lightened so black text stays legible; the status is also
written in each label, so colour is never the only carrier of meaning.

The DOT source is deterministic: nodes are named t1, t2, ... in the order the
tasks are given (the store's creation order), attributes are written in a
fixed order, and nothing reads the clock. Tests and notebooks compare
`.source` as text.

Without Graphviz's `dot` program (a student who installed with pip alone),
a notebook cell that shows a board prints one line saying how to install it,
then the board as text, instead of a long ExecutableNotFound traceback (or
the OSError graphviz raises where no program can be started at all). In the
browser edition the picture comes from Graphviz's WebAssembly build instead
(agent17.viz.wasm_dot).

Leases: a `Task` carries no lease (the lease belongs to the claim), so the
caller passes a mapping task id -> lease_expires_at_utc. `active_leases()`
builds it from the store's event log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import graphviz

from agent17.browser import IN_BROWSER
from agent17.domain import EventKind, Task, TaskEvent, TaskStatus, completed_ids, is_ready
from agent17.viz.wasm_dot import WasmDotUnavailable, render_svg
from agent17.wire import wire_clock


@dataclass(frozen=True, slots=True)
class NodeStyle:
    """How one kind of task is drawn: fill, border colour and border width."""

    fill: str
    border: str
    penwidth: str


# "ready" is not a stored status: a pending task whose dependencies are all
# completed. It gets a thick border and its own tag, not only a colour.
STYLES: Final[Mapping[str, NodeStyle]] = {
    "pending": NodeStyle(fill="#eeeeee", border="#777777", penwidth="1"),
    "ready": NodeStyle(fill="#fbe3b0", border="#e69f00", penwidth="3"),
    "in_progress": NodeStyle(fill="#c6e5f7", border="#0072b2", penwidth="2"),
    "completed": NodeStyle(fill="#bfe6d8", border="#009e73", penwidth="1"),
}
"""Node styles by display state, in legend order."""

UNMET_EDGE_COLOUR: Final = "#444444"
MET_EDGE_COLOUR: Final = "#aaaaaa"

NO_DOT_MESSAGE: Final = (
    "Graphviz's dot program is not installed, so the board is shown as text below; install it"
    " with: sudo apt-get install graphviz (Debian/Ubuntu), brew install graphviz (macOS),"
    " conda install graphviz (conda) or see https://graphviz.org/download/, then run the cell"
    " again."
)
"""The one line a board picture shows in Jupyter when `dot` cannot be found."""


def short_id(task_id: str) -> str:
    """The last 8 hex digits of a task id: enough to tell the course's ids apart."""
    return task_id[-8:]


def display_state(task: Task, completed: frozenset[str]) -> str:
    """pending, ready, in_progress or completed: `ready` is pending with every dependency done."""
    return "ready" if is_ready(task, completed) else task.status.value


def active_leases(
    events: Sequence[TaskEvent], lease: timedelta | None = None
) -> dict[str, datetime]:
    """Task id -> lease_expires_at_utc of each claim that the event log shows still open.

    A claimed event records its lease's end (each store instance may hand out
    its own lease length); `lease` is only the fallback for events without it.
    A completion or a recorded expiry closes it. An expiry that nobody has
    noticed yet is still open here: pass `now` to `board_digraph` to see it.
    """
    leases: dict[str, datetime] = {}
    for event in sorted(events, key=lambda item: item.sequence):
        if event.kind is EventKind.CLAIMED:
            if event.lease_expires_at_utc is not None:
                leases[event.task_id] = event.lease_expires_at_utc
            elif lease is not None:
                leases[event.task_id] = event.at_utc + lease
        elif event.kind in (EventKind.COMPLETED, EventKind.LEASE_EXPIRED):
            leases.pop(event.task_id, None)
    return leases


def _node_names(tasks: Sequence[Task]) -> dict[str, str]:
    names: dict[str, str] = {}
    for position, task in enumerate(tasks, start=1):
        if task.id in names:
            raise ValueError(f"task {task.id} appears twice on the board")
        names[task.id] = f"t{position}"
    for task in tasks:
        missing = [dep for dep in task.blocked_by if dep not in names]
        if missing:
            # Drawing a dangling edge would hide a broken graph (graph_corrupted).
            raise ValueError(
                f"task {task.subject!r} is blocked by tasks not on this board: {missing}"
            )
    return names


def _lease_line(expires: datetime, now: datetime | None) -> str:
    line = f"lease until {wire_clock(expires)}"
    if now is None:
        return line
    left = (expires - now).total_seconds()
    # Half-open lease: at the expiry instant it is already over.
    return f"{line} (expired)" if left <= 0 else f"{line} ({left:g} s left)"


def _status_text(state: str, owner: str | None) -> str:
    if state == "ready":
        return "READY"
    return state if owner is None else f"{state} · {owner}"


def _label(
    task: Task, state: str, node: str, leases: Mapping[str, datetime], now: datetime | None
) -> str:
    owner = None if task.owner is None else graphviz.escape(task.owner)
    lines = [graphviz.escape(task.subject), f"{node} · {short_id(task.id)}"]
    lines.append(_status_text(state, owner))
    expires = leases.get(task.id)
    if expires is not None and task.status is TaskStatus.IN_PROGRESS:
        lines.append(_lease_line(expires, now))
    return "\\n".join(lines)


def _legend_label() -> str:
    # One column: the legend stands at the right of the board, beside it, not above it.
    rows = "".join(
        f'<tr><td bgcolor="{style.fill}" color="{style.border}" border="{style.penwidth}">'
        f"{state.upper() if state == 'ready' else state}</td></tr>"
        for state, style in STYLES.items()
    )
    edges = (
        f'<tr><td border="0"><font color="{UNMET_EDGE_COLOUR}">&#8212;&#8212;&gt;</font>'
        " still waited for</td></tr>"
        f'<tr><td border="0"><font color="{MET_EDGE_COLOUR}">- - &gt;</font>'
        " done (dashed)</td></tr>"
    )
    table = '<table border="0" cellborder="1" cellspacing="3" cellpadding="3">'
    return f"<{table}{rows}{edges}</table>>"


def _add_legend(graph: graphviz.Digraph, sinks: Sequence[str]) -> None:
    # One HTML-table node in its own cluster; invisible edges from the last tasks
    # of the graph put it in the rank after them: at the right of the board.
    with graph.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", fontsize="10", style="dashed", color="#999999")
        legend.node("legend", label=_legend_label(), shape="plaintext", style="", fontsize="10")
    for sink in sinks:
        graph.edge(sink, "legend", style="invis")


def _board_text(
    tasks: Sequence[Task],
    names: Mapping[str, str],
    leases: Mapping[str, datetime],
    now: datetime | None,
    title: str | None,
) -> str:
    # One line per node, with what its label says and where its edges come from.
    completed = completed_ids(tasks)
    lines = [] if title is None else [f"board: {title}"]
    for task in tasks:
        node = names[task.id]
        parts = [f"{node} {task.subject} ({short_id(task.id)})"]
        parts.append(_status_text(display_state(task, completed), task.owner))
        expires = leases.get(task.id)
        if expires is not None and task.status is TaskStatus.IN_PROGRESS:
            parts.append(_lease_line(expires, now))
        if task.blocked_by:
            deps = (names[dep] + (" (done)" if dep in completed else "") for dep in task.blocked_by)
            parts.append("blocked by " + ", ".join(deps))
        lines.append(" · ".join(parts))
    return "\n".join(lines or ["(no tasks)"])


class BoardGraph(graphviz.Digraph):  # type: ignore[misc]  # graphviz ships no type hints
    """A `graphviz.Digraph` that shows a line of advice and the board as text without `dot`.

    With `dot` installed it is displayed exactly like a plain Digraph: same
    source, same mime bundle, same reprs.
    """

    board_text: str = ""
    """The board as text, shown when `dot` is missing (set by `board_digraph`)."""

    def _repr_mimebundle_(
        self,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, bytes | str]:
        if IN_BROWSER:
            try:
                return {"image/svg+xml": render_svg(self.source)}
            except WasmDotUnavailable as error:
                return {"text/plain": f"{error}\n{self.board_text or self.source}"}
        try:
            bundle: dict[str, bytes | str] = super()._repr_mimebundle_(
                include=include, exclude=exclude, **kwargs
            )
        except (graphviz.ExecutableNotFound, OSError):
            # OSError: graphviz's subprocess call where no process can start at all.
            return {"text/plain": f"{NO_DOT_MESSAGE}\n{self.board_text or self.source}"}
        return bundle

    # The reprs of a plain Digraph: committed notebook outputs show the IPython one.
    def __repr__(self) -> str:
        return f"<graphviz.graphs.Digraph object at {id(self):#x}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"<graphviz.graphs.Digraph at {id(self):#x}>")


def board_digraph(
    tasks: Sequence[Task],
    *,
    leases: Mapping[str, datetime] | None = None,
    now: datetime | None = None,
    title: str | None = None,
) -> BoardGraph:
    """The task DAG: colour by status, ready tasks marked, owner and lease in each label."""
    names = _node_names(tasks)
    completed = completed_ids(tasks)
    lease_map = leases if leases is not None else {}
    graph = BoardGraph(
        name="board",
        # size: a wide board is scaled down to fit a notebook's output width.
        graph_attr={"rankdir": "LR", "fontname": "Helvetica", "nodesep": "0.3", "size": "11,8"},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica"},
        edge_attr={"arrowsize": "0.7"},
    )
    if title is not None:
        graph.attr(label=graphviz.escape(title), labelloc="t", fontsize="14")
    for task in tasks:
        node = names[task.id]
        state = display_state(task, completed)
        style = STYLES[state]
        graph.node(
            node,
            label=graphviz.nohtml(_label(task, state, node, lease_map, now)),
            fillcolor=style.fill,
            color=style.border,
            penwidth=style.penwidth,
        )
    for task in tasks:
        for dep in task.blocked_by:
            # A met dependency fades; an unmet one is what keeps the task waiting.
            met = dep in completed
            graph.edge(
                names[dep],
                names[task.id],
                color=MET_EDGE_COLOUR if met else UNMET_EDGE_COLOUR,
                style="dashed" if met else "solid",
            )
    waited_for = {dep for task in tasks for dep in task.blocked_by}
    _add_legend(graph, [names[task.id] for task in tasks if task.id not in waited_for])
    graph.board_text = _board_text(tasks, names, lease_map, now, title)
    return graph


def board_dot(
    tasks: Sequence[Task],
    *,
    leases: Mapping[str, datetime] | None = None,
    now: datetime | None = None,
    title: str | None = None,
) -> str:
    """The DOT source of `board_digraph(tasks, ...)`, for printing or saving as an asset."""
    return str(board_digraph(tasks, leases=leases, now=now, title=title).source)


def board_table(tasks: Sequence[Task], *, leases: Mapping[str, datetime] | None = None) -> str:
    """The board as a fixed-width text table: node, subject, status, owner, blocked by, id.

    With `leases` (task id -> lease_expires_at_utc, see `active_leases`) a lease
    column says until when each task in progress is held.
    """
    names = _node_names(tasks)
    subjects = {task.id: task.subject for task in tasks}
    completed = completed_ids(tasks)
    header: tuple[str, ...] = ("node", "subject", "status", "owner", "blocked by", "id")
    if leases is not None:
        header = (*header[:4], "lease until", *header[4:])
    rows = [header]
    for task in tasks:
        state = display_state(task, completed)
        status = "pending (ready)" if state == "ready" else state
        blocked = ", ".join(subjects[dep] for dep in task.blocked_by) or "-"
        row: tuple[str, ...] = (names[task.id], task.subject, status, task.owner or "-")
        if leases is not None:
            expires = leases.get(task.id) if task.status is TaskStatus.IN_PROGRESS else None
            row = (*row, "-" if expires is None else wire_clock(expires))
        rows.append((*row, blocked, short_id(task.id)))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)
