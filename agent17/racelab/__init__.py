"""The race lab: why scan-then-claim breaks, shown on a naive JSON board and on SQLite.

`json_board.py` is the earlier lesson's board (one JSON file per task, claim
in two steps), kept only to show the race; nothing else in agent17 uses it.
One module per race: `schedule.py` fixes who moves when and what a race
reports, `json_race.py` and `sqlite_race.py` run that one interleaving of two
workers on each board (`lab.py` runs both), and `process_race.py` asks the
same question of real OS processes.
"""

from agent17.racelab.json_race import run_json_race
from agent17.racelab.lab import race_both
from agent17.racelab.process_race import ProcessRaceResult, claim_until_empty, run_process_race
from agent17.racelab.schedule import DEFAULT_SCHEDULE, RaceResult, RaceStep
from agent17.racelab.sqlite_race import run_sqlite_race

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
