"""A deterministic scheduler for the race exercises: every interleaving of a few workers' calls.

Two or three workers call the candidate in one process; each statement they
send (and each lock or file step the exercise allows) is a *point* where the
scheduler may switch worker (`run`: one schedule played; `baton`: how a worker
is paused, a thread on CPython, a suspended task in the browser). The workers
use a real SQLite file with SQLite's real locking (`sqlite`), and file locks
between them are played by the scheduler (`file_locks`). `explore` plays every
schedule up to a bound, stops at the first that breaks the exercise's rule and
shrinks it; `timeline` writes it out, one lane per worker.
"""

from agent17.exercises.schedules.baton import CANNOT_SUSPEND, Abandoned, baton_maker
from agent17.exercises.schedules.explore import Broken, Exploration, Scenario, explore
from agent17.exercises.schedules.file_locks import FileLocks, played
from agent17.exercises.schedules.run import Problem, Row, Run, Worker, World, WouldWait
from agent17.exercises.schedules.sqlite import ScheduledConnection, WriteLock, open_scheduled
from agent17.exercises.schedules.timeline import timeline_text
from agent17.exercises.schedules.verdict import (
    RaceResult,
    broken_result,
    explore_race,
    explored_words,
    from_plain,
    listed,
    to_plain,
    verdict,
)

__all__ = [
    "CANNOT_SUSPEND",
    "Abandoned",
    "Broken",
    "Exploration",
    "FileLocks",
    "Problem",
    "RaceResult",
    "Row",
    "Run",
    "Scenario",
    "ScheduledConnection",
    "Worker",
    "World",
    "WouldWait",
    "WriteLock",
    "baton_maker",
    "broken_result",
    "explore",
    "explore_race",
    "explored_words",
    "from_plain",
    "listed",
    "open_scheduled",
    "played",
    "timeline_text",
    "to_plain",
    "verdict",
]
