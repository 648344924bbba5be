"""shell, read_file and write_file stay inside the workspace and keep the board's files safe."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent17.claims import ToolContext
from agent17.tools.base import AnyTool
from agent17.tools.workspace_tools import (
    MAX_READ_BYTES,
    truncate_output,
    workspace_tool_definitions,
)

CONTEXT = ToolContext(identity="alice")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / ".agent_tutorial").mkdir()
    (root / ".agent_tutorial" / "tasks.sqlite3").write_text("board")
    return root


@pytest.fixture
def tools(workspace: Path) -> dict[str, AnyTool]:
    return {tool.name: tool for tool in workspace_tool_definitions(workspace, max_output_chars=40)}


def run(tools: dict[str, AnyTool], name: str, **arguments: Any) -> dict[str, Any]:
    return tools[name].run(arguments, CONTEXT)


def error_code(result: dict[str, Any]) -> str | None:
    error = result.get("error")
    return error["code"] if isinstance(error, dict) else None


def test_tools_come_in_order_and_only_shell_and_write_file_are_effectful(workspace: Path) -> None:
    definitions = workspace_tool_definitions(workspace)
    assert [tool.name for tool in definitions] == ["shell", "read_file", "write_file"]
    assert [tool.effectful for tool in definitions] == [True, False, True]


def test_write_then_read_round_trips_text_and_creates_parent_folders(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    written = run(tools, "write_file", path="notes/deep/a.md", content="héllo\n")
    assert written == {"path": "notes/deep/a.md", "bytes_written": len("héllo\n".encode())}
    assert (workspace / "notes" / "deep" / "a.md").read_text(encoding="utf-8") == "héllo\n"
    assert run(tools, "read_file", path="notes/deep/a.md") == {
        "path": "notes/deep/a.md",
        "content": "héllo\n",
    }


def test_write_file_replaces_content_and_leaves_no_temp_files(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    run(tools, "write_file", path="a.txt", content="old")
    run(tools, "write_file", path="a.txt", content="new")
    assert (workspace / "a.txt").read_text() == "new"
    assert sorted(p.name for p in workspace.iterdir()) == [".agent_tutorial", "a.txt"]


def test_absolute_inside_path_is_accepted(tools: dict[str, AnyTool], workspace: Path) -> None:
    result = run(tools, "write_file", path=str(workspace / "x.txt"), content="x")
    assert result["path"] == "x.txt"


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd"])
def test_paths_leading_outside_the_workspace_are_refused(
    tools: dict[str, AnyTool], workspace: Path, tool: str, path: str
) -> None:
    arguments: dict[str, Any] = {"path": path}
    if tool == "write_file":
        arguments["content"] = "pwned"
    assert error_code(tools[tool].run(arguments, CONTEXT)) == "path_outside_workspace"
    assert not (workspace.parent / "outside.txt").exists()


def test_a_symlink_pointing_outside_is_refused_for_read_and_write(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    secret = workspace.parent / "secret.txt"
    secret.write_text("secret")
    (workspace / "link.txt").symlink_to(secret)
    (workspace / "linkdir").symlink_to(workspace.parent)
    assert error_code(run(tools, "read_file", path="link.txt")) == "path_outside_workspace"
    assert error_code(run(tools, "write_file", path="link.txt", content="x")) == (
        "path_outside_workspace"
    )
    assert error_code(run(tools, "write_file", path="linkdir/new.txt", content="x")) == (
        "path_outside_workspace"
    )
    assert secret.read_text() == "secret"
    assert not (workspace.parent / "new.txt").exists()


def test_a_symlink_that_stays_inside_is_followed(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "real.txt").write_text("inside")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert run(tools, "read_file", path="alias.txt") == {"path": "real.txt", "content": "inside"}


def test_a_symlinked_folder_inside_is_followed_for_read_and_write(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "real").mkdir()
    (workspace / "docs").symlink_to("real")  # relative, as `ln -s real docs` makes it
    assert run(tools, "write_file", path="docs/a.md", content="a") == {
        "path": "real/a.md",
        "bytes_written": 1,
    }
    assert run(tools, "read_file", path="docs/a.md") == {"path": "real/a.md", "content": "a"}
    assert (workspace / "docs").is_symlink()


def test_a_relative_symlink_is_read_from_its_own_folder_and_may_not_climb_out(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "top.txt").write_text("top")
    (workspace / "a" / "b" / "up.txt").symlink_to("../../top.txt")
    (workspace / "a" / "out.txt").symlink_to("../../secret.txt")
    (workspace.parent / "secret.txt").write_text("secret")
    assert run(tools, "read_file", path="a/b/up.txt") == {"path": "top.txt", "content": "top"}
    assert error_code(run(tools, "read_file", path="a/out.txt")) == "path_outside_workspace"


def test_a_symlink_loop_is_invalid_path_not_a_hang(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "ping").symlink_to("pong")
    (workspace / "pong").symlink_to("ping")
    assert error_code(run(tools, "read_file", path="ping")) == "invalid_path"
    assert error_code(run(tools, "write_file", path="ping/x", content="x")) == "invalid_path"
    assert sorted(p.name for p in workspace.iterdir()) == [".agent_tutorial", "ping", "pong"]


def test_dot_dot_is_taken_by_name_so_a_write_makes_no_folder_it_climbs_out_of(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    assert run(tools, "write_file", path="new/../x.txt", content="x")["path"] == "x.txt"
    assert sorted(p.name for p in workspace.iterdir()) == [".agent_tutorial", "x.txt"]


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_is_not_private(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    run(tools, "write_file", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert script.stat().st_mode & 0o777 == 0o750
    umask = os.umask(0)
    os.umask(umask)
    run(tools, "write_file", path="new.txt", content="x")
    assert (workspace / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize(
    "path", [".agent_tutorial/tasks.sqlite3", ".agent_tutorial/new", "x/../.agent_tutorial/a"]
)
def test_the_boards_own_files_are_protected(
    tools: dict[str, AnyTool], workspace: Path, path: str
) -> None:
    assert error_code(run(tools, "read_file", path=path)) == "protected_path"
    assert error_code(run(tools, "write_file", path=path, content="x")) == "protected_path"
    assert (workspace / ".agent_tutorial" / "tasks.sqlite3").read_text() == "board"


def test_a_symlink_to_the_board_folder_is_protected_too(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "board").symlink_to(workspace / ".agent_tutorial")
    assert error_code(run(tools, "read_file", path="board/tasks.sqlite3")) == "protected_path"


def test_the_boards_folder_is_protected_under_whatever_name_it_is_reached_by(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    # `.agent_tutorial` made a link to another folder: that folder is the board's now.
    (workspace / ".agent_tutorial").rename(workspace / "elsewhere")
    (workspace / ".agent_tutorial").symlink_to("elsewhere")
    assert error_code(run(tools, "read_file", path="elsewhere/tasks.sqlite3")) == "protected_path"
    assert error_code(run(tools, "write_file", path="elsewhere/x", content="x")) == (
        "protected_path"
    )
    assert sorted(p.name for p in (workspace / "elsewhere").iterdir()) == ["tasks.sqlite3"]


def test_reading_a_missing_file_or_a_directory_is_a_clear_error(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    (workspace / "folder").mkdir()
    assert error_code(run(tools, "read_file", path="missing.txt")) == "file_not_found"
    assert error_code(run(tools, "read_file", path="folder")) == "not_a_file"
    assert error_code(run(tools, "write_file", path="folder", content="x")) == "not_a_file"
    assert error_code(run(tools, "write_file", path=".", content="x")) == "not_a_file"


def test_writing_below_a_file_is_a_clear_error(tools: dict[str, AnyTool], workspace: Path) -> None:
    (workspace / "plain").write_text("x")
    assert error_code(run(tools, "write_file", path="plain/child.txt", content="x")) == (
        "not_a_file"
    )


def test_unknown_arguments_are_refused_before_touching_disk(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    result = tools["write_file"].run({"path": "a.txt", "content": "x", "mode": "w"}, CONTEXT)
    assert error_code(result) == "invalid_arguments"
    assert not (workspace / "a.txt").exists()


def test_shell_runs_in_the_workspace_and_reports_exit_code_and_output(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    result = run(tools, "shell", command="echo made > out.txt; echo ok; echo oops >&2; exit 3")
    assert result == {"exit_code": 3, "stdout": "ok\n", "stderr": "oops\n"}
    assert (workspace / "out.txt").read_text() == "made\n"


def test_a_shell_command_sees_path_and_home_but_none_of_the_teammates_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-test-" + uuid.uuid4().hex,
        "PGPASSWORD": "pg-" + uuid.uuid4().hex,
        "AGENT17_MODEL": "model-" + uuid.uuid4().hex,
        f"SECRET_{uuid.uuid4().hex[:8].upper()}": uuid.uuid4().hex,
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    shell = workspace_tool_definitions(workspace)[0]
    result = shell.run({"command": "env"}, CONTEXT)
    assert result["exit_code"] == 0
    shown = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert not set(secrets) & set(shown)
    assert not [value for value in secrets.values() if value in result["stdout"]]
    assert shown["HOME"] == str(workspace.resolve())
    assert shown["PATH"] == os.environ["PATH"]
    assert shown["LC_ALL"] == "C.UTF-8"


def test_shell_output_is_truncated_keeping_head_and_tail(tools: dict[str, AnyTool]) -> None:
    command = f"{sys.executable} -c \"print('H' + 'x' * 100 + 'T', end='')\""
    stdout = run(tools, "shell", command=command)["stdout"]
    assert stdout.startswith("H") and stdout.endswith("T")
    assert "characters truncated" in stdout and len(stdout) < 102


def test_shell_does_not_read_the_approvers_terminal(tools: dict[str, AnyTool]) -> None:
    assert run(tools, "shell", command="cat")["stdout"] == ""


def test_shell_timeout_is_a_tool_error(workspace: Path) -> None:
    shell = workspace_tool_definitions(workspace, shell_timeout_seconds=0.2)[0]
    result = shell.run({"command": f"{sys.executable} -c 'import time; time.sleep(30)'"}, CONTEXT)
    assert error_code(result) == "shell_timeout"


def test_a_workspace_removed_under_the_tools_is_a_coded_refusal_for_each_tool(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    shutil.rmtree(workspace)
    assert error_code(run(tools, "shell", command="true")) == "shell_failed"
    assert error_code(run(tools, "read_file", path="a.txt")) == "file_unreadable"
    assert error_code(run(tools, "write_file", path="a.txt", content="x")) == "file_unwritable"


def test_a_workspace_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        workspace_tool_definitions(tmp_path / "missing")


@pytest.mark.parametrize("path", ["a" * 300, "/".join(["b" * 200] * 30)], ids=["name", "path"])
def test_a_name_too_long_for_the_file_system_is_invalid_path_not_a_crash(
    tools: dict[str, AnyTool], workspace: Path, path: str
) -> None:
    before = sorted(workspace.iterdir())
    assert error_code(run(tools, "read_file", path=path)) == "invalid_path"
    assert error_code(run(tools, "write_file", path=path, content="x")) == "invalid_path"
    assert sorted(workspace.iterdir()) == before


def test_reading_a_fifo_is_not_a_file_at_once_instead_of_waiting_for_a_writer(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    results: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: results.append(run(tools, "read_file", path="pipe")))
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # blocked in open(): a writer lets it go, so the test can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("read_file waited for a writer on a FIFO")
    assert [error_code(result) for result in results] == ["not_a_file"]


def _bytes_read_by_this_process() -> int:
    with open("/proc/self/io", encoding="ascii") as stats:
        return next(int(line.split()[1]) for line in stats if line.startswith("rchar:"))


def test_a_huge_file_is_shown_by_its_two_ends_without_reading_it_whole(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    huge = workspace / "huge.log"
    with open(huge, "wb") as file:
        file.write(b"HEAD" + b"h" * 100)
        file.seek(64 * 1024 * 1024)  # a sparse hole: 64 MiB that take no disk
        file.write(b"t" * 100 + b"TAIL")
    before = _bytes_read_by_this_process()
    content = run(tools, "read_file", path="huge.log")["content"]
    assert _bytes_read_by_this_process() - before < 2 * MAX_READ_BYTES
    assert content.startswith("HEAD" + "h" * 16) and content.endswith("t" * 16 + "TAIL")
    assert f"a file of {huge.stat().st_size:,} bytes" in content


def test_a_file_up_to_the_read_limit_is_read_whole_and_truncated_as_before(
    tools: dict[str, AnyTool], workspace: Path
) -> None:
    text = "H" + "é" * (MAX_READ_BYTES // 2 - 1) + "T"  # exactly MAX_READ_BYTES bytes in UTF-8
    (workspace / "edge.txt").write_text(text, encoding="utf-8")
    assert len(text.encode()) == MAX_READ_BYTES
    assert run(tools, "read_file", path="edge.txt")["content"] == truncate_output(text, 40)
