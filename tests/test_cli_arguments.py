"""Every argument error of every subcommand is one line, exit 2, and nothing is made.

Run through the installed console script, as a user types it: a wrong value,
an unknown option, a missing required one, a bad choice. The workspace named
on the command line must not exist afterwards, nor anything else in the
folder the command ran in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent17 import SqliteTaskStore

# The console script next to this interpreter (the venv's), else the one on PATH.
_BESIDE = Path(sys.executable).with_name("agent17")
CONSOLE_SCRIPT = str(_BESIDE) if _BESIDE.exists() else shutil.which("agent17")

WS = "{ws}"
"""Stands for the workspace path in the cases below (a folder that must never appear)."""

BAD_ARGUMENTS: dict[str, tuple[list[str], str]] = {
    # name: (the arguments, what the one line must say)
    "no command": ([], "COMMAND"),
    "unknown command": (["frobnicate"], "'frobnicate'"),
    "unknown option before the command": (["--bogus", "demo", "--workspace", WS], "--bogus"),
    "demo: unknown option": (["demo", "--workspace", WS, "--bogus"], "--bogus"),
    "demo: a stray argument": (["demo", "--workspace", WS, "extra"], "extra"),
    "demo: empty workspace": (["demo", "--workspace", ""], "--workspace must name a folder"),
    "demo: workspace without a value": (["demo", "--workspace"], "--workspace"),
    "demo: --processes given a value": (["demo", "--processes=yes", "--workspace", WS], "yes"),
    "demo: --store without a value": (["demo", "--workspace", WS, "--store"], "--store"),
    "demo: --store not postgres": (["demo", "--workspace", WS, "--store", "x"], "--store"),
    "board: bad format": (["board", "--workspace", WS, "--format", "xml"], "table, json or dot"),
    "board: empty workspace": (["board", "--workspace", ""], "--workspace must name a folder"),
    "board: --leases given a value": (["board", "--workspace", WS, "--leases=1"], "--leases"),
    "board: unknown option": (["board", "--workspace", WS, "--bogus"], "--bogus"),
    "run: no prompt": (["run", "--workspace", WS], "--prompt"),
    "run: empty prompt": (["run", "--prompt", " ", "--workspace", WS], "--prompt must say"),
    "run: empty workspace": (["run", "--prompt", "x", "--workspace", ""], "--workspace"),
    "run: unknown option": (["run", "--prompt", "x", "--workspace", WS, "--bogus"], "--bogus"),
    "teammate: no name": (["teammate", "--workspace", WS], "--name"),
    "teammate: name without a value": (["teammate", "--workspace", WS, "--name"], "--name"),
    "teammate: bad name": (["teammate", "--workspace", WS, "--name", "Alice"], "--name"),
    "teammate: bad model": (
        ["teammate", "--workspace", WS, "--name", "al", "--model", "gpt"],
        "--model must be scripted or openai, not 'gpt'",
    ),
    "teammate: fractional idle polls": (
        ["teammate", "--workspace", WS, "--name", "al", "--max-idle-polls", "1.5"],
        "--max-idle-polls must be a whole number, not '1.5'",
    ),
    "teammate: zero idle polls": (
        ["teammate", "--workspace", WS, "--name", "al", "--max-idle-polls", "0"],
        "--max-idle-polls must be at least 1",
    ),
    "teammate: hex poll interval": (
        ["teammate", "--workspace", WS, "--name", "al", "--poll-interval", "0x10"],
        "--poll-interval must be a number of seconds, not '0x10'",
    ),
    "teammate: nan poll interval": (
        ["teammate", "--workspace", WS, "--name", "al", "--poll-interval", "nan"],
        "--poll-interval must be a number of seconds",
    ),
    "teammate: zero poll interval": (
        ["teammate", "--workspace", WS, "--name", "al", "--poll-interval", "0"],
        "--poll-interval must be more than 0",
    ),
    "teammate: infinite lease": (
        ["teammate", "--workspace", WS, "--name", "al", "--lease-seconds", "inf"],
        "--lease-seconds must be a number of seconds",
    ),
    "teammate: word for work seconds": (
        ["teammate", "--workspace", WS, "--name", "al", "--work-seconds", "ten"],
        "--work-seconds must be a number of seconds, not 'ten'",
    ),
    "teammate: negative work seconds": (
        ["teammate", "--workspace", WS, "--name", "al", "--work-seconds", "-1"],
        "--work-seconds must be from 0",
    ),
    "teammate: empty start gate": (
        ["teammate", "--workspace", WS, "--name", "al", "--start-after-file", ""],
        "--start-after-file must name a file",
    ),
    "teammate: unknown option": (
        ["teammate", "--workspace", WS, "--name", "al", "--bogus", "1"],
        "--bogus 1",
    ),
    "teammate: --store not postgres": (
        ["teammate", "--workspace", WS, "--name", "al", "--store", "sqlite:///x"],
        "--store",
    ),
    "teammate: a newline in an unknown value": (
        ["teammate", "--workspace", WS, "--name", "al", "--nope\nsecond line"],
        "--nope\\nsecond line",
    ),
}


def _environment() -> dict[str, str]:
    # A configured model: only the arguments can be what stops `run` and `--model openai`.
    return {
        **{key: value for key, value in os.environ.items() if not key.startswith("OPENAI")},
        "OPENAI_API_KEY": "sk-never-used",
    }


def _start(arguments: list[str], cwd: Path) -> subprocess.Popen[str]:
    assert CONSOLE_SCRIPT is not None, "the agent17 console script is not installed"
    return subprocess.Popen(
        [CONSOLE_SCRIPT, *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=_environment(),
    )


def _run(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    process = _start(arguments, cwd)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@dataclass(frozen=True)
class Ran:
    folder: Path
    """Where the command ran; the workspace it names is `folder / "never-made"`."""
    result: subprocess.CompletedProcess[str]


AT_ONCE = 8
"""Cases running together: a console script starts slowly, but a small machine has few cores."""


@pytest.fixture(scope="module")
def ran_every_case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    """Every case run, AT_ONCE at a time, each in a folder of its own."""
    ran: dict[str, Ran] = {}
    running: list[tuple[str, Path, subprocess.Popen[str]]] = []

    def finish_oldest() -> None:
        case, folder, process = running.pop(0)
        stdout, stderr = process.communicate(timeout=120)
        result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        ran[case] = Ran(folder, result)

    for number, (case, (arguments, _)) in enumerate(BAD_ARGUMENTS.items()):
        if len(running) == AT_ONCE:
            finish_oldest()
        folder = tmp_path_factory.mktemp(f"case{number}")
        workspace = str(folder / "never-made")
        running.append(
            (case, folder, _start([workspace if a == WS else a for a in arguments], folder))
        )
    while running:
        finish_oldest()
    return ran


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_a_bad_argument_is_one_line_exit_2_and_creates_nothing(
    ran_every_case: dict[str, Ran], case: str
) -> None:
    must_say = BAD_ARGUMENTS[case][1]
    folder, result = ran_every_case[case].folder, ran_every_case[case].result
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "usage:" not in result.stderr and "Traceback" not in result.stderr
    assert lines[0].startswith("agent17"), lines[0]
    assert must_say in lines[0], lines[0]
    assert result.stdout == ""
    assert not (folder / "never-made").exists()
    assert list(folder.iterdir()) == []  # no .agent_tutorial where it ran either


@pytest.mark.parametrize("command", ["demo", "run"])
def test_a_workspace_that_is_a_file_is_refused_before_anything_is_written(
    tmp_path: Path, command: str
) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    extra = ["--prompt", "x"] if command == "run" else []
    result = _run([command, *extra, "--workspace", str(afile)], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"agent17 {command}: --workspace {afile} is not a directory"
    ]
    assert result.stdout == ""  # the demo's heading is not printed either
    assert sorted(tmp_path.iterdir()) == [afile] and afile.read_text() == "mine"


@pytest.mark.parametrize("command", ["demo", "board", "run", "teammate"])
def test_help_still_prints_the_whole_usage(tmp_path: Path, command: str) -> None:
    result = _run([command, "--help"], cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith(f"usage: agent17 {command}")
    assert "options:" in result.stdout and "--workspace" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("variant", [[], ["--processes"]], ids=["threads", "processes"])
def test_a_demo_refused_for_an_existing_board_says_so_on_stderr_only(
    tmp_path: Path, variant: list[str]
) -> None:
    with SqliteTaskStore(tmp_path) as store:
        store.create_task("mine")
    before = store.path.read_bytes()
    result = _run(["demo", *variant, "--workspace", str(tmp_path)], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "already has a task board" in line
    assert store.path.read_bytes() == before
