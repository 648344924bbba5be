"""A schedule as a picture: one lane per worker, one row per statement, time running down.

The race exercises' checkers find the schedule that breaks a rule (which worker
ran which statement, in which order, and what each returned); this draws it
the way the lease timeline is drawn (`timeline.py`: plain SVG text, the same
on every machine, no fonts measured). Each row is a box in its worker's lane,
numbered by its step; what came back is written in the box (a long text is
cut, and the whole of it is the box's tooltip). Blue: a statement or a file
step; amber: a step that had to wait for a lock; green: a call's return;
vermillion: an error. The row where the rule broke is outlined in vermillion,
and the broken rule is written under the lanes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final, Literal

from agent17.viz.timeline import WIDTH, svg_start

Kind = Literal["statement", "waits", "returns", "error"]

LEFT: Final = 34
RIGHT: Final = 12
TOP: Final = 44
HEADER: Final = 22
ROW: Final = 22
BOX: Final = 18
CHAR_WIDTH: Final = 6.6  # a generous average for 11px Helvetica: cut text never overflows
NOTE_LINE: Final = 15
FILLS: Final = {
    "statement": "#eef6fb",
    "waits": "#fff3d6",
    "returns": "#009e73",
    "error": "#fbd5bd",
}
STROKES: Final = {
    "statement": "#0072b2",
    "waits": "#e69f00",
    "returns": "#006b4e",
    "error": "#d55e00",
}
BROKE: Final = "#d55e00"


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One row of the picture: its step, its worker's lane, what it says, and its kind."""

    step: int
    lane: str
    text: str
    kind: Kind


@dataclass(frozen=True, slots=True)
class SchedulePicture:
    """The rows plus their SVG drawing; Jupyter shows it through `_repr_svg_`."""

    lanes: tuple[str, ...]
    rows: tuple[ScheduleRow, ...]
    svg: str

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        # Short on purpose: Jupyter stores this next to the SVG as text/plain.
        return f"SchedulePicture({len(self.rows)} rows; lanes: {', '.join(self.lanes)})"


def _cut(text: str, width: float) -> str:
    room = max(int(width / CHAR_WIDTH), 4)
    return text if len(text) <= room else text[: room - 1] + "…"


def schedule_picture(
    lanes: Sequence[str], rows: Sequence[ScheduleRow], *, title: str, broke: str
) -> SchedulePicture:
    """Draw `rows` in `lanes`, the last row marked as where the rule `broke` (in words)."""
    column = (WIDTH - LEFT - RIGHT) / max(len(lanes), 1)
    note = textwrap.wrap(broke, int((WIDTH - 16) / CHAR_WIDTH))
    body = TOP + HEADER + ROW * len(rows)
    height = body + 10 + NOTE_LINE * len(note)
    parts = svg_start(
        height,
        title,
        "a lane per worker, a row per step, time running down · blue: a statement or file"
        " step · amber: waits · green: returns · vermillion: an error",
    )
    for index, lane in enumerate(lanes):
        x = LEFT + column * index
        parts.append(
            f'<text x="{x + 4:.1f}" y="{TOP + 14}" font-weight="bold">{escape(lane)}</text>'
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{body}" stroke="#dddddd"/>'
        )
    shown_step = None
    for number, row in enumerate(rows):
        y = TOP + HEADER + ROW * number
        x = LEFT + column * lanes.index(row.lane) + 3
        if row.step != shown_step:
            parts.append(
                f'<text x="{LEFT - 6}" y="{y + 13}" text-anchor="end" fill="#555555">'
                f"{row.step}</text>"
            )
            shown_step = row.step
        last = number == len(rows) - 1
        stroke = BROKE if last else STROKES[row.kind]
        text_fill = "#ffffff" if row.kind == "returns" else "#222222"
        parts.append(
            f'<g class="{row.kind}"><title>{escape(row.lane)}: {escape(row.text)}</title>'
            f'<rect x="{x:.1f}" y="{y + 1}" width="{column - 6:.1f}" height="{BOX}" rx="3"'
            f' fill="{FILLS[row.kind]}" stroke="{stroke}"'
            f' stroke-width="{2.5 if last else 1}"/>'
            f'<text x="{x + 5:.1f}" y="{y + 14}" font-size="11" fill="{text_fill}">'
            f"{escape(_cut(row.text, column - 14))}</text></g>"
        )
    for index, line in enumerate(note):
        parts.append(
            f'<text x="8" y="{body + 6 + NOTE_LINE * (index + 1)}" fill="{BROKE}">'
            f"{escape(line)}</text>"
        )
    parts.append("</svg>")
    return SchedulePicture(tuple(lanes), tuple(rows), "\n".join(parts))
