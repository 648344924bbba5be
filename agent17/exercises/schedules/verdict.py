"""What a race check says: the refusals before any schedule, and the verdict after exploring.

The exploration runs where the candidate runs (a sandbox); what crosses back to the
verdict is plain data (`to_plain`, `from_plain`), and the verdict, its words and its
picture are made from that data alone (`broken_result`).
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from html import escape
from typing import Any, Final

from agent17.exercises._bounded import CheckResult
from agent17.exercises.schedules.baton import baton_maker, candidate_lines_traced
from agent17.exercises.schedules.explore import Broken, Exploration, Scenario, explore
from agent17.exercises.schedules.run import Row
from agent17.exercises.schedules.timeline import cell, short_names, timeline_text
from agent17.viz.schedule import Kind, SchedulePicture, ScheduleRow, schedule_picture

PREEMPTIONS: Final = 2
SAMPLES: Final = 60
SHOWN_ROWS: Final = 48  # a longer timeline (a loop that never ended) is cut in its middle
SHOWN_AT_THE_END: Final = 12

_THREAD_LOCKS: Final = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
)


def uses_a_thread_lock(candidate: Any) -> bool:
    """Whether the candidate reaches a threading lock: a global it names, a closure, a default."""
    code = getattr(candidate, "__code__", None)
    names = code.co_names if code is not None else ()
    scope = getattr(candidate, "__globals__", {})
    seen = [scope[name] for name in names if name in scope]
    seen += [cell.cell_contents for cell in getattr(candidate, "__closure__", None) or ()]
    seen += list(getattr(candidate, "__defaults__", None) or ())
    return any(isinstance(value, _THREAD_LOCKS) for value in seen)


def listed(names: Sequence[str]) -> str:
    """Names as a sentence lists them: "alice and bob", "alice, bob and carol"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def thread_lock_refusal(who: str) -> str:
    """Why a threading lock cannot keep `who` (the workers, the teammates) apart."""
    return (
        f"Your code holds a threading lock: it keeps out the other threads of one process, but"
        f" {who} are processes, each with its own copy of the lock, so it keeps no other one"
        " out. Only something all processes share can."
    )


def explore_race(
    candidate: Any,
    exhaustive: Sequence[Scenario],
    drawn: Sequence[Scenario],
    *,
    bound: str,
    seed: str,
    who: str,
) -> Exploration | str:
    """Explore the race scenarios with `candidate`, or say in one line why it cannot be here.

    A candidate holding a threading lock is refused before any schedule: the
    workers stand for processes, which such a lock cannot keep apart (and in the
    browser, a worker waiting on it would stop the tab).
    """
    if uses_a_thread_lock(candidate):
        return thread_lock_refusal(who)
    maker = baton_maker()
    if isinstance(maker, str):
        return maker
    with candidate_lines_traced():
        return explore(
            exhaustive,
            drawn,
            bound=bound,
            preemptions=PREEMPTIONS,
            samples=SAMPLES,
            seed=seed,
            new_baton=maker,
        )


def to_plain(exploration: Exploration | str) -> dict[str, Any]:
    """An exploration (or why there was none) as plain JSON values, to cross to the verdict."""
    if isinstance(exploration, str):
        return {"refused": exploration}
    broken = exploration.broken
    return {
        "explored": exploration.explored,
        "bound": exploration.bound,
        "broken": None
        if broken is None
        else {
            "scenario": broken.scenario,
            "workers": list(broken.workers),
            "choices": list(broken.choices),
            "preemptions": broken.preemptions,
            "rows": [list(astuple(row)) for row in broken.rows],
            "kind": broken.kind,
            "words": broken.words,
        },
    }


def from_plain(data: Any) -> Exploration | str:
    """`to_plain`'s values read back (a KeyError or TypeError if they are not its shape)."""
    if "refused" in data:
        return str(data["refused"])
    broken = data["broken"]
    return Exploration(
        int(data["explored"]),
        str(data["bound"]),
        None
        if broken is None
        else Broken(
            str(broken["scenario"]),
            tuple(str(worker) for worker in broken["workers"]),
            tuple(int(choice) for choice in broken["choices"]),
            int(broken["preemptions"]),
            tuple(
                Row(int(step), str(worker), str(action), str(arguments), str(result))
                for step, worker, action, arguments, result in broken["rows"]
            ),
            str(broken["kind"]),
            str(broken["words"]),
        ),
    )


# repr=False: a __repr__ of its own would come before CheckResult's _repr_pretty_ in IPython.
@dataclass(frozen=True, slots=True, repr=False)
class RaceResult(CheckResult):
    """A race check's verdict; when it failed, with the picture of the schedule that broke it.

    Jupyter shows the words and the picture together (`_repr_html_`); printed, it is the
    words, the timeline written out as text among them.
    """

    picture: SchedulePicture | None = None

    def _repr_html_(self) -> str | None:
        if self.picture is None:
            return None
        drawing = base64.b64encode(self.picture.svg.encode("utf-8")).decode("ascii")
        return (
            f'<pre style="white-space: pre-wrap">{escape(str(self))}</pre>'
            f'<img alt="the schedule that broke the rule"'
            f' src="data:image/svg+xml;base64,{drawing}"/>'
        )


def _kind(row: Row) -> Kind:
    if row.action == "returns":
        return "returns"
    if row.action == "raises" or _ERROR.match(row.result):
        return "error"
    return "waits" if row.result.startswith("waits") else "statement"


_ERROR: Final = re.compile(r"\w+(Error|Exception)\b|refused")


def shown(rows: Sequence[Row]) -> tuple[Sequence[Row], str]:
    """The rows worth showing (a schedule that never ended is cut in its middle), and a line
    saying what was left out ("" if nothing was)."""
    if len(rows) <= SHOWN_ROWS:
        return rows, ""
    left_out = len(rows) - SHOWN_ROWS
    return (
        [*rows[: SHOWN_ROWS - SHOWN_AT_THE_END], *rows[-SHOWN_AT_THE_END:]],
        f"\n({left_out} rows in the middle left out: the same steps again and again)",
    )


def picture_of(broken: Broken) -> SchedulePicture:
    """The broken schedule drawn (agent17.viz), its rows as the text timeline writes them."""
    rows, _ = shown(broken.rows)
    names = short_names(rows)
    return schedule_picture(
        broken.workers,
        [ScheduleRow(row.step, row.worker, cell(row, names), _kind(row)) for row in rows],
        title=f"the schedule that broke the rule ({broken.scenario})",
        broke=broken.words.split(": ", 1)[0],
    )


def explored_words(exploration: Exploration) -> str:
    """How many schedules were played, and within which bound."""
    count = exploration.explored
    return f"{count} schedule{'' if count == 1 else 's'} ({exploration.bound})"


def broken_result(exploration: Exploration) -> RaceResult:
    """The failed verdict: the broken rule in words, then the schedule, as text and drawn."""
    broken = exploration.broken
    assert broken is not None
    count, switches = exploration.explored, broken.preemptions
    rows, left_out = shown(broken.rows)
    if not broken.rows:
        return RaceResult(False, f"{broken.words} (at schedule {count}, before any statement ran)")
    return RaceResult(
        False,
        f"{broken.words}\n"
        f"The schedule that shows it ({broken.scenario}, {switches} preemption"
        f"{'' if switches == 1 else 's'}), found at schedule {count} (every run finds this"
        " same one):\n"
        f"{timeline_text(broken.workers, rows)}{left_out}",
        picture_of(broken),
    )


def verdict(data: Any, held: str) -> CheckResult:
    """The verdict on `to_plain`'s data: NOT YET with the broken schedule, or PASSED saying
    how many schedules held, within which bound, and what held in them (`held`)."""
    exploration = from_plain(data)
    if isinstance(exploration, str):
        return CheckResult(False, exploration)
    if exploration.broken is not None:
        return broken_result(exploration)
    count = exploration.explored
    return CheckResult(True, f"every one of {count} schedules held ({exploration.bound}): {held}")
