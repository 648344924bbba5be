"""The lease timeline: one lane per teammate, one bar per claim, drawn as plain SVG text.

Each claim draws its lease window, the half-open [claimed_at, lease_expires_at),
as a pale box with a dashed edge. Inside it, the work: solid green from the
claim to the completion, with a mark at the completion; or hatched in
vermillion over the whole window when the lease ran out first (the lease is
over at its last instant), with a cross at the expiry. A claim
still open at the end of the log is drawn with a dashed outline.

The SVG is written by hand, not by graphviz, so it is byte-for-byte the same
on every machine: no fonts are measured, numbers are formatted to one decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from typing import Final, Literal

from agent17.domain import EventKind, Task, TaskEvent
from agent17.viz.dag import short_id
from agent17.wire import wire_clock

Outcome = Literal["completed", "expired", "open"]

WIDTH: Final = 720
LEFT: Final = 90
RIGHT: Final = 20
TOP: Final = 44
LANE: Final = 36
BAR: Final = 22
AXIS: Final = 34
FILLS: Final = {"completed": "#009e73", "expired": "url(#expired-hatch)", "open": "#c6e5f7"}
WINDOW_FILL: Final = "#eef6fb"
STROKES: Final = {"completed": "#006b4e", "expired": "#d55e00", "open": "#0072b2"}
_TICK_STEPS: Final = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


@dataclass(frozen=True, slots=True)
class LeaseBar:
    """One claim on the timeline: who held which task, from when to when, and how it ended."""

    owner: str
    task_id: str
    label: str
    start: datetime
    end: datetime
    outcome: Outcome
    lease_end: datetime | None = None  # None only for events that did not record their lease


@dataclass(frozen=True, slots=True)
class LeaseTimeline:
    """The bars plus their SVG drawing; Jupyter shows it through `_repr_svg_`."""

    bars: tuple[LeaseBar, ...]
    owners: tuple[str, ...]
    origin: datetime | None
    svg: str

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        # Short on purpose: Jupyter stores this next to the SVG as text/plain.
        return f"LeaseTimeline({len(self.bars)} claims; lanes: {', '.join(self.owners) or 'none'})"

    def describe(self) -> str:
        """The bars as text lines: owner, task, seconds from the first event, outcome."""
        if not self.bars or self.origin is None:
            return "(no claims)"
        width = max(len(owner) for owner in self.owners)
        lines = []
        for bar in self.bars:
            start = (bar.start - self.origin).total_seconds()
            end = (bar.end - self.origin).total_seconds()
            lease = ""
            if bar.lease_end is not None:
                lease = f" (lease until {(bar.lease_end - self.origin).total_seconds():g}s)"
            lines.append(
                f"{bar.owner.ljust(width)}  {bar.label}  {start:g}s -> {end:g}s"
                f"  {bar.outcome}{lease}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _lease_end(claim: TaskEvent, lease: timedelta | None) -> datetime | None:
    if claim.lease_expires_at_utc is not None:
        return claim.lease_expires_at_utc
    return None if lease is None else claim.at_utc + lease


def _bars(
    events: Sequence[TaskEvent], labels: dict[str, str], lease: timedelta | None
) -> list[LeaseBar]:
    ordered = sorted(events, key=lambda event: event.sequence)
    open_claims: dict[str, TaskEvent] = {}
    bars: list[LeaseBar] = []

    def close(claim: TaskEvent, end: datetime, outcome: Outcome) -> None:
        owner = claim.owner or "?"
        label = labels.get(claim.task_id, short_id(claim.task_id))
        bars.append(
            LeaseBar(
                owner, claim.task_id, label, claim.at_utc, end, outcome, _lease_end(claim, lease)
            )
        )

    for event in ordered:
        if event.kind is EventKind.CLAIMED:
            open_claims[event.task_id] = event
            continue
        claim = open_claims.pop(event.task_id, None)
        if claim is None:
            continue
        if event.kind is EventKind.COMPLETED:
            close(claim, event.at_utc, "completed")
        elif event.kind is EventKind.LEASE_EXPIRED:
            # The store notices an expiry lazily; the lease itself ended at its own instant.
            close(claim, _lease_end(claim, lease) or event.at_utc, "expired")
    last = ordered[-1].at_utc if ordered else None
    for claim in open_claims.values():
        close(claim, _lease_end(claim, lease) or last or claim.at_utc, "open")
    bars.sort(key=lambda bar: (bar.start, bar.owner, bar.label))
    return bars


def _tick_step(span_seconds: float) -> int:
    for step in _TICK_STEPS:
        if span_seconds / step <= 8:
            return step
    return _TICK_STEPS[-1] * (int(span_seconds // (_TICK_STEPS[-1] * 8)) + 1)


def svg_start(height: float, title: str, legend: str, defs: Sequence[str] = ()) -> list[str]:
    """The opening of a timeline picture WIDTH wide: white ground, bold title, legend line."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif"'
        ' font-size="12">',
        "<defs>",
        *defs,
        "</defs>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="8" y="16" font-weight="bold">{escape(title)}</text>'
        f'<text x="8" y="31" font-size="11" fill="#444444">{escape(legend)}</text>',
    ]


def _svg(bars: Sequence[LeaseBar], owners: Sequence[str], origin: datetime | None) -> str:
    height = TOP + LANE * max(len(owners), 1) + AXIS
    parts = svg_start(
        height,
        "lease timeline",
        "dashed box: the lease [claimed_at, lease_expires_at) · green: the work, | when"
        " completed · hatched: the lease ran out, x at its end",
        (
            '<pattern id="expired-hatch" patternUnits="userSpaceOnUse" width="6" height="6"'
            ' patternTransform="rotate(45)">',
            '<rect width="6" height="6" fill="#fbd5bd"/>',
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#d55e00" stroke-width="3"/>',
            "</pattern>",
        ),
    )
    if not bars or origin is None:
        parts.append(f'<text x="{LEFT}" y="{TOP + 20}">no claims yet</text>')
        parts.append("</svg>")
        return "\n".join(parts)
    span = max((max(bar.end, bar.lease_end or bar.end) - origin).total_seconds() for bar in bars)
    span = span or 1.0
    step = _tick_step(span)
    span = step * -(-span // step)  # round the axis up to a whole tick
    scale = (WIDTH - LEFT - RIGHT) / span

    def x(moment: datetime) -> float:
        return LEFT + (moment - origin).total_seconds() * scale

    axis_y = TOP + LANE * len(owners) + 6
    for index, owner in enumerate(owners):
        lane_y = TOP + LANE * index
        parts.append(
            f'<text x="8" y="{lane_y + LANE / 2 + 4:.1f}">{escape(owner)}</text>'
            f'<line x1="{LEFT}" y1="{lane_y + LANE:.1f}" x2="{WIDTH - RIGHT}"'
            f' y2="{lane_y + LANE:.1f}" stroke="#dddddd"/>'
        )
    tick = 0
    while tick <= span:
        tick_x = LEFT + tick * scale
        parts.append(
            f'<line x1="{tick_x:.1f}" y1="{TOP}" x2="{tick_x:.1f}" y2="{axis_y:.1f}"'
            ' stroke="#eeeeee"/>'
            f'<text x="{tick_x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle"'
            f' fill="#555555">+{tick}s</text>'
        )
        tick += step
    parts.append(f'<text x="8" y="{axis_y + 16:.1f}" fill="#555555">{wire_clock(origin)}</text>')
    for bar in bars:
        bar_y = TOP + LANE * owners.index(bar.owner) + (LANE - BAR) / 2
        left = x(bar.start)
        window_end = x(bar.lease_end) if bar.lease_end is not None else x(bar.end)
        work_end = x(bar.end)
        title = f"{escape(bar.owner)} held {escape(bar.label)}: {bar.outcome}" + (
            f", lease until {wire_clock(bar.lease_end)}" if bar.lease_end else ""
        )
        parts.append(f'<g class="lease {bar.outcome}"><title>{title}</title>')
        # The lease window: from the claim to the instant the lease is over.
        parts.append(
            f'<rect class="window" x="{left:.1f}" y="{bar_y:.1f}"'
            f' width="{max(window_end - left, 2.0):.1f}" height="{BAR}" rx="3"'
            f' fill="{WINDOW_FILL}" stroke="{STROKES[bar.outcome]}" stroke-width="1"'
            ' stroke-dasharray="4 3"/>'
        )
        if bar.outcome != "open":
            parts.append(
                f'<rect class="work" x="{left:.1f}" y="{bar_y + 3:.1f}"'
                f' width="{max(work_end - left, 2.0):.1f}" height="{BAR - 6}" rx="2"'
                f' fill="{FILLS[bar.outcome]}" stroke="{STROKES[bar.outcome]}" stroke-width="1"/>'
            )
        if bar.outcome == "completed":
            parts.append(
                f'<line class="mark" x1="{work_end:.1f}" y1="{bar_y - 3:.1f}" x2="{work_end:.1f}"'
                f' y2="{bar_y + BAR + 3:.1f}" stroke="{STROKES["completed"]}" stroke-width="2.5"/>'
            )
        elif bar.outcome == "expired":
            cross = 5
            parts.append(
                f'<path class="mark" d="M{work_end - cross:.1f},{bar_y - 4:.1f}'
                f' l{2 * cross},{2 * cross} m0,{-2 * cross} l{-2 * cross},{2 * cross}"'
                f' stroke="{STROKES["expired"]}" stroke-width="2.5" fill="none"/>'
            )
        text_fill = "#ffffff" if bar.outcome == "completed" else "#222222"
        parts.append(
            f'<text x="{left + 5:.1f}" y="{bar_y + BAR / 2 + 4:.1f}" fill="{text_fill}">'
            f"{escape(bar.label)}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def lease_timeline(
    events: Sequence[TaskEvent],
    tasks: Sequence[Task] = (),
    *,
    lease: timedelta | None = None,
) -> LeaseTimeline:
    """One lane per teammate, one lease window per claim, the work inside it.

    `tasks` gives the bars their subjects (else short ids). Each claimed event
    records its lease; `lease` (the store's `lease`) is only the fallback for
    events that do not.
    """
    labels = {task.id: task.subject for task in tasks}
    bars = _bars(events, labels, lease)
    owners: list[str] = []
    for bar in bars:
        if bar.owner not in owners:
            owners.append(bar.owner)
    ordered = sorted(events, key=lambda event: event.sequence)
    origin = ordered[0].at_utc if ordered else None
    return LeaseTimeline(tuple(bars), tuple(owners), origin, _svg(bars, owners, origin))
