"""A schedule as text: one lane per worker, one row per statement (or step) with what it returned.

     alice                                bob
  1  SELECT → (1,)
  2                                       SELECT → (1,)
  3  UPDATE ('alice', 1) → 1 row changed
     returns 1
  4                                       UPDATE ('bob', 1) → 1 row changed
                                          returns 1
  SELECT: SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1
  UPDATE: UPDATE jobs SET status = 'taken', owner = ? WHERE id = ?

A long statement is named by its first word in the lanes (SELECT, SELECT 2,
...) and written out once below them, so that the lanes stay narrow.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Final

from agent17.exercises.schedules.run import Row

SPELLED_OUT_UP_TO: Final = 24  # longer actions get a short name and a legend line
LANE_WIDTH: Final = 40
LINE_WIDTH: Final = 100  # three lanes share it
GAP: Final = 2


def short_names(rows: Sequence[Row]) -> dict[str, str]:
    """Each long action's short name (its first word, numbered when several share it)."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for row in rows:
        if len(row.action) <= SPELLED_OUT_UP_TO or row.action in names:
            continue
        word = row.action.split(" ", 1)[0].upper()
        counts[word] = counts.get(word, 0) + 1
        names[row.action] = word if counts[word] == 1 else f"{word} {counts[word]}"
    return names


def cell(row: Row, names: dict[str, str]) -> str:
    """What a row says in its lane."""
    if row.action in ("returns", "raises"):
        return f"{row.action} {row.result}"
    text = names.get(row.action, row.action)
    if row.arguments:
        text += f" {row.arguments}"
    return f"{text} → {row.result}" if row.result else text


def timeline_text(workers: Sequence[str], rows: Sequence[Row]) -> str:
    """The rows as lanes (see the module docstring)."""
    names = short_names(rows)
    cells = [cell(row, names) for row in rows]
    number_width = len(str(max([row.step for row in rows], default=0)))
    margin = " " * (number_width + GAP)
    room = min(LANE_WIDTH, (LINE_WIDTH - len(margin)) // len(workers) - GAP)
    width = min(max([len(text) for text in cells] + [len(w) for w in workers]), room)
    lane = {name: index for index, name in enumerate(workers)}

    def line(number: str, index: int, text: str) -> str:
        indent = (width + GAP) * index
        return f"{number:>{number_width}}{' ' * GAP}{' ' * indent}{text}".rstrip()

    lines = [margin + "".join(name.ljust(width + GAP) for name in workers).rstrip()]
    shown_step = None
    for row, text in zip(rows, cells, strict=True):
        number = "" if row.step == shown_step else str(row.step)
        shown_step = row.step
        for piece in textwrap.wrap(text, width) or [""]:
            lines.append(line(number, lane[row.worker], piece))
            number = ""
    lines += [f"{margin}{short}: {action}" for action, short in names.items()]
    return "\n".join(lines)
