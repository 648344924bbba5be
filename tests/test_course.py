"""The class's estimate (scripts/class_minutes.py) on small notebooks built here."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


minutes = _load("class_minutes")


def md(text: str, *tags: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {"tags": list(tags)}, "source": text}


def code(text: str, *outputs: dict[str, Any], tags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "source": text,
        "outputs": list(outputs),
        "execution_count": None,
    }


def words(n: int) -> str:
    return " ".join(["word"] * n)


def write(path: Path, *cells: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4}))
    return path


def test_prose_code_and_outputs_at_their_own_pace() -> None:
    stream = {"output_type": "stream", "name": "stdout", "text": words(300)}
    est = minutes.estimate_cells("n", [md(words(200)), code(words(150), stream)])
    assert (est.prose_words, est.code_words, est.output_words) == (200, 150, 300)
    assert est.exact_minutes == 3.0
    assert est.minutes == 3


def test_minutes_round_up() -> None:
    assert minutes.estimate_cells("n", [md(words(201))]).minutes == 2
    assert minutes.estimate_cells("n", []).minutes == 0


def test_optional_and_homework_cells_count_nothing_but_reveal_cells_do() -> None:
    stream = {"output_type": "stream", "name": "stdout", "text": words(300)}
    cells = [
        md("**Predict:** " + words(400), "optional"),
        code("check('x', x)", stream, tags=("homework",)),
        code(words(150), stream, tags=("reveal",)),
    ]
    est = minutes.estimate_cells("n", cells)
    assert (est.predictions, est.checks, est.prose_words) == (0, 0, 0)
    assert est.exact_minutes == 2.0


def test_a_prediction_is_a_line_starting_with_bold_predict() -> None:
    cells = [
        md("**Predict:** what happens?"),
        md("Some text.\n\n**Predict:** and now?\n\n**Predict**: and then?"),
        md("We do not predict here, and *Predict* in italics is not one."),
    ]
    assert minutes.estimate_cells("n", cells).predictions == 3


def test_an_exercise_check_is_a_cell_calling_check_or_check_quiz() -> None:
    cells = [
        code('check("claim_one", claim_one)'),
        code("exercises.check('a', a)\ncheck('a', a)"),  # one cell, one check
        code("check_quiz(answers)"),
        code("checks = [1]\nrecheck(x)\nprint('check(')"),  # none of these
        code("%time check('b', b)"),  # the magic line is dropped before parsing
    ]
    assert minutes.estimate_cells("n", cells).checks == 3


def test_pictures_and_widgets_are_free_html_is_read_without_tags() -> None:
    picture = {
        "output_type": "display_data",
        "data": {"image/svg+xml": words(999), "text/plain": words(999)},
    }
    widget = {
        "output_type": "display_data",
        "data": {"application/vnd.jupyter.widget-view+json": {}, "text/plain": words(999)},
    }
    table = {
        "output_type": "execute_result",
        "data": {"text/html": "<table><tr><td>a b</td><td>c</td></tr></table>", "text/plain": "x"},
    }
    error = {"output_type": "error", "ename": "TaskError", "evalue": "not_owner: x"}
    est = minutes.estimate_cells("n", [code("", picture, widget, table, error)])
    assert est.output_words == 3 + 3


def test_markdown_code_blocks_are_code_and_links_are_their_text() -> None:
    text = "See [the glossary](glossary.md#wal) ![a picture](x.svg)\n\n"
    text += "```sql\nSELECT id FROM tasks\n```\n"
    assert minutes.split_markdown(text) == (3, 6)  # ``` and ```sql count as code words too


def test_check_exits_nonzero_over_ninety_minutes(tmp_path: Path, monkeypatch: Any) -> None:
    folder = tmp_path / "notebooks"
    (folder / "extra").mkdir(parents=True)
    write(folder / "01_a.ipynb", md(words(200 * 50)))
    write(folder / "02_b.ipynb", md(words(200 * 40)))
    write(folder / "extra" / "08_c.ipynb", md(words(200 * 60)))
    monkeypatch.setattr(minutes, "NOTEBOOKS", folder)
    monkeypatch.setattr(minutes, "core_notebooks", lambda: sorted(folder.glob("*.ipynb")))
    monkeypatch.setattr(minutes, "extra_notebooks", lambda: sorted(folder.glob("extra/*.ipynb")))
    assert minutes.main(["--check"]) == 0  # 90 exactly; extra/ is not in the total
    write(folder / "02_b.ipynb", md(words(200 * 40 + 1)))
    assert minutes.main(["--check"]) == 1
    assert minutes.main([]) == 0  # without --check it only reports


def test_bad_input_has_a_code(tmp_path: Path, capsys: Any) -> None:
    assert minutes.main([str(tmp_path / "missing.ipynb")]) == 2
    assert "missing_notebook" in capsys.readouterr().err
    (tmp_path / "bad.ipynb").write_text("{not json")
    assert minutes.main([str(tmp_path / "bad.ipynb")]) == 2
    assert "bad_notebook" in capsys.readouterr().err
    (tmp_path / "x.ipynb").write_text('{"metadata": {}}')
    with pytest.raises(minutes.EstimateError) as caught:
        minutes.estimate(tmp_path / "x.ipynb")
    assert caught.value.code == "bad_notebook"
    assert minutes.estimate(write(tmp_path / "empty.ipynb")).minutes == 0


executor = _load("execute_notebooks")
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


def _model(name: str, **state: Any) -> dict[str, Any]:
    return {"model_name": name, "state": {"_model_name": name, **state}}


def _widget_notebook(view_ids: list[str], state: dict[str, Any]) -> dict[str, Any]:
    cells = [
        code("w", {"output_type": "display_data", "data": {VIEW: {"model_id": mid}}})
        for mid in view_ids
    ]
    return {"cells": cells, "metadata": {"widgets": {STATE: {"state": state}}}}


def test_saved_widget_state_keeps_what_outputs_reach_under_stable_ids() -> None:
    state = {
        "b0x": _model("VBoxModel", children=["IPY_MODEL_btn"], layout="IPY_MODEL_lay"),
        "btn": _model("ButtonModel", layout="IPY_MODEL_lay2"),
        "lay": _model("LayoutModel"),
        "lay2": _model("LayoutModel"),
        "closed": _model("LayoutModel"),  # made and dropped by the kernel: no output names it
    }
    nb = _widget_notebook(["b0x"], state)
    assert executor.stabilise(nb, "07_x.ipynb") == 4
    saved = nb["metadata"]["widgets"][STATE]["state"]
    ids = [executor.stable_id("07_x.ipynb", index) for index in range(4)]
    assert list(saved) == ids  # the box, then depth first: its child, the child's layout, its own
    assert nb["cells"][0]["outputs"][0]["data"][VIEW]["model_id"] == ids[0]
    assert saved[ids[0]]["state"]["children"] == [f"IPY_MODEL_{ids[1]}"]
    assert saved[ids[1]]["state"]["layout"] == f"IPY_MODEL_{ids[2]}"
    assert saved[ids[0]]["state"]["layout"] == f"IPY_MODEL_{ids[3]}"
    # Other random ids, same shapes: the same file.
    again = _widget_notebook(
        ["q"],
        {
            "q": _model("VBoxModel", children=["IPY_MODEL_r"], layout="IPY_MODEL_s"),
            "r": _model("ButtonModel", layout="IPY_MODEL_t"),
            "s": _model("LayoutModel"),
            "t": _model("LayoutModel"),
        },
    )
    executor.stabilise(again, "07_x.ipynb")
    assert again == nb


def test_an_output_naming_an_unsaved_model_is_an_error() -> None:
    nb = _widget_notebook(["gone"], {})
    with pytest.raises(executor.WidgetStateError) as caught:
        executor.stabilise(nb, "n.ipynb")
    assert caught.value.code == "missing_widget_state"


def test_no_widget_output_no_widget_metadata_and_streams_joined() -> None:
    out = {"output_type": "stream", "name": "stdout"}
    nb: dict[str, Any] = {
        "cells": [code("x", {**out, "text": "a\n"}, {**out, "text": ["b\n"]})],
        "metadata": {"widgets": {STATE: {"state": {"x": _model("LayoutModel")}}}},
    }
    assert executor.stabilise(nb, "n.ipynb") == 0
    assert "widgets" not in nb["metadata"]
    executor.coalesce_streams(nb)
    assert nb["cells"][0]["outputs"] == [{**out, "text": "a\nb\n"}]


def test_the_teachers_guide_has_the_scripts_minutes() -> None:
    core = [minutes.estimate(path) for path in minutes.core_notebooks()]
    extra = [minutes.estimate(path) for path in minutes.extra_notebooks()]
    guide = minutes.GUIDE.read_text(encoding="utf-8")
    block = minutes.guide_block(core, extra)
    assert block in guide, "run: .venv/bin/python scripts/class_minutes.py --guide"
    assert minutes.guide_with_block(guide, block) == guide


def test_the_guide_table_is_found_or_a_coded_error() -> None:
    est = minutes.estimate_cells("01_a.ipynb", [md(words(400))])
    block = minutes.guide_block([est], [])
    assert "| [01_a](../notebooks/01_a.ipynb) | 2 |" in block
    assert "| **core class** | **2** |" in block
    text = f"intro\n{minutes.GUIDE_START}\nold\n{minutes.GUIDE_END}\nrest\n"
    assert minutes.guide_with_block(text, block) == f"intro\n{block}\nrest\n"
    with pytest.raises(minutes.EstimateError) as caught:
        minutes.guide_with_block("no table here", block)
    assert caught.value.code == "no_guide_table"


NOTEBOOKS = ROOT / "notebooks"
_LINK = re.compile(r"\]\(((?:\.\./)?(?:glossary|sqlite_primer)\.md)(?:#([^)\s]*))?\)")
_ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')


def _anchors(name: str) -> set[str]:
    return set(_ANCHOR.findall((NOTEBOOKS / name).read_text(encoding="utf-8")))


def test_glossary_and_primer_have_one_anchor_per_term() -> None:
    for name in ("glossary.md", "sqlite_primer.md"):
        text = (NOTEBOOKS / name).read_text(encoding="utf-8")
        found = _ANCHOR.findall(text)
        assert len(found) == len(set(found)) > 5, f"{name}: duplicate or too few anchors"


def _course_texts() -> list[tuple[Path, str]]:
    texts = []
    for path in sorted(NOTEBOOKS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
        texts.append((path, "\n".join(markdown)))
    texts += [(path, path.read_text(encoding="utf-8")) for path in sorted(NOTEBOOKS.glob("*.md"))]
    return texts


def test_every_glossary_and_primer_link_lands_on_an_anchor() -> None:
    broken = []
    for path, text in _course_texts():
        for target, anchor in _LINK.findall(text):
            if (path.parent / target).resolve() != NOTEBOOKS / Path(target).name:
                broken.append(f"{path.name}: {target} (wrong folder)")
            elif anchor and anchor not in _anchors(Path(target).name):
                broken.append(f"{path.name}: {target}#{anchor}")
    assert not broken, broken


@pytest.mark.parametrize(
    "notebook", sorted((Path(__file__).parent.parent / "notebooks").glob("0*.ipynb")), ids=str
)
def test_a_notebook_that_offers_show_solution_imports_it(notebook: Path) -> None:
    # The prose tells a student to call show_solution(...) once a check passes: a
    # NameError there would be the first thing they see after their success.
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    code = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    if "show_solution(" in text:
        assert re.search(r"from agent17\.exercises import [^\n]*\bshow_solution\b", code)
