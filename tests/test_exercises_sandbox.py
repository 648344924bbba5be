"""A check is a sandbox, and its verdict cannot be forged (issue 25, item 6).

The candidate runs in a fork of its own, in a scratch folder: a candidate that empties its
working directory leaves the caller's files alone. Every process it starts has ended when
`check()` returns, whether the check passed, timed out, or the candidate ended its own
process. The verdict is reached in the caller's process from plain values: an answer that
equals anything, or a patch to the checker's modules, changes nothing there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from wrong_pure import patches_the_checker

from agent17 import Task
from agent17.exercises import EXERCISES, check, search
from agent17.exercises._bounded import run_check

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to see processes end"),
]

SOLUTION = EXERCISES["ready_in_order"].solution


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (Z: ended, waiting to be reaped), or None: gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return None
    return stat.rpartition(b")")[2].split()[0].decode()


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text(encoding="utf-8").split()]


def _note(path: Path, pid: int) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(f"{pid}\n")


def _sleeper(path: Path, new_session: bool = False) -> None:
    """Fork a process that would sleep for ever (in a session of its own if asked), note it."""
    pid = os.fork()
    if pid == 0:
        if new_session:
            os.setsid()
        time.sleep(1000)
        os._exit(0)
    _note(path, pid)


def test_the_candidate_works_in_a_scratch_folder_and_the_callers_files_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-homework.txt").write_text("my answers", encoding="utf-8")

    def tidies_its_folder(tasks: list[Task]) -> list[str]:
        for entry in os.listdir("."):
            os.remove(entry)
        print(os.getcwd())
        return []

    result = check("ready_in_order", tidies_its_folder)
    assert not result.passed
    assert (tmp_path / "my-homework.txt").read_text(encoding="utf-8") == "my answers"
    assert Path.cwd() == tmp_path
    scratch = Path(result.feedback.rpartition("(your code printed: ")[2].rstrip(")"))
    assert scratch.is_absolute() and scratch != tmp_path
    assert not scratch.exists()  # removed with the check


def test_no_process_a_passing_candidate_started_is_left(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def right_but_forks(tasks: list[Task]) -> list[str]:
        if not pids.exists():
            for _ in range(4):
                _sleeper(pids)
            _sleeper(pids, new_session=True)  # out of the check's process group
            process = subprocess.Popen(["sleep", "1000"])
            _note(pids, process.pid)
        return SOLUTION(tasks)  # type: ignore[no-any-return]

    result = check("ready_in_order", right_but_forks)
    assert result.passed, result.feedback
    assert len(_pids(pids)) == 6
    # Killed and reaped before check() returned: not even a zombie is left.
    assert {pid: _state(pid) for pid in _pids(pids)} == dict.fromkeys(_pids(pids))


def test_no_process_is_left_when_the_candidate_hangs(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def forks_then_spins(tasks: list[Task]) -> list[str]:
        _sleeper(pids)
        _sleeper(pids, new_session=True)
        while True:
            pass

    result = run_check(EXERCISES["ready_in_order"].checker, forks_then_spins, timeout=1.0)
    assert "did not finish within 1 seconds" in result.feedback
    assert {pid: _state(pid) for pid in _pids(pids)} == dict.fromkeys(_pids(pids))


def _ended_by(deadline: float, pids: list[int]) -> dict[int, str | None]:
    """Each process's state once all have ended (gone, or a zombie init has not reaped yet)."""
    while True:
        states = {pid: _state(pid) for pid in pids}
        if all(state in (None, "Z") for state in states.values()) or time.monotonic() > deadline:
            return states


def test_no_process_is_left_when_the_candidate_ignores_the_deadline(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def forks_and_will_not_stop(tasks: list[Task]) -> list[str]:
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        _sleeper(pids)
        while True:
            pass

    result = run_check(EXERCISES["ready_in_order"].checker, forks_and_will_not_stop, timeout=0.5)
    assert "did not finish within 0.5 seconds" in result.feedback
    states = _ended_by(time.monotonic() + 10, _pids(pids))
    assert all(state in (None, "Z") for state in states.values()), states


def test_no_process_is_left_when_the_candidate_ends_the_checks_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def forks_and_exits(tasks: list[Task]) -> list[str]:
        _sleeper(pids)
        os._exit(0)

    result = check("ready_in_order", forks_and_exits)
    assert result.feedback == "your code ended the check's process (os._exit or a crash)"
    states = _ended_by(time.monotonic() + 10, _pids(pids))
    assert all(state in (None, "Z") for state in states.values()), states


class _AlwaysEqualStr(str):
    """A str that says it equals any other."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


def test_an_answer_is_compared_as_a_plain_value_of_its_type() -> None:
    def forged_ids(tasks: list[Task]) -> list[str]:
        return [_AlwaysEqualStr("?") for _ in tasks]

    def forged_outcome(mailbox: list[str], latest_plan: Any, ready: list[str]) -> str:
        return _AlwaysEqualStr("idle")

    ids = check("ready_in_order", forged_ids)
    assert not ids.passed
    assert ids.feedback.endswith(
        "return the tasks' ids (task.id, a str each), not _AlwaysEqualStr values"
    )
    outcome = check("next_pass", forged_outcome)
    assert not outcome.passed
    assert outcome.feedback.endswith("return the outcome as a str, not a _AlwaysEqualStr")


def test_a_patch_to_the_checker_stays_in_the_sandbox() -> None:
    same, judge = search.same, search.Search.judge
    result = check("ready_in_order", patches_the_checker)
    assert not result.passed
    assert "you said []; claim_next would take [A]" in result.feedback
    assert (search.same, search.Search.judge) == (same, judge)
