"""The benchmark's parts on tiny sizes: the report's shape, never its timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent17 import TaskStatus
from agent17.bench import (
    BenchReport,
    BenchSizes,
    Measurement,
    bench_claim_cost,
    bench_process_drain,
    bench_transaction_floor,
    build_blocked_board,
    format_report,
    main,
    run_bench,
)


def test_a_blocked_board_has_one_task_in_progress_and_the_rest_waiting(tmp_path: Path) -> None:
    store = build_blocked_board(tmp_path, 50)
    board = store.list_tasks()  # also checks every edge and unmet count
    assert len(board) == 50
    assert [t.status for t in board[:1]] == [TaskStatus.IN_PROGRESS]
    assert all(t.blocked_by == (board[0].id,) for t in board[1:])
    assert store.claim_next("someone") is None
    store.close()


def test_claim_cost_reports_two_medians_and_a_ratio_with_its_goal(tmp_path: Path) -> None:
    rows = bench_claim_cost(tmp_path, small=10, large=40, calls=5)
    assert [row.unit for row in rows] == ["µs", "µs", "x"]
    assert all(row.value > 0 for row in rows)
    assert rows[2].goal == "<= 1.5" and rows[2].passed is not None
    assert rows[2].value == pytest.approx(rows[1].value / rows[0].value)


def test_the_floor_comparison_reports_both_rates_and_their_ratio(tmp_path: Path) -> None:
    rows = bench_transaction_floor(tmp_path, cycles=5, rounds=1)
    assert [row.unit for row in rows] == ["cyc/s", "cyc/s", "x"]
    assert rows[2].goal == ">= 0.5"
    assert rows[2].value == pytest.approx(rows[0].value / rows[1].value)


@pytest.mark.processes
def test_the_process_drain_reports_rate_errors_and_double_claims(tmp_path: Path) -> None:
    rows = bench_process_drain(tmp_path, tasks=20, processes=2)
    by_name = {row.name: row for row in rows}
    assert by_name["claims per second"].value > 0
    for name in ("errors", "tasks claimed twice", "tasks left unfinished"):
        assert by_name[name].value == 0 and by_name[name].verdict == "PASS"


def test_the_table_shows_every_number_with_its_goal_and_verdict() -> None:
    report = BenchReport(
        (
            Measurement("a) one", "fast thing", 12.5, "µs"),
            Measurement("a) one", "ratio", 2.0, "x", "<= 1.5", False),
            Measurement("b) two", "errors", 0, "", "== 0", True),
        )
    )
    table = format_report(report)
    lines = table.splitlines()
    assert "a) one" in lines and "b) two" in lines
    assert any("ratio" in line and "<= 1.5" in line and line.endswith("MISS") for line in lines)
    assert any("errors" in line and line.endswith("PASS") for line in lines)
    assert lines[-1] == "some goals missed"
    assert not report.all_passed


@pytest.mark.processes
def test_a_whole_tiny_run_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = BenchSizes(10, 30, 3, 3, 10, 2)
    report = run_bench(tiny, tmp_path)
    assert [row.section[:2] for row in report.rows] == ["a)"] * 3 + ["b)"] * 3 + ["c)"] * 4
    assert list(tmp_path.iterdir()) == []  # the temporary boards are cleaned up

    monkeypatch.setattr("agent17.bench.QUICK", tiny)
    assert main(["--quick", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "claims per second" in out and "ratio store / floor" in out
