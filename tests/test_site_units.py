"""The browser edition's paths in agent17, run on CPython: the inline bound, the fcntl stand-in."""

from __future__ import annotations

import types
from typing import Any

import pytest

from agent17.browser import complete_empty_fcntl
from agent17.exercises._bounded import CheckResult, _run_inline


def test_inline_check_is_stopped_at_its_deadline() -> None:
    def endless() -> CheckResult:
        while True:
            pass

    result = _run_inline(endless, 0.2)
    assert not result.passed
    assert "did not finish within 0.2 seconds" in result.feedback


def test_inline_check_gives_its_verdict_and_what_a_failing_candidate_printed() -> None:
    assert _run_inline(lambda: CheckResult(True, "right"), 5.0) == CheckResult(True, "right")

    def noisy() -> CheckResult:
        print("looking at B")
        return CheckResult(False, "C is not ready")

    result = _run_inline(noisy, 5.0)
    assert result == CheckResult(False, "C is not ready\n(your code printed: looking at B)")


def test_inline_check_reports_a_raised_error_and_restores_the_trace() -> None:
    import sys

    def broken() -> CheckResult:
        raise KeyError("A")

    before = sys.gettrace()
    result = _run_inline(broken, 5.0)
    assert not result.passed and "KeyError" in result.feedback
    assert sys.gettrace() is before


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

    def starts_a_thread() -> CheckResult:
        raise RuntimeError("can't start new thread")

    def forks() -> CheckResult:
        raise ModuleNotFoundError("No module named '_multiprocessing'", name="_multiprocessing")

    assert _run_inline(starts_a_thread, 5.0) == CheckResult(False, NEEDS_THE_OS)
    assert _run_inline(forks, 5.0) == CheckResult(False, NEEDS_THE_OS)
    assert "KeyError" in _run_inline(lambda: {}["A"], 5.0).feedback
