"""The `agent17` command: `demo`, `board`, `run` and `teammate`."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn, TextIO

from agent17.armour.paths import STATE_DIRNAME, TASK_DB_NAME
from agent17.domain import Refusal
from agent17.wire import task_payload, utc_wire_time

ENVIRONMENT_HELP = (
    "environment: OPENAI_API_KEY, OPENAI_BASE_URL (any OpenAI-compatible server; with"
    " neither set nothing starts) and AGENT17_MODEL (default gpt-4.1-mini)"
)


def _version() -> str:
    try:
        return metadata.version("agent17")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """A parser whose every usage error is one line on stderr and exit status 2.

    argparse prints its whole usage block before an error; someone who typed one
    wrong value needs the line that names it, and `--help` still prints the rest.
    """

    def __init__(self, **kwargs: Any) -> None:
        # Errors reach parse_known_args below as ArgumentError (the option's name and
        # the problem apart), instead of argparse's ready-made "argument X: ..." text.
        super().__init__(**kwargs, exit_on_error=False)

    def parse_known_args(  # type: ignore[override]  # one signature for every overload
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as error:
            self.error(_sentence(error.argument_name, error.message))

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {_printable(message)}\n")


def _sentence(option: str | None, problem: str) -> str:
    if option is None:
        return problem
    # Our own checks say "must ...": "--max-idle-polls must be a whole number, not '1.5'".
    return f"{option} {problem}" if problem.startswith("must ") else f"{option}: {problem}"


def _printable(text: str) -> str:
    # A value typed with a newline or a terminal escape must not break the one line.
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # float() also takes 'nan' and 'inf'
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}")
    return value


def _path(what: str) -> Callable[[str], Path]:
    def path(text: str) -> Path:
        # Path("") is ".": an empty --workspace (an unset shell variable) would quietly
        # put the board in whatever folder the command was started from.
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must name {what}, not {text!r}")
        return Path(text)

    return path


def _one_of(*choices: str) -> Callable[[str], str]:
    def choose(text: str) -> str:
        if text not in choices:
            listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
            raise argparse.ArgumentTypeError(f"must be {listed}, not {text!r}")
        return text

    return choose


def _prompt(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must say what the Lead should get done, not ''")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agent17",
        description="Work stealing and autonomy: a leased task board (SQLite, or PostgreSQL"
        " for a team on many hosts) and a team that claims work from it by itself.",
    )
    parser.add_argument("--version", action="version", version=f"agent17 {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defaults = argparse.ArgumentDefaultsHelpFormatter

    def where(command: argparse.ArgumentParser, **workspace: Any) -> None:
        command.add_argument("--workspace", type=_path("a folder"), **workspace)
        command.add_argument(
            "--store",
            metavar="URL",
            help="where the board and the team's mailbox live: a postgresql:// URL (teammates"
            " on other hosts join with the same URL); default: the workspace's SQLite files",
        )

    demo = commands.add_parser(
        "demo",
        help="run the chapter's minimal scenario offline (no API key)",
        description="The Lead creates A and B, then C blocked by both; alice and bob claim the"
        " work by themselves, with the scripted model. Without --processes they are threads on"
        " a simulated clock and the story is the same every run; with --processes each is its"
        " own `agent17 teammate` process in real time. Prints the timeline and the checks;"
        " exits 0 when every check holds.",
    )
    where(demo, help="where the board goes (default: a fresh temporary folder)")
    demo.add_argument(
        "--processes", action="store_true", help="run alice and bob as real OS processes"
    )

    board = commands.add_parser(
        "board",
        help="print the task board of a workspace",
        formatter_class=defaults,
        description="Prints the tasks in creation order with status, owner, lease and"
        " dependencies. Never creates a board where there is none.",
    )
    where(board, default=Path("."), help="the workspace")
    board.add_argument(
        "--format",
        type=_one_of("table", "json", "dot"),
        metavar="{table,json,dot}",
        default="table",
        help="table for people; json: the list of task payloads a model sees; dot: Graphviz",
    )
    board.add_argument(
        "--leases",
        action="store_true",
        help="with --format json: each entry is {task, lease_expires_at_utc} (null when no"
        " lease is held) instead of the bare task payload",
    )

    run = commands.add_parser(
        "run",
        help="run a real team through the OpenAI SDK",
        formatter_class=defaults,
        description="A Lead model plans the board and spawns teammates (threads of this"
        " process) that claim work by themselves. Ends when the Lead has answered and no"
        " teammate has work left. Effectful tools ask for approval on this terminal.",
        epilog=ENVIRONMENT_HELP,
    )
    run.add_argument("--prompt", type=_prompt, required=True, help="what the Lead should get done")
    where(run, default=Path("."), help="the workspace")

    teammate = commands.add_parser(
        "teammate",
        help="run ONE teammate as its own OS process on a board",
        formatter_class=defaults,
        description="The idle loop of one teammate: its mailbox first, then the plan gate, then"
        " the first ready task on the board, else a wait that ends early when another process"
        " sends it a message or changes the board. Exits 0 after the shutdown handshake or the"
        " idle timeout (one line says which), 130 on Ctrl-C; a second live teammate with the"
        " same name on the same board is refused.",
        epilog=ENVIRONMENT_HELP + " (with --model openai)",
    )
    teammate.add_argument("--name", required=True, help="the teammate's name, e.g. alice")
    where(teammate, default=Path("."), help="the workspace")
    teammate.add_argument(
        "--model",
        type=_one_of("scripted", "openai"),
        metavar="{scripted,openai}",
        default="scripted",
        help="scripted: offline, completes each task after --work-seconds",
    )
    teammate.add_argument(
        "--poll-interval", type=_seconds, default=5.0, help="seconds between polls when idle"
    )
    teammate.add_argument(
        "--max-idle-polls",
        type=_whole_number,
        default=12,
        help="empty polls in a row before it exits",
    )
    teammate.add_argument(
        "--lease-seconds", type=_seconds, default=300.0, help="the lease of each claim it makes"
    )
    teammate.add_argument(
        "--work-seconds", type=_seconds, default=0.0, help="how long a scripted task takes"
    )
    teammate.add_argument(
        "--start-after-file",
        type=_path("a file"),
        default=None,
        help="wait until this file exists before the first pass (how `demo --processes`"
        " starts its teammates together)",
    )
    return parser


def print_board(
    workspace: Path,
    output_format: str,
    out: TextIO,
    *,
    with_leases: bool = False,
    store: str | None = None,
) -> int:
    """Print the board of `workspace` (or at `store`) without creating one where none exists."""
    from agent17.team.state import BoardOptions
    from agent17.team.workplace import parse_store_url, team_engine

    location = parse_store_url(store)
    engine = team_engine(location)
    if not engine.board_exists(workspace):
        database = workspace / STATE_DIRNAME / TASK_DB_NAME
        where = (
            f"{location.shown()}"
            if location.on_postgres
            else f"{workspace} (looked for {database})"
        )
        print(f"agent17: no task board in {where}", file=sys.stderr)
        return 2
    from agent17.viz.dag import active_leases, board_dot, board_table

    with engine.open_board(workspace, BoardOptions()) as board:
        tasks = board.list_tasks()
        leases = active_leases(board.events())
    if output_format == "json":
        if with_leases:
            entries: list[object] = [
                {
                    "task": task_payload(task),
                    "lease_expires_at_utc": (
                        utc_wire_time(leases[task.id])
                        if task.status == "in_progress" and task.id in leases
                        else None
                    ),
                }
                for task in tasks
            ]
        else:
            entries = [task_payload(task) for task in tasks]
        out.write(json.dumps(entries, indent=2) + "\n")
    elif output_format == "dot":
        out.write(board_dot(tasks, leases=leases))
    else:
        out.write(board_table(tasks, leases=leases) + "\n")
    return 0


def _not_a_folder(path: Path | None) -> bool:
    return path is not None and path.exists() and not path.is_dir()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Named after the subcommand they were given to, not the bare `agent17`.
        parser.exit(
            2, f"agent17 {args.command}: unrecognized arguments: {_printable(' '.join(unknown))}\n"
        )
    # The teammate checks its own; the board only reads (and says when there is none).
    if args.command in ("demo", "run") and _not_a_folder(args.workspace):
        print(
            f"agent17 {args.command}: --workspace {args.workspace} is not a directory",
            file=sys.stderr,
        )
        return 2
    if args.store is not None and args.command != "teammate":
        # Checked before anything is opened or made (the teammate checks its own).
        from agent17.team.workplace import StoreUrlError, parse_store_url

        try:
            parse_store_url(args.store)
        except StoreUrlError as error:
            print(f"agent17 {args.command}: {error}", file=sys.stderr)
            return 2
    try:
        if args.command == "board":
            return print_board(
                args.workspace, args.format, sys.stdout, with_leases=args.leases, store=args.store
            )
        if args.command == "demo":
            if args.processes:
                from agent17.demo_processes import run_process_demo

                return run_process_demo(args.workspace, sys.stdout, store=args.store)
            from agent17.demo import run_demo

            return run_demo(args.workspace, sys.stdout, store=args.store)
        if args.command == "teammate":
            from agent17.teammate_process import TeammateConfig, run_teammate

            config = TeammateConfig(
                name=args.name,
                workspace=args.workspace,
                model=args.model,
                poll_interval_seconds=args.poll_interval,
                max_idle_polls=args.max_idle_polls,
                lease_seconds=args.lease_seconds,
                work_seconds=args.work_seconds,
                start_gate=args.start_after_file,
                environ=dict(os.environ),
                store=args.store,
            )
            return run_teammate(config, sys.stdout, sys.stderr)
        from agent17.live import run_live

        return run_live(args.prompt, args.workspace, dict(os.environ), sys.stdout, store=args.store)
    except Refusal as error:
        print(f"agent17: {error.code}: {error.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("agent17: interrupted; every finished transaction is on disk", file=sys.stderr)
        return 130
