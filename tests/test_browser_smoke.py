"""The harness works: JupyterLab in headless Chromium runs a notebook and a widget click lands."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser_harness import (  # noqa: F401 (provides the `lab` fixture)
    LabSession,
    free_port,
    isolated_env,
    lab_fixture,
)

REPO = Path(__file__).resolve().parent.parent
# Setup runs first (quick when done; a first install takes longer), then the server.
LAB_SH_DEADLINE_SECONDS = 180.0

SMOKE_CELLS = [
    """import ipywidgets as widgets
from dataclasses import replace

from agent17 import Task, TaskStatus
from agent17.viz import board_digraph

tasks = [Task("00000000-0000-4000-8000-001700000001", "A", "", TaskStatus.PENDING, None, ())]""",
    """button = widgets.Button(description="alice claims A")
status = widgets.Label(value="A is pending")
picture = widgets.Output()


def show() -> None:
    picture.outputs = ()
    picture.append_display_data(board_digraph(tasks))


def claim(_: object) -> None:
    tasks[0] = replace(tasks[0], status=TaskStatus.IN_PROGRESS, owner="alice")
    status.value = "alice holds A"
    show()


button.on_click(claim)
show()
widgets.VBox([button, status, picture])""",
]


def write_smoke_notebook(folder: Path) -> str:
    """A two-cell notebook: a Button that claims A, a Label, and the board in an Output."""
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            }
        },
        "cells": [
            {
                "cell_type": "code",
                "id": f"smoke-{index}",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": source,
            }
            for index, source in enumerate(SMOKE_CELLS)
        ],
    }
    (folder / "smoke.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return "smoke.ipynb"


@pytest.mark.browser
def test_clicking_a_widget_button_in_jupyterlab_redraws_the_board(lab: LabSession) -> None:
    lab.open_notebook(write_smoke_notebook(lab.root_dir))
    lab.run_all_cells()
    lab.wait_for_text("A is pending")
    before = lab.output_svg()
    assert "READY" in before
    assert "alice" not in before

    lab.click_button("alice claims A")
    lab.wait_for_text("alice holds A")
    lab.page.wait_for_function(
        """() => [...document.querySelectorAll(
            ".widget-output [data-mime-type='image/svg+xml'] img")]
            .some(img => decodeURIComponent(img.src).includes('in_progress · alice'))""",
        timeout=30_000,
    )
    after = lab.output_svg()
    assert "in_progress · alice" in after
    assert "#c6e5f7" in after  # the in_progress fill
    assert lab.error_outputs() == []
    assert lab.screenshot("browser_smoke.png").stat().st_size > 0


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _wait_for_url(process: subprocess.Popen[bytes], log: Path, pattern: str) -> str:
    deadline = time.monotonic() + LAB_SH_DEADLINE_SECONDS
    while True:
        text = log.read_text(encoding="utf-8", errors="replace")
        found = re.search(pattern, text)
        if found:
            return found.group(0)
        if process.poll() is not None:
            raise AssertionError(
                f"scripts/lab.sh exited with {process.returncode}:\n{text[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"no server URL from scripts/lab.sh in time:\n{text[-3000:]}")
        time.sleep(0.2)  # polling a real process's log, not ordering test events


@pytest.mark.processes
def test_lab_sh_opens_the_course_without_news_question_update_check_or_pypi(
    tmp_path: Path,
) -> None:
    port, token = free_port(), secrets.token_hex(16)
    # Its own HOME and Jupyter folders: nothing of this machine's setup is read or changed.
    env = isolated_env(tmp_path / "home")
    env["AGENT17_COURSE_DIR"] = str(tmp_path / "course")  # the student edition it opens
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                "bash",
                str(REPO / "scripts" / "lab.sh"),
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--port-retries=0",
                f"--IdentityProvider.token={token}",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group: setup's children and the server
        )
    try:
        _wait_for_url(process, log, rf"http://127\.0\.0\.1:{port}/lab\?token=")
        base = f"http://127.0.0.1:{port}"
        served = _get_json(f"{base}/api/contents/notebooks?token={token}")
        names = {item["name"] for item in served["content"]}
        assert {"01_the_race.ipynb", "07_the_whole_team.ipynb", "glossary.md"} <= names

        notification = _get_json(
            f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        )
        defaults = notification["schema"]["properties"]
        assert defaults["fetchNews"]["default"] == "false"  # JupyterLab's own default asks
        assert defaults["checkForUpdates"]["default"] is False
        assert notification["raw"] == "{}"  # nothing was written to the user's settings
        assert _get_json(f"{base}/lab/api/news?token={token}") == {"news": []}
        assert _get_json(f"{base}/lab/api/update?token={token}") == {"notification": None}

        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as response:
            page = response.read().decode("utf-8")
        found = re.search(
            r'id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S
        )
        assert found is not None, "the lab page carries no page config"
        config = json.loads(found.group(1))
        assert config["extensionManager"]["name"] == "read-only"
        assert config["news"] == {"disabled": True}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
