"""The browser edition's paths in agent17, run on CPython: the inline bound, the fcntl stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agent17.browser import complete_empty_fcntl
from agent17.exercises import _bounded
from agent17.exercises._bounded import Checker, CheckResult, Plain, run_check


def _said(data: Plain) -> CheckResult:
    """The judge of these tests: the candidate's answer is the verdict."""
    assert isinstance(data, list)
    return CheckResult(data[0] is True, str(data[1]))


def _inline(candidate: Any, timeout: float) -> CheckResult:
    """run_check as the browser runs it: inline, with a trace deadline."""
    patch = pytest.MonkeyPatch()
    patch.setattr(_bounded, "IN_BROWSER", True)
    try:
        return run_check(Checker(lambda c: c(), _said), candidate, timeout)
    finally:
        patch.undo()


def test_inline_check_is_stopped_at_its_deadline() -> None:
    def endless() -> Plain:
        while True:
            pass

    result = _inline(endless, 0.2)
    assert not result.passed
    assert "did not finish within 0.2 seconds" in result.feedback


def test_inline_check_gives_its_verdict_and_what_a_failing_candidate_printed() -> None:
    assert _inline(lambda: [True, "right"], 5.0) == CheckResult(True, "right")

    def noisy() -> Plain:
        print("looking at B")
        return [False, "C is not ready"]

    result = _inline(noisy, 5.0)
    assert result == CheckResult(False, "C is not ready\n(your code printed: looking at B)")


def test_inline_check_reports_a_raised_error_and_restores_the_trace() -> None:
    import sys

    def broken() -> Plain:
        raise KeyError("A")

    before = sys.gettrace()
    result = _inline(broken, 5.0)
    assert not result.passed and "KeyError" in result.feedback
    assert sys.gettrace() is before


def test_inline_check_runs_in_a_scratch_folder_and_leaves_the_callers_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-homework.txt").write_text("mine", encoding="utf-8")

    def tidies_its_folder() -> Plain:
        for entry in os.listdir("."):
            os.remove(entry)
        return [False, os.getcwd()]

    scratch = _inline(tidies_its_folder, 5.0).feedback
    assert (tmp_path / "my-homework.txt").read_text(encoding="utf-8") == "mine"
    assert Path.cwd() == tmp_path
    assert Path(scratch) != tmp_path and not Path(scratch).exists()


def test_the_kernels_empty_fcntl_gets_a_flock_that_excludes_nothing() -> None:
    empty = types.ModuleType("fcntl")
    modules = {"fcntl": empty}
    assert complete_empty_fcntl(modules)
    empty.flock(3, empty.LOCK_EX | empty.LOCK_NB)  # type: ignore[attr-defined]
    assert not complete_empty_fcntl(modules)  # a real (or completed) fcntl is left alone
    assert not complete_empty_fcntl({})


def test_in_the_browser_a_step_runs_inline_and_an_undecided_request_is_denied_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent17.agent.permissions import ApprovalRequest
    from agent17.viz import approvals

    monkeypatch.setattr(approvals, "IN_BROWSER", True)
    approver = approvals.ButtonApprover()
    request = ApprovalRequest("alice", "write_file", {"path": "notes.txt", "content": "hi"})
    verdicts: list[bool] = []

    def tick() -> Any:
        verdicts.append(approver(request))
        return "outcome"

    job = approver.start("alice", tick)
    assert job.thread is None and job.done and job.outcome == "outcome"
    approver.decide_next(True)
    approver.start("alice", tick)
    assert verdicts == [False, True]
    assert [answer.how for answer in approver.answers] == [
        approvals.BROWSER_DENIAL,
        "decided before the step",
    ]
    assert approver.pending is None
    assert approver(request) is False  # outside a step: nobody at the buttons


def test_inline_check_says_when_the_browser_cannot_start_what_the_check_needs() -> None:
    from agent17.exercises._bounded import NEEDS_THE_OS

    def starts_a_thread() -> Plain:
        raise RuntimeError("can't start new thread")

    def forks() -> Plain:
        raise ModuleNotFoundError("No module named '_multiprocessing'", name="_multiprocessing")

    assert _inline(starts_a_thread, 5.0) == CheckResult(False, NEEDS_THE_OS)
    assert _inline(forks, 5.0) == CheckResult(False, NEEDS_THE_OS)
    assert "KeyError" in _inline(lambda: {}["A"], 5.0).feedback


def test_the_exercises_import_where_multiprocessing_cannot() -> None:
    # Pyodide has no _multiprocessing: a module-level import of multiprocessing.connection
    # would take every exercise out of the browser edition.
    code = (
        "import sys; sys.modules['_multiprocessing'] = None\n"
        "import agent17.exercises, agent17.exercises.quiz\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
