"""A core notebook opened in JupyterLab without running it shows its widgets, not an error.

JupyterLab draws a widget output from the state saved in the notebook's metadata
(scripts/execute_notebooks.py writes it); without that state every widget shows
"Error displaying widget: model not found" until the notebook runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser_harness import (  # noqa: F401 (provides the `lab` fixture)
    NOTEBOOK_READY_MS,
    LabSession,
    lab_fixture,
    render_every_cell,
    trust_notebook,
)

REPO = Path(__file__).resolve().parent.parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# A widget view drawn from saved state: the widget manager's node right inside the output
# (marked disconnected until a kernel runs the notebook). A model it cannot find draws
# "Error displaying widget" text instead.
DRAWN_WIDGET = ".jp-OutputArea-output > .jupyter-widgets"


def _view_ids(notebook: dict[str, Any]) -> list[str]:
    return [
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def _saved_state(notebook: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = (
        notebook["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    )
    return state


def _course_notebooks() -> list[Path]:
    folder = REPO / "notebooks"
    return sorted(folder.glob("*.ipynb")) + sorted(folder.glob("extra/*.ipynb"))


@pytest.mark.parametrize("path", _course_notebooks(), ids=lambda path: path.name)
def test_every_widget_output_has_its_state_saved(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    state = _saved_state(notebook)
    missing = [model_id for model_id in _view_ids(notebook) if model_id not in state]
    assert not missing, (
        f"{path.name}: widget outputs without saved state (run scripts/execute_notebooks.py)"
    )


def _widget_notebook() -> Path:
    """The core notebook with the most widget outputs (the stepper's, today)."""
    core = sorted((REPO / "notebooks").glob("*.ipynb"))
    counted = [(len(_view_ids(json.loads(p.read_text(encoding="utf-8")))), p) for p in core]
    count, path = max(counted, key=lambda item: item[0])
    if count == 0:
        pytest.fail("no core notebook has a widget output: nothing to check")
    return path


@pytest.fixture(name="all_cells_drawn")
def all_cells_drawn_fixture(tmp_path: Path) -> None:
    render_every_cell(tmp_path / "home")


@pytest.mark.browser
def test_an_unrun_core_notebook_shows_its_widgets(
    tmp_path: Path, all_cells_drawn: None, lab: LabSession
) -> None:
    source = _widget_notebook()
    notebook = json.loads(source.read_text(encoding="utf-8"))
    views = len(_view_ids(notebook))
    shutil.copy2(source, lab.root_dir / source.name)
    # Its pictures are read from ../assets/, as in the repository.
    shutil.copytree(REPO / "assets", lab.root_dir.parent / "assets", dirs_exist_ok=True)
    trust_notebook(lab.root_dir / source.name, tmp_path / "home")
    lab.open_notebook(source.name)
    page = lab.page
    # Every widget output is drawn by the widget manager: one view area per output.
    # Wait until each widget output is settled, drawn or failed, so a missing state fails
    # at once with the error text rather than at the deadline.
    page.wait_for_function(
        """([views, drawn]) => document.querySelectorAll(drawn).length
            + Array.from(document.querySelectorAll('.jp-OutputArea-output'))
                .filter(node => node.innerText.includes('Error displaying widget')).length
            >= views""",
        arg=[views, DRAWN_WIDGET],
        timeout=NOTEBOOK_READY_MS,
    )
    shown = page.locator(DRAWN_WIDGET).all_inner_texts()
    every_output = page.locator(".jp-OutputArea-output").all_inner_texts()
    lab.screenshot(f"unrun_widgets_{source.stem}.png")
    assert len(shown) == views
    assert not any("Error displaying widget" in text for text in every_output)
    # Nothing ran: the notebook was opened, not executed.
    counts = page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
            .filter(cell => cell.model.type === 'code')
            .map(cell => cell.model.executionCount)"""
    )
    saved = [c.get("execution_count") for c in notebook["cells"] if c["cell_type"] == "code"]
    assert counts == saved
    # The buttons are there (inert until the kernel runs the notebook).
    assert page.locator(".widget-button").count() > 0
