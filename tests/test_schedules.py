"""The scheduler the race exercises are checked with: complete up to its bound, faithful to
SQLite's locking (busy handler and all), deterministic, and honest about what it cannot see."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent17.exercises import EXERCISES
from agent17.exercises._job_races import jobs_template
from agent17.exercises.claims import explore_claim_one
from agent17.exercises.schedules import (
    FileLocks,
    Problem,
    RaceResult,
    Run,
    ScheduledConnection,
    Worker,
    WriteLock,
    broken_result,
    from_plain,
    open_scheduled,
    played,
    timeline_text,
    to_plain,
)
from agent17.exercises.schedules import baton as baton_module
from agent17.exercises.schedules.baton import ThreadBaton
from agent17.exercises.schedules.explore import Played, bounded, player
from agent17.exercises.schedules.run import Decision, Row

# -- a world of plain steps: the exploration's own arithmetic ------------------------------


@dataclass
class Steps:
    """Workers that each take `counts[i]` steps touching nothing: every order is possible."""

    counts: tuple[int, ...]
    name: str = "steps"

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(f"w{index}" for index in range(len(self.counts)))

    def world(self, run: Run) -> StepsWorld:
        return StepsWorld(self, run)


@dataclass
class StepsWorld:
    scenario: Steps
    run: Run

    def script(self, worker: Worker) -> None:
        for number in range(self.scenario.counts[worker.index]):
            self.run.attempt(f"step {number}", "", lambda: None)

    def after_step(self) -> Problem | None:
        return None

    def at_end(self) -> Problem | None:
        return None

    def close(self) -> None:
        pass


def preemptions(order: Sequence[int], counts: Sequence[int]) -> int:
    """A switch away from a worker that still had steps left."""
    left = list(counts)
    switches = 0
    for index, worker in enumerate(order):
        if index and worker != order[index - 1] and left[order[index - 1]] > 0:
            switches += 1
        left[worker] -= 1
    return switches


@pytest.mark.parametrize(
    ("counts", "bound"), [((3, 3), 0), ((3, 3), 1), ((4, 3), 2), ((2, 2, 2), 2)]
)
def test_the_bounded_search_plays_every_schedule_within_its_bound_once(
    counts: tuple[int, ...], bound: int
) -> None:
    orders = {
        order
        for order in itertools.permutations(
            [worker for worker, count in enumerate(counts) for _ in range(count)]
        )
        if preemptions(order, counts) <= bound
    }
    played: list[tuple[int, ...]] = []
    play = player(ThreadBaton)

    def recording(scenario: Any, choose: Any) -> Played:
        outcome = play(scenario, choose)
        played.append(outcome.choices)
        return outcome

    count, broken = bounded(Steps(counts), recording, bound)
    assert broken is None
    assert count == len(played) == len(orders)
    assert set(played) == orders


# -- SQLite's locking, played -------------------------------------------------------------


@dataclass
class Scripted:
    """Workers each running a list of statements on one jobs file, in a forced order."""

    folder: Path
    statements: dict[str, list[str]]
    name: str = "scripted"
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(self.statements)

    def world(self, run: Run) -> ScriptedWorld:
        return ScriptedWorld(self, run)


class ScriptedWorld:
    def __init__(self, scenario: Scripted, run: Run) -> None:
        self.scenario = scenario
        self.run = run
        path = scenario.folder / "scripted.sqlite3"
        path.unlink(missing_ok=True)
        path.write_bytes(jobs_template(scenario.folder, 2).read_bytes())
        self.lock = WriteLock(path)
        self.connections = {
            name: open_scheduled(path, run, self.lock) for name in scenario.statements
        }
        self.played = contextlib.ExitStack()
        self.played.enter_context(played(FileLocks(run)))

    def script(self, worker: Worker) -> None:
        connection = self.connections[worker.name]
        try:
            for statement in self.scenario.statements[worker.name]:
                if statement == "flock":
                    descriptor = os.open(self.scenario.folder / "x.lock", os.O_RDWR | os.O_CREAT)
                    fcntl.flock(descriptor, fcntl.LOCK_EX)
                else:
                    connection.execute(statement)
        except sqlite3.OperationalError as error:
            self.scenario.errors[worker.name] = getattr(error, "sqlite_errorname", str(error))
            raise

    def after_step(self) -> Problem | None:
        return None

    def at_end(self) -> Problem | None:
        return None

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.lock.close()
        self.played.close()


def play_in_order(scenario: Any, order: Sequence[int]) -> Played:
    def choose(decisions: Sequence[Decision], runnable: tuple[int, ...], default: int) -> int:
        return order[len(decisions)] if len(decisions) < len(order) else default

    return player(ThreadBaton)(scenario, choose)


TAKE_1 = "UPDATE jobs SET owner = 'x' WHERE id = 1"
READ = "SELECT * FROM jobs"


def test_a_statement_that_finds_the_write_lock_taken_waits_where_the_busy_handler_would(
    tmp_path: Path,
) -> None:
    scenario = Scripted(tmp_path, {"a": ["BEGIN IMMEDIATE", TAKE_1, "COMMIT"], "b": [TAKE_1]})
    # a takes the lock; b's autocommit UPDATE waits (not runnable); a ends; b is retried.
    outcome = play_in_order(scenario, [0, 1, 0, 0, 1])
    assert [decision.runnable for decision in outcome.decisions] == [
        (0, 1), (0, 1), (0,), (0,), (1,),
    ]  # fmt: skip
    rows = [(row.worker, row.action, row.result) for row in outcome.rows]
    assert rows[1][:2] == ("b", TAKE_1) and rows[1][2].startswith("waits")
    assert rows[-1] == ("b", TAKE_1, "1 row")
    assert scenario.errors == {}


def test_a_deferred_transaction_that_read_is_refused_at_once_when_it_would_write(
    tmp_path: Path,
) -> None:
    # SQLite calls the busy handler only while no read transaction is open: this write of
    # b's gets SQLITE_BUSY at once, whatever the timeout, and b sees it.
    scenario = Scripted(tmp_path, {"a": ["BEGIN IMMEDIATE", TAKE_1], "b": ["BEGIN", READ, TAKE_1]})
    outcome = play_in_order(scenario, [0, 1, 1, 1])
    assert scenario.errors == {"b": "SQLITE_BUSY"}
    refused = [row for row in outcome.rows if row.worker == "b"][-2:]
    assert [row.step for row in refused] == [4, 4]  # no wait: refused in the same step
    assert [row.result for row in refused] == ["OperationalError: database is locked"] * 2


def test_a_stale_snapshot_is_refused_even_when_the_lock_is_free(tmp_path: Path) -> None:
    scenario = Scripted(tmp_path, {"a": [TAKE_1], "b": ["BEGIN", READ, TAKE_1]})
    play_in_order(scenario, [1, 1, 0, 1])
    assert scenario.errors == {"b": "SQLITE_BUSY_SNAPSHOT"}


def test_two_workers_each_waiting_for_the_others_lock_is_a_deadlock(tmp_path: Path) -> None:
    scenario = Scripted(
        tmp_path, {"a": ["flock", "BEGIN IMMEDIATE"], "b": ["BEGIN IMMEDIATE", "flock"]}
    )
    outcome = play_in_order(scenario, [0, 1, 0, 1])
    assert outcome.problem is not None and outcome.problem.kind == "deadlock"
    assert "a to run BEGIN IMMEDIATE" in outcome.problem.words


def test_file_locks_are_the_real_ones_again_after_a_schedule(tmp_path: Path) -> None:
    before = fcntl.flock, os.close
    explore_claim_one(EXERCISES["claim_one"].solution, tmp_path)
    assert (fcntl.flock, os.close) == before


def test_with_connection_commits_through_a_point(tmp_path: Path) -> None:
    path = jobs_template(tmp_path, 1)
    run = Run(("a",), ThreadBaton())
    lock = WriteLock(path)
    connection = open_scheduled(path, run, lock)

    class World(ScriptedWorld):
        def __init__(self) -> None:
            pass

        def script(self, worker: Worker) -> None:
            connection.execute("BEGIN")
            with connection:
                connection.cursor().executemany(
                    "UPDATE jobs SET owner = ? WHERE id = ?", [("a", 1), ("b", 1)]
                )

        def close(self) -> None:
            connection.close()
            lock.close()

    run.play(World(), lambda decisions, runnable, default: default)
    assert [row.action for row in run.rows()] == [
        "BEGIN", "UPDATE jobs SET owner = ? WHERE id = ?", "commit()",
    ]  # fmt: skip
    assert isinstance(connection, ScheduledConnection)


def test_a_worker_waiting_on_a_lock_the_scheduler_cannot_see_is_reported_as_stuck(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(baton_module, "STUCK_SECONDS", 0.3)
    hidden = {"lock": threading.Lock()}  # not a global the candidate names: not seen ahead

    def claim_one(connection: sqlite3.Connection, owner: str) -> int | None:
        with hidden["lock"]:
            row = connection.execute("SELECT id FROM jobs WHERE status = 'pending'").fetchone()
            return None if row is None else int(row[0])

    exploration = explore_claim_one(claim_one, tmp_path)
    assert not isinstance(exploration, str) and exploration.broken is not None
    assert exploration.broken.kind == "stuck"
    assert "cannot switch workers" in exploration.broken.words
    assert "Traceback" not in capsys.readouterr().err


# -- what crosses to the verdict, and what the student sees ----------------------------------


def test_the_exploration_crosses_as_json_and_gives_the_same_verdict(tmp_path: Path) -> None:
    exploration = explore_claim_one(EXERCISES["claim_one"].starter, tmp_path)
    assert not isinstance(exploration, str)
    data = json.loads(json.dumps(to_plain(exploration)))
    assert from_plain(data) == exploration
    result = broken_result(from_plain(data))
    assert isinstance(result, RaceResult) and not result.passed
    assert result.picture is not None
    assert result.picture.rows[-1].kind == "returns"
    html = result._repr_html_()
    assert html is not None and 'src="data:image/svg+xml;base64,' in html


def test_a_timeline_has_a_lane_per_worker_and_names_long_statements_below() -> None:
    rows = [
        Row(1, "alice", "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id", "", "(1,)"),
        Row(2, "bob", "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id", "", "(1,)"),
        Row(2, "bob", "returns", "", "1"),
    ]
    lines = timeline_text(("alice", "bob"), rows).splitlines()
    assert lines[0].split() == ["alice", "bob"]
    assert lines[1].startswith("1  SELECT → (1,)")
    bob = lines[0].index("bob")
    assert lines[2].index("SELECT") == bob and lines[3].index("returns 1") == bob
    assert lines[4].strip() == "SELECT: SELECT id FROM jobs WHERE status = 'pending' ORDER BY id"


@pytest.fixture
def no_browser_suspension(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(baton_module, "IN_BROWSER", True)
    monkeypatch.setattr(baton_module, "can_suspend", lambda: False)
    yield


def test_where_a_call_cannot_be_paused_the_check_says_so_in_one_line(
    no_browser_suspension: None, tmp_path: Path
) -> None:
    said = explore_claim_one(EXERCISES["claim_one"].solution, tmp_path)
    assert isinstance(said, str) and "\n" not in said and "cannot pause a call" in said


def test_a_threading_lock_is_refused_before_any_schedule(tmp_path: Path) -> None:
    lock = threading.Lock()

    def claim_one(connection: sqlite3.Connection, owner: str) -> int | None:
        with lock:
            return None

    assert "its own copy of the lock" in str(explore_claim_one(claim_one, tmp_path))


def test_a_notebook_shows_a_race_verdict_as_its_words(tmp_path: Path) -> None:
    from IPython.lib.pretty import pretty

    exploration = explore_claim_one(EXERCISES["claim_one"].starter, tmp_path)
    assert not isinstance(exploration, str)
    result = broken_result(exploration)
    assert pretty(result) == str(result) and str(result).startswith("NOT YET: ")
