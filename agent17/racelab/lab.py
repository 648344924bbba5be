"""The race lab: the same interleaving of two workers on a naive JSON board and on SQLite.

Both boards start the same way: A and B completed, C blocked by both and now
ready. Two workers each take two steps, `scan` then `claim`, and a schedule
fixes who moves when (by default: alice scans, bob scans, alice claims, bob
claims). Nothing depends on timing:

- On the JSON board each worker is a generator paused between its steps, so
  the schedule is followed exactly. Both scans see C free, both claims write,
  and both workers believe they own C.
- On SQLite a worker's `scan` opens its claim transaction (BEGIN IMMEDIATE
  takes the write lock; the scan runs inside it) and pauses there, held by an
  injected clock that waits for the worker's `claim` step. A second worker's
  scan cannot start while the first holds the lock: the lab proves that with a
  probe that fails with "database is locked" instead of waiting. The second
  worker then scans after the first committed, finds C taken, and gets None.

`race_both` runs the one schedule on both; `run_process_race` (process_race.py) is
the same question asked of real OS processes.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent17.racelab.json_race import run_json_race
from agent17.racelab.schedule import DEFAULT_SCHEDULE, RaceResult, Step
from agent17.racelab.sqlite_race import run_sqlite_race


def race_both(schedule: Sequence[Step] = DEFAULT_SCHEDULE) -> tuple[RaceResult, RaceResult]:
    """The same schedule on both boards: (JSON result, SQLite result)."""
    return run_json_race(schedule), run_sqlite_race(schedule)


__all__ = ["race_both", "run_json_race", "run_sqlite_race"]
