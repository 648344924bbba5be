"""The class's estimate (scripts/class_minutes.py) on small notebooks built here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


minutes = load_script("class_minutes")


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
    assert est.exact_minutes == 1 + 3.0  # a minute to open the notebook
    assert est.minutes == 4


def test_minutes_round_up_and_opening_a_notebook_takes_one() -> None:
    assert minutes.estimate_cells("n", [md(words(201))]).minutes == 3
    assert minutes.estimate_cells("n", []).minutes == 1


def test_optional_and_homework_cells_count_nothing_but_reveal_cells_do() -> None:
    stream = {"output_type": "stream", "name": "stdout", "text": words(300)}
    cells = [
        md("**Predict:** " + words(400), "optional"),
        code("check('x', x)", stream, tags=("homework",)),
        code(words(150), stream, tags=("reveal",)),
    ]
    est = minutes.estimate_cells("n", cells)
    assert (est.predictions, est.checks, est.prose_words) == (0, 0, 0)
    assert est.exact_minutes == 1 + 2.0


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


def test_the_claim_written_from_the_ground_up_takes_nine_minutes_a_check_four() -> None:
    ground_up = minutes.estimate_cells("n", [code('check("claim_one", claim_one)')])
    assert (ground_up.checks, ground_up.ground_up_checks) == (1, 1)
    assert ground_up.exact_minutes == round(1 + 9 + 2 / 150, 2)
    other = minutes.estimate_cells("n", [code('check("take_if_pending", f)')])
    assert (other.checks, other.ground_up_checks) == (1, 0)
    assert other.exact_minutes == round(1 + 4 + 2 / 150, 2)
    named = minutes.estimate_cells("n", [code("check(name, claim_one)")])  # not a literal name
    assert named.ground_up_checks == 0


def test_pictures_and_widgets_take_half_a_minute_html_is_read_without_tags() -> None:
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
    assert est.pictures == 2
    assert est.exact_minutes == round(1 + 6 / 300 + 2 * 0.5, 2)
    drawn = minutes.estimate_cells(
        "n", [md("![the loop](../assets/idle_loop.svg) <img src='x.png'>")]
    )
    assert (drawn.pictures, drawn.prose_words) == (2, 0)


def test_markdown_code_blocks_are_code_and_links_are_their_text() -> None:
    text = "See [the glossary](glossary.md#wal) ![a picture](x.svg)\n\n"
    text += "```sql\nSELECT id FROM tasks\n```\n"
    assert minutes.split_markdown(text) == (3, 6)  # ``` and ```sql count as code words too


def test_check_exits_nonzero_over_ninety_minutes(tmp_path: Path, monkeypatch: Any) -> None:
    folder = tmp_path / "notebooks"
    (folder / "extra").mkdir(parents=True)
    write(folder / "01_a.ipynb", md(words(200 * 49)))  # and a minute to open each
    write(folder / "02_b.ipynb", md(words(200 * 39)))
    write(folder / "extra" / "08_c.ipynb", md(words(200 * 60)))
    monkeypatch.setattr(minutes, "NOTEBOOKS", folder)
    monkeypatch.setattr(minutes, "core_notebooks", lambda: sorted(folder.glob("*.ipynb")))
    monkeypatch.setattr(minutes, "extra_notebooks", lambda: sorted(folder.glob("extra/*.ipynb")))
    assert minutes.main(["--check"]) == 0  # 90 exactly; extra/ is not in the total
    write(folder / "02_b.ipynb", md(words(200 * 39 + 1)))
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
    assert minutes.estimate(write(tmp_path / "empty.ipynb")).minutes == 1


executor = load_script("execute_notebooks")
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
    assert "| [01_a](../notebooks/01_a.ipynb) | 3 |" in block
    assert "| **core class** | **3** |" in block
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
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    if "show_solution(" in text:
        assert re.search(r"from agent17\.exercises import [^\n]*\bshow_solution\b", code)


# No answer before its question. Each prediction's answer cell carries its key phrase in
# its metadata, `"agent17": {"answer_key": "..."}` (or a list of phrases): the first such
# cell after the prediction is its answer (scripts/class_minutes.py's docstring says how
# to write one). The check runs over each core notebook as a student meets it: committed
# sources and outputs, the saved widget state of the student edition, and the glossary or
# primer entries that an earlier cell links to.

edition = load_script("student_edition")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_MODEL_REFERENCE = re.compile(r"IPY_MODEL_([0-9A-Za-z_-]+)")


def _normal(text: str) -> str:
    """Lower case, one space, no Markdown emphasis or code marks: `**claim**` reads "claim"."""
    return " ".join(re.sub(r"[*`]", "", text).lower().split())


def _entries(name: str) -> dict[str, str]:
    """A glossary's (or the primer's) entries by anchor; "" is the whole page."""
    text = (NOTEBOOKS / name).read_text(encoding="utf-8")
    parts = _ANCHOR.split(text)
    entries = {"": text}
    entries.update(zip(parts[1::2], parts[2::2], strict=True))
    return entries


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _output_texts(output: dict[str, Any]) -> list[str]:
    """What an output shows: its text, its HTML and its SVG (a picture's labels are read)."""
    texts = _strings({k: v for k, v in output.items() if k in ("text", "ename", "evalue")})
    data = output.get("data", {})
    texts += _strings({mime: value for mime, value in data.items() if mime != WIDGET_VIEW})
    return texts


def _widget_texts(output: dict[str, Any], state: dict[str, Any]) -> list[str]:
    """The saved state of the widget an output shows, and of every model it names."""
    view = output.get("data", {}).get(WIDGET_VIEW)
    todo = [view["model_id"]] if isinstance(view, dict) else []
    seen: set[str] = set()
    texts: list[str] = []
    while todo:
        model = todo.pop()
        if model in seen or model not in state:
            continue
        seen.add(model)
        strings = _strings(state[model].get("state", {}))
        texts += strings
        todo += [ref for text in strings for ref in _MODEL_REFERENCE.findall(text)]
    return texts


def _shown(cell: dict[str, Any], state: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, text) for everything a cell shows a student, links followed one step."""
    source = "".join(cell["source"])
    if cell["cell_type"] == "markdown":
        shown = [("its text", source)]
        for target, anchor in _LINK.findall(source):
            entry = _entries(Path(target).name).get(anchor, "")
            shown.append((f"the entry it links, {Path(target).name}#{anchor}", entry))
        return shown
    shown = [("its code", source)]
    for output in cell.get("outputs", []):
        shown += [("its output", text) for text in _output_texts(output)]
        shown += [("its widget's saved state", text) for text in _widget_texts(output, state)]
    return shown


def answer_problems(name: str, notebook: dict[str, Any]) -> list[str]:
    """Every prediction of `notebook` whose answer is missing, untagged or given before it."""
    cells = notebook["cells"]
    widgets = edition.student_notebook(notebook).get("metadata", {}).get("widgets", {})
    state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    asked = [
        (index, line.strip())
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        for line in "".join(cell["source"]).splitlines()
        if minutes._PREDICT.match(line)
    ]
    problems = []
    for number, (index, line) in enumerate(asked, 1):
        label = f"{name}, prediction {number} (cell {index}: {line[:70]!r})"
        after = [i for i, _ in asked if i > index]
        if index in (i for i, _ in asked[number:]):
            problems.append(f"{label}: one prediction per cell, so that each has its answer")
            continue
        region = range(index + 1, after[0] if after else len(cells))
        keyed = [i for i in region if "answer_key" in cells[i]["metadata"].get("agent17", {})]
        if not keyed:
            problems.append(
                f"{label}: no answer cell before the next prediction; tag it `reveal` and give"
                ' it the metadata "agent17": {"answer_key": "<a phrase only the answer says>"}'
            )
            continue
        answer = cells[keyed[0]]
        key = answer["metadata"]["agent17"]["answer_key"]
        keys = [key] if isinstance(key, str) else list(key)
        if "reveal" not in answer["metadata"].get("tags", []):
            problems.append(f"{label}: its answer, cell {keyed[0]}, is not tagged `reveal`")
        said = _shown(answer, state)
        if answer["cell_type"] == "code":
            # The code of an answer is on the page before it runs; only its output answers.
            before = [(f"cell {keyed[0]}, {where}", text) for where, text in said[:1]]
            said = said[1:]
        else:
            before = []
        before += [
            (f"cell {i}, {where}", text)
            for i in range(keyed[0])
            for where, text in _shown(cells[i], state)
        ]
        for phrase in keys:
            if not any(_normal(phrase) in _normal(text) for _, text in said):
                problems.append(f"{label}: its answer, cell {keyed[0]}, does not say {phrase!r}")
            problems += [
                f"{label}: its answer {phrase!r} is already in {where}"
                for where, text in before
                if _normal(phrase) in _normal(text)
            ]
    return problems


@pytest.mark.parametrize("notebook", minutes.core_notebooks(), ids=lambda path: path.name)
def test_no_answer_comes_before_its_question(notebook: Path) -> None:
    problems = answer_problems(notebook.name, json.loads(notebook.read_text(encoding="utf-8")))
    assert not problems, "\n".join(problems)


def _asked(*before: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    cells = [*before, md("**Predict:** does bob's UPDATE go through?"), answer]
    return answer_problems("n.ipynb", {"cells": cells, "metadata": {}})


def _keyed(cell: dict[str, Any], key: str | list[str]) -> dict[str, Any]:
    cell["metadata"]["agent17"] = {"answer_key": key}
    return cell


def _stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_an_answer_said_only_by_its_reveal_cell_passes() -> None:
    answer = _keyed(
        code("run()", _stream("SQLITE_BUSY_SNAPSHOT"), tags=("reveal",)), "busy_snapshot"
    )
    assert _asked(md("# Goals\n1. say what plain BEGIN does"), answer=answer) == []


@pytest.mark.parametrize(
    ("before", "where"),
    [
        (md("1. show that bob's write fails with `SQLITE_BUSY_SNAPSHOT`"), "cell 0, its text"),
        (md("## Why SQLITE_BUSY_SNAPSHOT"), "cell 0, its text"),
        (
            md("a [snapshot](glossary.md#snapshot)"),
            "cell 0, the entry it links, glossary.md#snapshot",
        ),
        (code("print('x')", _stream("sqlite_busy_snapshot\n")), "cell 0, its output"),
    ],
)
def test_an_answer_in_a_goal_heading_link_or_output_before_it_fails(
    before: dict[str, Any], where: str
) -> None:
    answer = _keyed(md("(c), `SQLITE_BUSY_SNAPSHOT`", "reveal"), "SQLITE_BUSY_SNAPSHOT")
    problems = _asked(before, answer=answer)
    assert problems == [
        'n.ipynb, prediction 1 (cell 1: "**Predict:** does bob\'s UPDATE go through?"):'
        f" its answer 'SQLITE_BUSY_SNAPSHOT' is already in {where}"
    ]


def test_an_answer_in_the_saved_state_of_an_earlier_widget_fails() -> None:
    view = {"output_type": "display_data", "data": {WIDGET_VIEW: {"model_id": "box"}}}
    state = {
        "box": {"state": {"children": ["IPY_MODEL_label"]}},
        "label": {"state": {"value": "bob: plan_blocked"}},
    }
    answer = _keyed(md("`plan_blocked`", "reveal"), "plan_blocked")
    cells = [code("stepper", view), md("**Predict:** what does bob do?"), answer]
    notebook = {
        "cells": cells,
        "metadata": {"widgets": {"application/vnd.jupyter.widget-state+json": {"state": state}}},
    }
    assert answer_problems("n.ipynb", notebook) == [
        "n.ipynb, prediction 1 (cell 1: '**Predict:** what does bob do?'): its answer"
        " 'plan_blocked' is already in cell 0, its widget's saved state"
    ]


def test_the_code_of_an_answer_is_seen_before_it_runs_its_output_is_not() -> None:
    answer = _keyed(
        code("print('lease_expired')", _stream("lease_expired\n"), tags=("reveal",)),
        "lease_expired",
    )
    assert _asked(answer=answer) == [
        'n.ipynb, prediction 1 (cell 0: "**Predict:** does bob\'s UPDATE go through?"):'
        " its answer 'lease_expired' is already in cell 1, its code"
    ]


def test_a_missing_untagged_or_silent_answer_is_named() -> None:
    label = 'n.ipynb, prediction 1 (cell 0: "**Predict:** does bob\'s UPDATE go through?")'
    assert _asked(answer=md("No.", "reveal"))[0].startswith(f"{label}: no answer cell")
    untagged = _keyed(md("No: `task_blocked`."), "task_blocked")
    assert _asked(answer=untagged) == [f"{label}: its answer, cell 1, is not tagged `reveal`"]
    silent = _keyed(md("No.", "reveal"), ["task_blocked"])
    assert _asked(answer=silent) == [f"{label}: its answer, cell 1, does not say 'task_blocked'"]
    twice = md("**Predict:** one?\n\n**Predict:** two?")
    assert answer_problems("n.ipynb", {"cells": [twice], "metadata": {}})[0].endswith(
        "one prediction per cell, so that each has its answer"
    )
