"""The harness works: JupyterLab in headless Chromium runs a notebook and a widget click lands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_harness import LabSession, lab_fixture  # noqa: F401 (provides the `lab` fixture)

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
