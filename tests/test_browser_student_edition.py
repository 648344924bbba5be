"""The student edition opened in JupyterLab: no answer on the page, the repository untouched.

The edition is built where lab.sh builds it, inside the repository's gitignored
course/ (in a folder of its own, removed afterwards), and a notebook in it is
run in the browser: whatever the kernel and JupyterLab write lands in course/,
so `git status` of the repository does not change.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_harness import (
    CHROMIUM,
    LabSession,
    chromium_session,
    render_every_cell,
    running_jupyterlab,
    trust_notebook,
)
from script_modules import load_script

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = "03_claims_and_leases.ipynb"  # predictions with reveal cells, and an exercise
QUIZ_NOTEBOOK = "07_the_whole_team.ipynb"


def _git_status() -> set[str]:
    """`git status` lines a class could cause: the course's files, and any new file.

    Changes to the package's own tracked code are left out: developers edit it while
    the suite runs, and neither the kernel nor JupyterLab writes there.
    """
    result = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    course_paths = ("notebooks/", "assets/", "teacher/", "README.md", "course/")
    return {
        line
        for line in result.stdout.splitlines()
        if line.startswith("??") or line[3:].startswith(course_paths)
    }


def _tags(cell: dict[str, Any]) -> list[str]:
    tags: list[str] = cell.get("metadata", {}).get("tags", [])
    return tags


def _reveal_texts(path: Path) -> list[str]:
    """Lines of the committed answers (reveal outputs) long enough to be recognised."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    lines: list[str] = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and "reveal" in _tags(cell):
            for output in cell.get("outputs", []):
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                text = "".join(text) if isinstance(text, list) else text
                lines += [line.strip() for line in text.splitlines() if len(line.strip()) > 20]
    return lines


@pytest.fixture(name="student_lab")
def student_lab_fixture(tmp_path: Path) -> Iterator[tuple[LabSession, Path]]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    course = REPO / "course" / f".browser-test-{uuid.uuid4().hex[:8]}"
    home = tmp_path / "home"
    try:
        load_script("student_edition").build(course, trust=False)
        for notebook in (course / "notebooks").glob("*.ipynb"):
            trust_notebook(notebook, home)  # as lab.sh's build does, for this server's home
        render_every_cell(home)
        with (
            running_jupyterlab(course, home) as server,
            chromium_session(server, tmp_path / "chromium-profile") as session,
        ):
            yield session, course
    finally:
        shutil.rmtree(course, ignore_errors=True)


@pytest.mark.browser
def test_the_student_edition_shows_no_answer_and_running_it_leaves_git_clean(
    student_lab: tuple[LabSession, Path],
) -> None:
    lab, course = student_lab
    answers = _reveal_texts(REPO / "notebooks" / NOTEBOOK)
    assert answers, f"{NOTEBOOK} has no reveal output to hide: pick another notebook"
    before = _git_status()

    lab.open_notebook(f"notebooks/{NOTEBOOK}")
    page = lab.page
    reveal = page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
            .filter(cell => (cell.model.getMetadata('tags') || []).includes('reveal'))
            .map(cell => ({type: cell.model.type,
                           outputs: cell.model.type === 'code' ? cell.model.outputs.length : 0,
                           hidden: cell.inputHidden}))"""
    )
    assert reveal, "no reveal cell in the student edition"
    assert all(cell["outputs"] == 0 for cell in reveal if cell["type"] == "code")
    assert all(cell["hidden"] for cell in reveal if cell["type"] == "markdown")
    shown = page.locator(".jp-Notebook").inner_text()
    assert not [line for line in answers if line in shown]
    lab.screenshot("student_edition_unrun.png")

    # No teacher's guide or answer key anywhere in what the student is served.
    served = {p.name for p in course.rglob("*") if p.is_file()}
    assert "README.md" not in served
    assert not (course / "teacher").exists()

    lab.run_all_cells()
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
    )
    assert lab.error_outputs() == []
    lab.screenshot("student_edition_after_run.png")
    saved = json.loads((course / "notebooks" / NOTEBOOK).read_text(encoding="utf-8"))
    assert any(cell.get("outputs") for cell in saved["cells"] if cell["cell_type"] == "code")

    new = _git_status() - before
    assert not new, f"running the student edition changed the repository: {sorted(new)}"

    # The quiz is blank in the student's copy.
    quiz = json.loads((course / "notebooks" / QUIZ_NOTEBOOK).read_text(encoding="utf-8"))
    for cell in quiz["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "check_quiz(" in source:
            assert cell["outputs"] == []
        if cell["cell_type"] == "code" and "answer_key(" in source:
            assert cell["outputs"] == []


RACE_NOTEBOOK = "04_many_processes.ipynb"
RIGHT_CLAIM = """def claim_one(connection, owner):
    row = connection.execute(
        "UPDATE jobs SET status = 'taken', owner = ?"
        " WHERE id = (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1)"
        " RETURNING id",
        (owner,),
    ).fetchone()
    return None if row is None else row[0]"""
WORKSPACE_DEADLINE_SECONDS = 30.0


def _code_cell(page: Any, starts_with: str) -> dict[str, Any]:
    """The index, output text and execution count of the code cell whose source starts so."""
    found: dict[str, Any] = page.evaluate(
        """(start) => {
            const cells = window.jupyterapp.shell.currentWidget.content.widgets;
            const index = cells.findIndex(cell => cell.model.type === 'code'
                && cell.model.sharedModel.getSource().startsWith(start));
            if (index < 0) return null;
            const model = cells[index].model;
            const text = model.outputs.toJSON().map(output => [].concat(
                output.text || (output.data && output.data['text/plain']) || '').join(''));
            return {index, text: text.join(''), count: model.executionCount};
        }""",
        starts_with,
    )
    assert found is not None, f"no code cell starting with {starts_with!r}"
    return found


def _scroll_to(lab: LabSession, index: int) -> None:
    """Bring a cell to the top of the notebook's view, for the screenshot."""
    lab.page.evaluate(
        """(index) => window.jupyterapp.shell.currentWidget.content.widgets[index]
            .node.scrollIntoView({block: 'start'})""",
        index,
    )


def _run_cell(lab: LabSession, starts_with: str) -> str:
    """Run one cell as a student does (select it, Shift-Enter); its output once it has run."""
    before = _code_cell(lab.page, starts_with)
    lab.page.evaluate(
        """(index) => {
            const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = index;
            return window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        before["index"],
    )
    lab.page.wait_for_function(
        """([index, count]) => {
            const panel = window.jupyterapp.shell.currentWidget;
            const model = panel.content.widgets[index].model;
            return model.executionCount !== null && model.executionCount !== count
                && panel.sessionContext.session.kernel.status === 'idle';
        }""",
        arg=[before["index"], before["count"]],
        timeout=120_000,
    )
    return str(_code_cell(lab.page, starts_with)["text"])


@pytest.mark.browser
@pytest.mark.processes
def test_notebook_4_races_the_students_own_claim_and_cleans_up_when_its_kernel_stops(
    student_lab: tuple[LabSession, Path], tmp_path: Path
) -> None:
    lab, _ = student_lab
    temporary = tmp_path / "home" / "tmp"  # the kernel's TMPDIR (browser_harness.isolated_env)
    lab.open_notebook(f"notebooks/{RACE_NOTEBOOK}")
    lab.run_all_cells()
    assert lab.error_outputs() == []

    # The starter looks, then takes: all four workers are told they got job 1.
    race_cell = _code_cell(lab.page, "print(race_claim_one(claim_one")
    race = race_cell["text"]
    assert re.search(r"^\s*1\s+taken\s+4\s+yes$", race, re.MULTILINE), race
    assert "DOUBLE TAKE" in race
    _scroll_to(lab, race_cell["index"] - 2)
    lab.screenshot("notebook_4_race_of_the_starter.png")

    # A student writes a right claim_one into the starter's cell and races it again.
    starter = _code_cell(lab.page, "def claim_one(")
    lab.page.evaluate(
        """([index, source]) => window.jupyterapp.shell.currentWidget.content
            .widgets[index].model.sharedModel.setSource(source)""",
        [starter["index"], RIGHT_CLAIM],
    )
    _run_cell(lab, "def claim_one(")
    race = _run_cell(lab, "print(race_claim_one(claim_one")
    rows = re.findall(r"^\s*(\d+)\s+taken\s+(\d+)\s+(yes|no)$", race, re.MULTILINE)
    assert rows and all(told == "1" and among == "yes" for _, told, among in rows), race
    assert "DOUBLE TAKE" not in race and race.rstrip().splitlines()[-1].startswith("OK:")
    _scroll_to(lab, starter["index"])
    lab.screenshot("notebook_4_race_of_a_right_claim.png")

    # The notebook's workspaces are there until the kernel stops, and gone once it has.
    left = sorted(path.name for path in temporary.glob("agent17-ch4-*"))
    assert left, "notebook 4 made no temporary workspace: is TMPDIR the kernel's?"
    lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    deadline = time.monotonic() + WORKSPACE_DEADLINE_SECONDS
    while (left := sorted(path.name for path in temporary.glob("agent17-*"))) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)  # polling the file system for a process's exit, with a deadline
    assert not left, f"left behind after the kernel stopped: {left}"
