"""A teammate's hands: shell, read_file and write_file, confined to the workspace.

File paths are resolved with realpath before use, so `..`, absolute paths and
symlinks that lead outside the workspace are all refused the same way, with
`path_outside_workspace`. The board's own files under `.agent_tutorial` are
off limits (`protected_path`): a model must change tasks through the task
tools, never by editing the database. `shell` cannot be confined like this,
which is why it is effectful and, by default, needs approval.

`read_file` reads regular files only (a FIFO would block the run forever, a
device could be endless) and at most `MAX_READ_BYTES` of one: a larger file is
shown by its two ends, with a line saying so. An error of the file system (a
name too long, a permission) is a refusal with a code, never a crash of the run.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any, Final

from pydantic import Field

from agent17.claims import ToolContext
from agent17.domain import preview
from agent17.inputs import RequiredText, StrictInput, Text
from agent17.tools.base import AnyTool, ToolDefinition, ToolError

PROTECTED_DIRECTORY = ".agent_tutorial"
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


def _shown(path: str) -> str:
    return preview(path, 80)  # a model's path can be any length


def _file_system_refusal(path: str, error: OSError, code: str) -> ToolError:
    if error.errno == errno.ENAMETOOLONG:
        return ToolError("invalid_path", f"{_shown(path)}: a name in the path is too long")
    return ToolError(code, f"{_shown(path)}: {error.strerror or error}")


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
        # O_NOFOLLOW: a symlink swapped in after the check must not be followed.
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            descriptor = os.open(target, flags)
        except FileNotFoundError:
            raise ToolError("file_not_found", f"{_shown(args.path)} does not exist") from None
        except OSError as error:
            raise _file_system_refusal(args.path, error, "file_unreadable") from None
        try:
            mode = os.fstat(descriptor).st_mode
            if stat.S_ISDIR(mode):
                raise ToolError("not_a_file", f"{_shown(args.path)} is a directory")
            if not stat.S_ISREG(mode):
                raise ToolError(
                    "not_a_file", f"{_shown(args.path)} is not a regular file (a FIFO or device)"
                )
            file = open(descriptor, "rb")  # noqa: SIM115 - closed by the with below
        except BaseException:
            os.close(descriptor)
            raise
        with file:
            try:
                content = _read_text(file, max_output_chars)
            except OSError as error:
                raise _file_system_refusal(args.path, error, "file_unreadable") from None
        return {"path": target.relative_to(root).as_posix(), "content": content}

    def write_file(args: WriteFileInput, context: ToolContext) -> dict[str, Any]:
        target = resolve_in_workspace(root, args.path)
        try:
            return write(target, args)
        except OSError as error:
            raise _file_system_refusal(args.path, error, "file_unwritable") from None

    def write(target: Path, args: WriteFileInput) -> dict[str, Any]:
        if target == root or target.is_dir():
            raise ToolError("not_a_file", f"{_shown(args.path)} is a directory")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ToolError("not_a_file", f"a parent of {_shown(args.path)} is a file") from None
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
