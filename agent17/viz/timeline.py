"""The lease timeline: one lane per teammate, one bar per claim, drawn as plain SVG text.

A bar starts at the claim. It ends solid at the completion, or hatched in
vermillion at the lease expiry when the worker was too late (the half-open
lease [claimed_at, lease_expires_at) is over at its last instant). A claim
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
TOP: Final = 34
LANE: Final = 36
BAR: Final = 22
AXIS: Final = 34
FILLS: Final = {"completed": "#009e73", "expired": "url(#expired-hatch)", "open": "#c6e5f7"}
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
            lines.append(
                f"{bar.owner.ljust(width)}  {bar.label}  {start:g}s -> {end:g}s  {bar.outcome}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _bars(
    events: Sequence[TaskEvent], labels: dict[str, str], lease: timedelta | None
) -> list[LeaseBar]:
    ordered = sorted(events, key=lambda event: event.sequence)
    open_claims: dict[str, TaskEvent] = {}
    bars: list[LeaseBar] = []

    def close(claim: TaskEvent, end: datetime, outcome: Outcome) -> None:
        owner = claim.owner or "?"
        label = labels.get(claim.task_id, short_id(claim.task_id))
        bars.append(LeaseBar(owner, claim.task_id, label, claim.at_utc, end, outcome))

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
            # The store notices an expiry lazily; the lease itself ended earlier.
            end = claim.at_utc + lease if lease is not None else event.at_utc
            close(claim, end, "expired")
    last = ordered[-1].at_utc if ordered else None
    for claim in open_claims.values():
        end = claim.at_utc + lease if lease is not None else (last or claim.at_utc)
        close(claim, end, "open")
    bars.sort(key=lambda bar: (bar.start, bar.owner, bar.label))
    return bars


def _tick_step(span_seconds: float) -> int:
    for step in _TICK_STEPS:
        if span_seconds / step <= 8:
            return step
    return _TICK_STEPS[-1] * (int(span_seconds // (_TICK_STEPS[-1] * 8)) + 1)


def _svg(bars: Sequence[LeaseBar], owners: Sequence[str], origin: datetime | None) -> str:
    height = TOP + LANE * max(len(owners), 1) + AXIS
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif"'
        ' font-size="12">',
        "<defs>",
        '<pattern id="expired-hatch" patternUnits="userSpaceOnUse" width="6" height="6"'
        ' patternTransform="rotate(45)">',
        '<rect width="6" height="6" fill="#fbd5bd"/>',
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#d55e00" stroke-width="3"/>',
        "</pattern>",
        "</defs>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        '<text x="8" y="20" font-weight="bold">lease timeline'
        " (solid: completed, hatched: lease expired, dashed: still held)</text>",
    ]
    if not bars or origin is None:
        parts.append(f'<text x="{LEFT}" y="{TOP + 20}">no claims yet</text>')
        parts.append("</svg>")
        return "\n".join(parts)
    span = max((bar.end - origin).total_seconds() for bar in bars) or 1.0
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
        width = max(x(bar.end) - left, 2.0)
        dash = ' stroke-dasharray="4 3"' if bar.outcome == "open" else ""
        text_fill = "#ffffff" if bar.outcome == "completed" else "#222222"
        parts.append(
            f'<g class="lease {bar.outcome}"><title>{escape(bar.owner)} held'
            f" {escape(bar.label)}: {bar.outcome}</title>"
            f'<rect x="{left:.1f}" y="{bar_y:.1f}" width="{width:.1f}" height="{BAR}"'
            f' rx="3" fill="{FILLS[bar.outcome]}" stroke="{STROKES[bar.outcome]}"'
            f' stroke-width="1.5"{dash}/>'
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
    """One lane per teammate, one bar per claim: solid if completed, hatched if it expired.

    `tasks` gives the bars their subjects (else short ids); `lease` (the store's
    `lease`) draws an expired bar up to the instant its lease ended.
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
