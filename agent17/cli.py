"""The `agent17` command: `demo`, `board` and `run`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from agent17.domain import TaskError
from agent17.store.paths import STATE_DIRNAME, TASK_DB_NAME
from agent17.store.sqlite import SqliteTaskStore
from agent17.wire import task_payload


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent17",
        description="Work stealing and autonomy: a leased SQLite task board and a team that "
        "claims work from it.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="run the minimal scenario offline with the scripted model"
    )
    demo.add_argument("--workspace", type=Path, help="default: a fresh temporary directory")

    board = commands.add_parser("board", help="print the task board of a workspace")
    board.add_argument("--workspace", type=Path, default=Path("."))
    board.add_argument("--format", choices=("table", "json", "dot"), default="table")

    run = commands.add_parser("run", help="run a real team through the OpenAI SDK")
    run.add_argument("--prompt", required=True, help="what the Lead should get done")
    run.add_argument("--workspace", type=Path, default=Path("."))
    return parser


def print_board(workspace: Path, output_format: str, out: TextIO) -> int:
    """Print the board of `workspace` without creating one where none exists."""
    database = workspace / STATE_DIRNAME / TASK_DB_NAME
    if not database.exists():
        print(f"agent17: no task board in {workspace} (looked for {database})", file=sys.stderr)
        return 2
    from agent17.viz.dag import board_dot, board_table

    with SqliteTaskStore(workspace) as store:
        tasks = store.list_tasks()
    if output_format == "json":
        out.write(json.dumps([task_payload(task) for task in tasks], indent=2) + "\n")
    elif output_format == "dot":
        out.write(board_dot(tasks))
    else:
        out.write(board_table(tasks) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "board":
            return print_board(args.workspace, args.format, sys.stdout)
        if args.command == "demo":
            from agent17.demo import run_demo

            return run_demo(args.workspace, sys.stdout)
        from agent17.live import run_live

        return run_live(args.prompt, args.workspace, dict(os.environ), sys.stdout)
    except TaskError as error:
        print(f"agent17: {error.code}: {error.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agent17: interrupted; every finished transaction is on disk", file=sys.stderr)
        return 130
