"""Secrets stay out of reach: of a tool's command, of a child's command line, of any repr."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from team_processes import Teammate

from agent17.agent.models import ScriptedModel
from agent17.agent.openai_model import validate_openai_environment
from agent17.bootstrap import TeamSettings
from agent17.claims import ToolContext
from agent17.team.workplace import StoreLocation
from agent17.teammate_process import TeammateConfig
from agent17.tools.workspace_tools import workspace_tool_definitions

SECRET = "sk-test-0123456789-very-secret"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


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


@linux_only
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


def test_a_name_that_says_token_key_secret_or_password_never_reaches_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LC_* is allowed for the locale, and `ssh` sends any LC_* variable along: a
    # name under an allowed prefix still never passes when it says what it holds.
    secrets = ("LC_GITHUB_TOKEN", "LC_API_KEY", "LC_Db_Password", "LC_AWS_SECRET", "TZ_SECRET")
    for name in secrets:
        monkeypatch.setenv(name, f"{SECRET}-{name}")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    monkeypatch.setenv("LANG", "C.UTF-8")
    shell = workspace_tool_definitions(tmp_path)[0]
    result = shell.run({"command": "env"}, ToolContext("alice"))
    assert result["exit_code"] == 0, result
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines()}
    assert {"LC_TIME", "LANG", "PATH", "HOME"} <= names  # the allowed names still pass
    assert names.isdisjoint(secrets), names
    assert SECRET not in result["stdout"]


_PR_CAPBSET_DROP = 24
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _without_privileges() -> None:
    # In a child before its exec, as root: with an empty bounding set the program it
    # runs has no capability. Teammates and command alike: root is then one more user
    # whose processes read each other's /proc/<pid>/environ only while it is dumpable.
    assert _LIBC is not None
    for capability in range(64):
        _LIBC.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # EINVAL past the last one


@linux_only
@pytest.mark.processes
def test_an_idle_teammate_process_hides_its_secrets_from_a_command_beside_it(
    tmp_path: Path,
) -> None:
    # Two teammates on one board, started both ways a user starts one (the console
    # script and `python -m agent17`), idle; a command of the same user reads their
    # /proc/<pid>/environ, as a command a sibling teammate runs would.
    secrets = {"OPENAI_API_KEY": SECRET, "PGPASSWORD": f"pg-{SECRET}"}
    environ = {**os.environ, **secrets}
    unprivileged = _without_privileges if os.geteuid() == 0 else None
    console_script = Path(sys.executable).with_name("agent17")
    assert console_script.is_file(), "the package is not installed in this Python's folder"
    launchers = {"alice": [sys.executable, "-m", "agent17"], "bob": [str(console_script)]}
    idle = ("--poll-interval", "60", "--max-idle-polls", "100")
    crew = [
        Teammate(tmp_path, name, *idle, command=launcher, env=environ, preexec_fn=unprivileged)
        for name, launcher in launchers.items()
    ]
    # The same command reads a process that does not hide its environment in full.
    plain = subprocess.Popen(["sleep", "120"], env=environ, preexec_fn=unprivileged)
    try:
        for teammate in crew:
            teammate.wait_for_line("joined the team")

        def command_reads(pid: int) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                ["cat", f"/proc/{pid}/environ"],
                capture_output=True,
                preexec_fn=unprivileged,
                timeout=60,
            )

        assert SECRET.encode() in command_reads(plain.pid).stdout
        for teammate in crew:
            read = command_reads(teammate.process.pid)
            assert not any(value.encode() in read.stdout for value in secrets.values()), (
                f"{teammate.name}'s secrets were read"
            )
            assert b"Permission denied" in read.stderr, read  # the command ran, and was refused
    finally:
        for process in [plain, *(teammate.process for teammate in crew)]:
            process.kill()
            process.wait(30)


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
