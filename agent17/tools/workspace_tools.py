"""A teammate's hands: shell, read_file and write_file, confined to the workspace.

File paths are resolved with realpath before use, so `..`, absolute paths and
symlinks that lead outside the workspace are all refused the same way, with
`path_outside_workspace`. The board's own files under `.agent_tutorial` are
off limits (`protected_path`): a model must change tasks through the task
tools, never by editing the database. `shell` cannot be confined like this,
which is why it is effectful and, by default, needs approval.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from agent17.claims import ToolContext
from agent17.inputs import RequiredText, StrictInput, Text
from agent17.tools.base import AnyTool, ToolDefinition, ToolError

PROTECTED_DIRECTORY = ".agent_tutorial"
DEFAULT_SHELL_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_CHARS = 10_000


class ShellInput(StrictInput):
    """Arguments of shell."""

    command: RequiredText = Field(description="A shell command, run in the workspace.")


class ReadFileInput(StrictInput):
    """Arguments of read_file."""

    path: RequiredText = Field(description="A file path relative to the workspace.")


class WriteFileInput(StrictInput):
    """Arguments of write_file."""

    path: RequiredText = Field(description="A file path relative to the workspace.")
    content: Text = Field(description="The whole new content of the file (UTF-8 text).")


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The real path of `path` inside `workspace`, or ToolError if it leads elsewhere."""
    if "\x00" in path:
        raise ToolError("invalid_path", "the path contains a NUL character")
    root = Path(os.path.realpath(workspace))
    # realpath follows every symlink that exists, so a link pointing outside is caught here.
    target = Path(os.path.realpath(root / path))
    if target != root and root not in target.parents:
        raise ToolError("path_outside_workspace", f"{path!r} is outside the workspace")
    relative = target.relative_to(root)
    if relative.parts and relative.parts[0] == PROTECTED_DIRECTORY:
        raise ToolError("protected_path", f"{path!r} is the task board's own storage")
    return target


def truncate_output(text: str, limit: int) -> str:
    """Keep the head and the tail of long output; errors tend to be at the end."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} characters truncated]...\n{text[-half:]}"


def workspace_tool_definitions(
    workspace: Path,
    *,
    shell_timeout_seconds: float = DEFAULT_SHELL_TIMEOUT_SECONDS,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> tuple[AnyTool, AnyTool, AnyTool]:
    """The shell, read_file and write_file tools, working inside `workspace`."""
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        raise ValueError(f"workspace {str(workspace)!r} is not a directory")

    def shell(args: ShellInput, context: ToolContext) -> dict[str, Any]:
        try:
            completed = subprocess.run(
                args.command,
                shell=True,
                cwd=root,
                timeout=shell_timeout_seconds,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                # Never let a command read the terminal the human approves on.
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as error:
            raise ToolError(
                "shell_timeout", f"the command ran longer than {error.timeout:g} seconds"
            ) from None
        return {
            "exit_code": completed.returncode,
            "stdout": truncate_output(completed.stdout, max_output_chars),
            "stderr": truncate_output(completed.stderr, max_output_chars),
        }

    def read_file(args: ReadFileInput, context: ToolContext) -> dict[str, Any]:
        target = resolve_in_workspace(root, args.path)
        if target.is_dir():
            raise ToolError("not_a_file", f"{args.path!r} is a directory")
        try:
            # O_NOFOLLOW: a symlink swapped in after the check must not be followed.
            descriptor = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise ToolError("file_not_found", f"{args.path!r} does not exist") from None
        except OSError as error:
            raise ToolError("file_unreadable", f"{args.path!r}: {error.strerror}") from None
        with open(descriptor, encoding="utf-8", errors="replace") as file:
            content = file.read()
        return {
            "path": target.relative_to(root).as_posix(),
            "content": truncate_output(content, max_output_chars),
        }

    def write_file(args: WriteFileInput, context: ToolContext) -> dict[str, Any]:
        target = resolve_in_workspace(root, args.path)
        if target == root or target.is_dir():
            raise ToolError("not_a_file", f"{args.path!r} is a directory")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ToolError("not_a_file", f"a parent of {args.path!r} is a file") from None
        data = args.content.encode("utf-8")
        # Temp file + os.replace: a reader sees the old file or the new one, never half.
        descriptor, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with open(descriptor, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp_name, target)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise
        return {"path": target.relative_to(root).as_posix(), "bytes_written": len(data)}

    return (
        ToolDefinition(
            "shell",
            "Run a shell command in the workspace; returns exit_code, stdout and stderr.",
            ShellInput,
            shell,
            effectful=True,
        ),
        ToolDefinition(
            "read_file", "Read a UTF-8 text file inside the workspace.", ReadFileInput, read_file
        ),
        ToolDefinition(
            "write_file",
            "Create or replace a text file inside the workspace (parent folders are created).",
            WriteFileInput,
            write_file,
            effectful=True,
        ),
    )
