"""A team's state opened once: one choice of engine, one visit of the workspace's path checks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agent17.armour.paths as paths
from agent17.agent.models import lead_script, teammate_script
from agent17.armour.paths import StateFolder
from agent17.bootstrap import TeamSettings, build_team
from agent17.team.sqlite_state import SqliteTeamState
from agent17.team.workplace import StoreLocation, open_team_state

_LOADED_ENGINES = """
import io, sys
from agent17.demo import run_demo
code = run_demo(None, io.StringIO())
loaded = sorted(m for m in sys.modules if m.startswith(("agent17.store.pg", "agent17.team.pg",
    "agent17.store.postgres", "psycopg")))
print(code, loaded)
"""


def test_the_demo_on_sqlite_loads_no_postgresql_module(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", _LOADED_ENGINES],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert ran.stdout.strip() == "0 []", ran.stderr


def _counting(monkeypatch: pytest.MonkeyPatch, name: str, calls: list[str]) -> Callable[..., Any]:
    original: Callable[..., Any] = getattr(paths, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(paths, name, counted)
    return original


def test_a_team_visits_the_workspace_checks_once_for_its_four_state_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    _counting(monkeypatch, "resolve_workspace", calls)
    _counting(monkeypatch, "state_dir", calls)
    team = build_team(
        TeamSettings(
            workspace=tmp_path,
            lead_model=lead_script((), ()),
            teammate_model=lambda name: teammate_script(),
        )
    )
    try:
        folder = tmp_path.resolve() / ".agent_tutorial"
        opened = {path.name for path in folder.iterdir()}
        assert {"tasks.sqlite3", "mailbox.sqlite3", "idempotency.sqlite3"} <= opened
        assert team.audit.path == folder / "audit.jsonl"
    finally:
        team.close()
    assert calls == ["resolve_workspace", "state_dir"]


def test_each_state_file_opened_alone_visits_the_workspace_checks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The counter above can fail: without a StateFolder, every file checks its folder.
    calls: list[str] = []
    _counting(monkeypatch, "state_dir", calls)
    paths.safe_state_file(tmp_path, "one")
    paths.safe_state_file(tmp_path, "two")
    assert calls == ["state_dir", "state_dir"]


def test_a_state_folder_is_a_path_to_its_real_workspace(tmp_path: Path) -> None:
    link = tmp_path / "link"
    (tmp_path / "real").mkdir()
    link.symlink_to(tmp_path / "real")
    folder = StateFolder.open(link)
    assert Path(folder) == (tmp_path / "real").resolve()
    assert folder.path == (tmp_path / "real").resolve() / ".agent_tutorial"
    assert StateFolder.open(folder) is folder


def test_the_sqlite_team_state_says_where_its_board_is(tmp_path: Path) -> None:
    state = open_team_state(StoreLocation(), tmp_path)
    try:
        assert isinstance(state, SqliteTeamState)
        assert state.where == str(tmp_path.resolve())
        assert state.records().workspace == tmp_path.resolve()
    finally:
        state.close()
