"""A teammate's hands: shell, read_file and write_file, confined to the workspace.

The file tools find and open a path in one walk beneath the workspace
(`agent17.armour.confined`), so `..`, absolute paths and symlinks that lead
outside are all refused the same way, with `path_outside_workspace`, and a
folder swapped for a symlink halfway through a call cannot redirect it. The
board's own files under `.agent_tutorial` are off limits (`protected_path`): a
model must change tasks through the task tools, never by editing the database.
`shell` cannot be confined like this, which is why it is effectful and, by
default, needs approval; what it can be denied is the teammate's environment:
a command sees only `tool_environment`, never the keys and passwords the
teammate itself was started with, and the process is made non-dumpable before
it runs one (`agent17.armour.own_secrets`), so the command cannot read them in
/proc either.

`read_file` reads regular files only (a FIFO would block the run forever, a
device could be endless) and at most `MAX_READ_BYTES` of one: a larger file is
shown by its two ends, with a line saying so. An error of the file system (a
name too long, a permission) is a refusal with a code, never a crash of the run.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

from pydantic import Field

from agent17.armour.confined import ConfinedRoot, file_system_refusal, shown
from agent17.armour.own_secrets import hide_own_environment
from agent17.claims import ToolContext
from agent17.domain import ToolError, WorkspaceCode
from agent17.inputs import RequiredText, StrictInput, Text
from agent17.tools.base import AnyTool, ToolDefinition

DEFAULT_SHELL_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_OUTPUT_CHARS = 10_000
MAX_READ_BYTES: Final = 1_000_000
"""read_file reads a file whole up to this size; of a larger one, only its two ends."""


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


# What a tool's command inherits, by name: how to find programs, how to show text,
# where its time zone and scratch space are. Nothing else: whatever else the
# teammate was started with (OPENAI_API_KEY, PGPASSWORD, AGENT17_*, a cloud
# token) is the teammate's, and one `env` would show it to the model.
INHERITED_VARIABLES: Final = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")
INHERITED_PREFIXES: Final = ("LC_",)
SECRET_WORDS: Final = ("TOKEN", "KEY", "SECRET", "PASS", "CREDENTIAL")
"""A name with one of these in it, in any case, never passes: `ssh` sends any LC_* along."""


def _inherited(name: str) -> bool:
    allowed = name in INHERITED_VARIABLES or name.startswith(INHERITED_PREFIXES)
    return allowed and not any(word in name.upper() for word in SECRET_WORDS)


def tool_environment(workspace: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a tool's command: `environ`'s allowed names, HOME the workspace."""
    kept = {name: value for name, value in environ.items() if _inherited(name)}
    # HOME too would lead to the teammate's own dot files (~/.pgpass, ~/.netrc, ~/.config).
    return {**kept, "HOME": str(workspace)}


def _read_text(file: IO[bytes], limit: int) -> str:
    """A regular file's text as `truncate_output(text, limit)` shows it, in bounded memory.

    Up to MAX_READ_BYTES the file is read whole. Beyond, only enough bytes at each
    end for the characters shown (UTF-8 takes at most 4 bytes a character).
    """
    data = file.read(MAX_READ_BYTES + 1)
    if len(data) <= MAX_READ_BYTES:
        return truncate_output(data.decode("utf-8", errors="replace"), limit)
    half = limit // 2
    edge = min(4 * half, MAX_READ_BYTES // 2)
    size = os.fstat(file.fileno()).st_size
    file.seek(max(size - edge, 0))
    tail = file.read(edge).decode("utf-8", errors="replace")
    head = data[:edge].decode("utf-8", errors="replace")
    return (
        f"{head[:half]}\n...[a file of {size:,} bytes: only its first and last {half:,}"
        f" characters are shown]...\n{tail[-half:] if half else ''}"
    )


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
    confined = ConfinedRoot(workspace)
    root = confined.root

    def shell(args: ShellInput, context: ToolContext) -> dict[str, Any]:
        hide_own_environment()
        try:
            completed = subprocess.run(
                args.command,
                shell=True,
                cwd=root,
                env=tool_environment(root, os.environ),
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
                WorkspaceCode.SHELL_TIMEOUT,
                f"the command ran longer than {error.timeout:g} seconds",
            ) from None
        except OSError as error:  # no shell to start: the workspace is gone, no processes left
            raise ToolError(
                WorkspaceCode.SHELL_FAILED, f"the command could not start: {error}"
            ) from None
        return {
            "exit_code": completed.returncode,
            "stdout": truncate_output(completed.stdout, max_output_chars),
            "stderr": truncate_output(completed.stderr, max_output_chars),
        }

    def read_file(args: ReadFileInput, context: ToolContext) -> dict[str, Any]:
        descriptor, path = confined.open_to_read(args.path)
        try:
            mode = os.fstat(descriptor).st_mode
            if stat.S_ISDIR(mode):
                raise ToolError(WorkspaceCode.NOT_A_FILE, f"{shown(args.path)} is a directory")
            if not stat.S_ISREG(mode):
                raise ToolError(
                    WorkspaceCode.NOT_A_FILE,
                    f"{shown(args.path)} is not a regular file (a FIFO or device)",
                )
            file = open(descriptor, "rb")  # noqa: SIM115 - closed by the with below
        except BaseException:
            os.close(descriptor)
            raise
        with file:
            try:
                content = _read_text(file, max_output_chars)
            except OSError as error:
                raise file_system_refusal(args.path, error, WorkspaceCode.FILE_UNREADABLE) from None
        return {"path": path, "content": content}

    def write_file(args: WriteFileInput, context: ToolContext) -> dict[str, Any]:
        data = args.content.encode("utf-8")
        return {"path": confined.replace(args.path, data), "bytes_written": len(data)}

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
