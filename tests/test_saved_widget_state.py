"""A notebook's saved widgets show each widget as the cell that shows it left it, so an unrun
notebook (and its student edition) never shows the answer to a later prediction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
STATE = "application/vnd.jupyter.widget-state+json"


executor = load_script("execute_notebooks")
edition = load_script("student_edition")


def _saved_state(notebook: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = notebook["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    return state


def test_a_widget_is_saved_as_the_cell_that_shows_it_left_it(tmp_path: Path) -> None:
    path = tmp_path / "stepper.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "import ipywidgets\nlog = ipywidgets.HTML('alice: idle')\nlog.value += ' (shown)'\nlog"
        ),
        nbformat.v4.new_markdown_cell("**Predict:** what does alice do next?"),
        nbformat.v4.new_code_cell("log.value = 'alice: claimed C'"),
    ]
    nbformat.write(notebook, path)
    executor.execute(path, timeout=120)
    saved = json.loads(path.read_text(encoding="utf-8"))
    values = [m["state"].get("value") for m in _saved_state(saved).values()]
    assert "alice: idle (shown)" in values
    assert not any("claimed C" in str(value) for value in values)


def _answer_keys(notebook: dict[str, Any]) -> list[str]:
    """Every answer's key phrases (a reveal cell's `answer_key` is a phrase or a list)."""
    keys: list[str] = []
    for cell in notebook["cells"]:
        key = cell.get("metadata", {}).get("agent17", {}).get("answer_key")
        if key is not None:
            keys += [key] if isinstance(key, str) else list(key)
    return keys


COURSE = sorted(NOTEBOOKS.glob("*.ipynb")) + sorted(NOTEBOOKS.glob("extra/*.ipynb"))


@pytest.mark.parametrize("path", COURSE, ids=lambda path: path.name)
def test_no_saved_widget_holds_the_answer_to_a_prediction(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for shown in (notebook, edition.student_notebook(notebook)):
        state = json.dumps(_saved_state(shown), ensure_ascii=False)
        for key in _answer_keys(notebook):
            assert key not in state, f"{path.name}: a saved widget shows {key!r}"


def test_the_idle_loops_saved_steppers_show_their_first_view() -> None:
    notebook = json.loads((NOTEBOOKS / "06_the_idle_loop.ipynb").read_text(encoding="utf-8"))
    assert "protocol_handled shutdown_request" in _answer_keys(notebook)
    state = json.dumps(_saved_state(notebook), ensure_ascii=False)
    assert "<b>bob</b>: idle" in state
    for later in ("shut down", "claimed", "plan_blocked", "this panel is closed"):
        assert later not in state, later
