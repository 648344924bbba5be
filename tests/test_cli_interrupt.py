"""Ctrl-C during `agent17 run` stops the team and leaves no half state behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from chat_server import ScriptedResponse, answer_with, running_chat_server, text_completion

from agent17 import SqliteTaskStore, TaskStatus
from agent17.agent.models import minimal_scenario_lead_script
from agent17.bootstrap import LEAD_SYSTEM_PROMPT
from agent17.team.mailbox import Mailbox


def _lead_answers_teammates_hang(
    teammate_working: threading.Event, release: threading.Event
) -> Any:
    lead = minimal_scenario_lead_script()

    def respond(body: dict[str, Any]) -> ScriptedResponse:
        messages = body["messages"]
        if messages[0]["content"] != LEAD_SYSTEM_PROMPT:
            # A teammate is mid-task: hold its model call until the test has pressed Ctrl-C.
            teammate_working.set()
            release.wait(timeout=60)
            return text_completion("I was interrupted before finishing.")
        return answer_with(lead, body)

    return respond


def test_ctrl_c_during_a_run_exits_130_and_every_state_file_is_whole(tmp_path: Path) -> None:
    teammate_working = threading.Event()
    release = threading.Event()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AGENT17_MODEL")}
    with running_chat_server(_lead_answers_teammates_hang(teammate_working, release)) as server:
        env["OPENAI_BASE_URL"] = server.url
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent17",
                "run",
                "--prompt",
                "go",
                "--workspace",
                str(tmp_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert teammate_working.wait(timeout=60), "no teammate ever called the model"
            process.send_signal(signal.SIGINT)
            release.set()
            stdout, stderr = process.communicate(timeout=60)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, stdout + stderr
    assert "interrupted" in stderr

    state = tmp_path / ".agent_tutorial"
    for name in ("tasks.sqlite3", "mailbox.sqlite3", "idempotency.sqlite3"):
        with sqlite3.connect(state / name) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with SqliteTaskStore(tmp_path) as store:
        tasks = store.list_tasks()  # also re-checks the whole graph
        claimed = [event for event in store.events() if event.kind.value == "claimed"]
    assert [task.subject for task in tasks] == ["A", "B", "C"]
    assert claimed, "the interrupted teammate had claimed a task"
    # The task it was working on was never completed on its behalf: its lease will expire.
    assert all(task.status is not TaskStatus.COMPLETED for task in tasks)
    for line in (state / "audit.jsonl").read_text().splitlines():
        json.loads(line)  # every audit record is a whole JSON object
    with Mailbox(tmp_path) as mailbox:
        assert all(message.state.value in ("queued", "acked") for message in mailbox.messages())
