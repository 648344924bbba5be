"""race_claim_one: a student's own claim raced from several OS processes on one file; what it
prints for a right answer is the same on every run, and a double take is shown loudly."""

from __future__ import annotations

import pytest
from claim_one_answers import gives_up_after_losing, one_statement, select_then_update

from agent17.exercises import EXERCISES, race_claim_one

pytestmark = pytest.mark.processes


def test_a_right_claim_gives_each_job_to_one_worker_and_prints_the_same_every_run() -> None:
    shown = set()
    for candidate in (EXERCISES["claim_one"].solution, one_statement, one_statement):
        race = race_claim_one(candidate, workers=4, jobs=8)
        assert race.ok, race.problems
        assert race.double_taken == ()
        assert sorted(race.told) == list(range(1, 9))
        assert all(len(owners) == 1 for owners in race.told.values())
        assert all(race.table[job] == ("taken", race.told[job][0]) for job in race.told)
        assert sorted(job for jobs in race.by_worker().values() for job in jobs) == sorted(
            race.told
        )
        shown.add(str(race))
    assert len(shown) == 1
    text = shown.pop()
    assert text.startswith("4 worker processes started together on one file, 8 jobs:")
    assert text.endswith(
        "OK: each of the 8 jobs went to exactly one of 4 workers, and the table agrees."
    )
    for name in ("bob", "carol", "dave", "erin"):
        assert name not in text


def test_a_look_then_take_claim_is_shown_as_a_double_take() -> None:
    race = race_claim_one(select_then_update, workers=4, jobs=6)
    assert not race.ok
    assert 1 in race.double_taken
    assert race.told[1] == ("bob", "carol", "dave", "erin")
    assert "DOUBLE TAKE: more than one worker was told it got job(s) 1" in str(race)
    assert "FAILED" not in str(race)  # the double take says it; the words are in `problems`
    assert race.problems[0].startswith("bob, carol, dave and erin all got job 1")


def test_giving_up_while_jobs_are_pending_fails_the_race() -> None:
    race = race_claim_one(gives_up_after_losing, workers=5, jobs=10)
    assert not race.ok and race.double_taken == ()
    assert "returned None while jobs were still pending" in str(race)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({"workers": 1}, "workers must be 2 to 6"), ({"jobs": 0}, "jobs must be 1 to 200")],
)
def test_out_of_range_sizes_are_refused(arguments: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        race_claim_one(one_statement, **arguments)
