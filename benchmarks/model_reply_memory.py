"""How much memory a model server's long answer takes, and how much of it goes on.

A chat server on 127.0.0.1 (tests/chat_server.py) answers with a text of N
characters, made as it is sent, through the real `openai` SDK.

a) In this process, each answer fetched twice in the same run: the baseline
   reads the body whole and parses it (what OpenAIModel did before its reply was
   bounded: `with_raw_response`, `.text`, `json.loads`), then OpenAIModel.complete
   reads it through ReplyReader. Printed: Python's peak allocation during each
   (tracemalloc), the length of the answer each ends with, their ratio.
b) A whole `agent17 teammate --model openai` process that claims a task and gets
   a 50-million-character answer: its peak RSS, its longest log line, the length
   of its report in the Lead's mailbox. With `--compare-with PATH` the same
   process runs again with the agent17 of another checkout first on PYTHONPATH.

    .venv/bin/python benchmarks/model_reply_memory.py
    .venv/bin/python benchmarks/model_reply_memory.py --sizes 200000000
    git worktree add /tmp/agent17-old <commit>
    .venv/bin/python benchmarks/model_reply_memory.py --compare-with /tmp/agent17-old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chat_server import (
    ChatServer,
    always,
    long_text_completion,
    running_chat_server,
    text_completion,
)

from agent17 import Mailbox, SqliteTaskStore
from agent17.agent.openai_model import OpenAIModel

MESSAGES = [{"role": "user", "content": "hi"}]
PROCESS_ANSWER = 50_000_000


def peak(fetch: Callable[[], str]) -> tuple[int, int]:
    """Python's peak allocation while `fetch` runs, and the length of the answer it returns."""
    tracemalloc.start()
    try:
        answer = fetch()
        return tracemalloc.get_traced_memory()[1], len(answer)
    finally:
        tracemalloc.stop()


def in_process(sizes: list[int]) -> None:
    """Part (a): one row per size, both peaks, both answers' lengths, the ratio."""
    with running_chat_server() as server:
        client = openai.OpenAI(base_url=server.url, api_key="benchmark", max_retries=0)
        model = OpenAIModel("m", client)

        def whole() -> str:
            raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
            return str(json.loads(raw.text)["choices"][0]["message"]["content"])

        def bounded() -> str:
            return model.complete(MESSAGES, ()).text or ""

        server.respond_with(text_completion("warm"), text_completion("warm"))
        whole(), bounded()  # both paths' first-call imports, before measuring
        print("a) in this process")
        print(f"{'answer':>14} | {'read whole: peak':>17} {'kept':>12} | {'OpenAIModel: peak':>18}"
              f" {'kept':>8} | whole / bounded")  # fmt: skip
        for size in sizes:
            server.respond_with(long_text_completion(size), long_text_completion(size))
            whole_peak, whole_kept = peak(whole)
            bounded_peak, bounded_kept = peak(bounded)
            print(f"{size:>14,} | {whole_peak:>17,} {whole_kept:>12,} | {bounded_peak:>18,}"
                  f" {bounded_kept:>8,} | {whole_peak / bounded_peak:.1f}")  # fmt: skip


def teammate_process(server: ChatServer, agent17_root: Path | None) -> str:
    """Part (b): one teammate process's peak RSS, longest log line and report, as a row."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    environment |= {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "benchmark"}
    if agent17_root is not None:
        # PYTHONPATH comes before site-packages and the editable install's finder.
        environment["PYTHONPATH"] = str(agent17_root)
    with tempfile.TemporaryDirectory() as workspace:
        with SqliteTaskStore(workspace) as store:
            store.create_task("A", "Do A.")
        # A fresh interpreter, so RUSAGE_CHILDREN's peak is the teammate's alone.
        measured = subprocess.run(
            [sys.executable, "-c", _MEASURE, workspace], env=environment, capture_output=True,
            text=True, stdin=subprocess.DEVNULL, check=True, cwd=workspace,  # not this checkout
        )  # fmt: skip
        with Mailbox(workspace) as mailbox:
            (report,) = mailbox.messages("lead")
    rss, longest, source = measured.stdout.split()
    if agent17_root is not None and not Path(source).is_relative_to(agent17_root):
        raise SystemExit(f"--compare-with: the teammate imported agent17 from {source}")
    shown = "this checkout" if agent17_root is None else agent17_root.name
    return f"{int(rss):>12,} kB | {int(longest):>16,} | {len(report.body):>12,} | {shown}"


_MEASURE = """
import resource, subprocess, sys
import agent17
done = subprocess.run(
    [sys.executable, "-m", "agent17", "teammate", "--name", "alice", "--workspace", sys.argv[1],
     "--model", "openai", "--poll-interval", "0.2", "--max-idle-polls", "1"],
    capture_output=True, text=True, stdin=subprocess.DEVNULL,
)
assert done.returncode == 0, done.stderr
longest = max(len(line) for line in done.stdout.splitlines())
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, longest, agent17.__file__)
"""


def main() -> None:
    """Parse the options; run part (a), then part (b) for this checkout and any other."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000, 50_000_000])
    parser.add_argument("--compare-with", type=Path, help="another checkout of agent17")
    args = parser.parse_args()
    in_process(args.sizes)
    print(f"\nb) an agent17 teammate process whose model answers {PROCESS_ANSWER:,} characters")
    print(f"{'peak RSS':>15} | {'longest log line':>16} | {'report':>12} | agent17")
    with running_chat_server(always(long_text_completion(PROCESS_ANSWER))) as server:
        print(teammate_process(server, None))
        if args.compare_with is not None:
            print(teammate_process(server, args.compare_with.resolve()))


if __name__ == "__main__":
    main()
