"""Secrets stay out of reach: of a tool's command, of a child's command line, of any repr."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agent17.agent.models import ScriptedModel
from agent17.agent.openai_model import validate_openai_environment
from agent17.bootstrap import TeamSettings
from agent17.claims import ToolContext
from agent17.team.workplace import StoreLocation
from agent17.teammate_process import TeammateConfig
from agent17.tools.workspace_tools import workspace_tool_definitions

SECRET = "sk-test-0123456789-very-secret"


def _run_shell_as_nobody(workspace: Path, results: Any) -> None:
    # The child of a fork: become the user `nobody`, made "dumpable" again as any
    # process that user starts is (changing user clears the flag), then run a command.
    try:
        os.setgid(65534)
        os.setuid(65534)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(4, 1, 0, 0, 0) == 0  # PR_SET_DUMPABLE, 1
        shell = workspace_tool_definitions(workspace)[0]
        results.put(shell.run({"command": "cat /proc/$PPID/environ"}, ToolContext("alice")))
    except BaseException as error:
        results.put({"child_failed": repr(error)})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the tool as another user")
def test_a_shell_command_cannot_read_the_teammates_environment_through_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As root the check would prove nothing (root reads every /proc file), so the
    # teammate here runs as `nobody`, and its command as `nobody` too; pytest's own
    # folders are private to root, hence a folder of nobody's own under /tmp.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    workspace = Path(tempfile.mkdtemp(prefix="agent17-secrets-", dir="/tmp"))
    os.chown(workspace, 65534, 65534)
    try:
        result = _shell_result_as_nobody(workspace)
    finally:
        shutil.rmtree(workspace)
    assert result["exit_code"] != 0, result
    assert SECRET not in result["stdout"]
    assert "Permission denied" in result["stderr"]  # the command ran, and was refused


def _shell_result_as_nobody(workspace: Path) -> dict[str, Any]:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_run_shell_as_nobody, args=(workspace, results))
    child.start()
    result = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and "child_failed" not in result, result
    return dict(result)


def test_a_url_urllib_cannot_split_reaches_a_child_without_its_password() -> None:
    psycopg = pytest.importorskip("psycopg")
    url = "postgresql://bob:p]w0rd-secret@db.example:6543/team?sslmode=disable"
    with pytest.raises(ValueError):
        __import__("urllib.parse").parse.urlsplit(url).password  # noqa: B018
    shown_url, extra = StoreLocation(url).for_a_child()
    assert shown_url is not None
    assert "p]w0rd-secret" not in shown_url
    assert extra == {"PGPASSWORD": "p]w0rd-secret"}
    before = psycopg.conninfo.conninfo_to_dict(url)
    after = psycopg.conninfo.conninfo_to_dict(shown_url)
    assert after == {key: value for key, value in before.items() if key != "password"}


def test_no_repr_shows_a_key_or_a_password(tmp_path: Path) -> None:
    url = f"postgresql://bob:{SECRET}@db.example/team"
    config = validate_openai_environment({"OPENAI_API_KEY": SECRET})
    teammate = TeammateConfig(
        name="alice",
        workspace=tmp_path,
        model="openai",
        poll_interval_seconds=5,
        max_idle_polls=12,
        lease_seconds=300,
        work_seconds=0,
        start_gate=None,
        environ={"OPENAI_API_KEY": SECRET},
        store=url,
    )
    lead_model = ScriptedModel([])
    settings = TeamSettings(tmp_path, lead_model, lambda name: lead_model, store=url)
    shown = [repr(StoreLocation(url)), repr(config), repr(teammate), repr(settings)]
    assert all(SECRET not in text for text in shown), shown
    assert "db.example" in shown[0]
