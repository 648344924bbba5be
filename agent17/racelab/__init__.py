"""The race lab: why scan-then-claim breaks, shown on a naive JSON board and on SQLite.

`json_board.py` is the earlier lesson's board (one JSON file per task, claim
in two steps), kept only to show the race; nothing else in agent17 uses it.
`lab.py` runs one fixed interleaving of two workers on both boards, and the
same question for real OS processes.
"""

from agent17.racelab.lab import (
    DEFAULT_SCHEDULE,
    ProcessRaceResult,
    RaceResult,
    RaceStep,
    claim_until_empty,
    race_both,
    run_json_race,
    run_process_race,
    run_sqlite_race,
)

__all__ = [
    "DEFAULT_SCHEDULE",
    "ProcessRaceResult",
    "RaceResult",
    "RaceStep",
    "claim_until_empty",
    "race_both",
    "run_json_race",
    "run_process_race",
    "run_sqlite_race",
]
