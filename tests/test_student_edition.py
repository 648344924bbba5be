"""The student edition (scripts/student_edition.py): nothing spoiled, a student's edits kept."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


edition = load_script("student_edition")


def _stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def code(text: str, *outputs: dict[str, Any], tags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "source": text,
        "outputs": list(outputs),
        "execution_count": 3 if outputs else None,
    }


def md(text: str, *tags: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {"tags": list(tags)}, "source": text}


def _notebook(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _all_text(notebook: dict[str, Any]) -> str:
    return json.dumps(notebook)


def test_reveal_outputs_go_reveal_markdown_is_collapsed_other_outputs_stay() -> None:
    notebook = _notebook(
        md("**Predict:** who gets job 1?"),
        code("race()", _stream("ANSWER: alice\n"), tags=("reveal",)),
        md("Alice, because ...", "reveal"),
        code("board()", _stream("the board\n")),
    )
    student = edition.student_notebook(notebook)
    assert "ANSWER" not in _all_text(student)
    assert student["cells"][1]["outputs"] == [] and student["cells"][1]["execution_count"] is None
    assert student["cells"][2]["metadata"]["jupyter"]["source_hidden"] is True
    assert student["cells"][3]["outputs"] == [_stream("the board\n")]
    assert "ANSWER" in _all_text(notebook)  # the committed notebook is not changed


def test_a_collapsed_answer_shows_a_first_line_that_is_not_the_answer() -> None:
    # JupyterLab draws a collapsed cell as its first line and "...": the answer's own first
    # line would be on the page before the student ran anything.
    notebook = _notebook(md("**Predict:** who?"), md("Alice, because she asked first.", "reveal"))
    answer = edition.student_notebook(notebook)["cells"][1]
    first, _, rest = answer["source"].partition("\n")
    assert "Alice" not in first and first == edition.REVEAL_FIRST_LINE
    assert rest.strip() == "Alice, because she asked first."
    assert edition.student_notebook(notebook) == edition.student_notebook(notebook)


def test_the_quiz_is_blank_and_its_marking_gone() -> None:
    notebook = _notebook(
        code('answers = {\n    "lease_instant": "c",\n    "flock": "b",  # sure?\n}'),
        code("check_quiz(answers)", _stream("7 of 10 right\n")),
        code('other = {"x": "keep"}'),
    )
    student = edition.student_notebook(notebook)
    assert (
        student["cells"][0]["source"]
        == 'answers = {\n    "lease_instant": "",\n    "flock": "",  # sure?\n}'
    )
    assert student["cells"][1]["outputs"] == []
    assert student["cells"][2]["source"] == 'other = {"x": "keep"}'


def test_answer_keys_and_solution_listings_lose_their_outputs() -> None:
    notebook = _notebook(
        code("QUIZ.answer_key()", _stream("{'lease_instant': 'c'}\n")),
        code("show_source(claim_one_solution)", _stream("def claim_one(...): SOLVED\n")),
        code("show_source(SqliteTaskStore.claim_next)", _stream("def claim_next\n")),
    )
    student = edition.student_notebook(notebook)
    assert [len(cell["outputs"]) for cell in student["cells"]] == [0, 0, 1]


def _course_source(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "repo" / "notebooks"
    (source / "extra").mkdir(parents=True)
    assets = tmp_path / "repo" / "assets"
    assets.mkdir()
    (assets / "idle_loop.svg").write_text("<svg/>")
    (source / "glossary.md").write_text("# Glossary\n")
    (source / "README.md").write_text("# Teacher's guide with the ANSWER KEY\n")
    (source / "nbval_sanitize.cfg").write_text("[x]\n")
    reveal = code("race()", _stream("ANSWER\n"), tags=("reveal",))
    (source / "01_a.ipynb").write_text(json.dumps(_notebook(md("one"), reveal)))
    (source / "extra" / "08_b.ipynb").write_text(json.dumps(_notebook(md("eight"))))
    return source, assets


def test_the_course_folder_holds_the_student_files_only(tmp_path: Path) -> None:
    source, assets = _course_source(tmp_path)
    course = tmp_path / "course"
    report = edition.build(course, source=source, assets=assets, trust=False)
    files = sorted(str(p.relative_to(course)) for p in course.rglob("*") if p.is_file())
    assert files == [
        ".student_edition.json",
        "assets/idle_loop.svg",
        "notebooks/01_a.ipynb",
        "notebooks/extra/08_b.ipynb",
        "notebooks/glossary.md",
    ]
    assert len(report.written) == 4
    assert "ANSWER" not in (course / "notebooks" / "01_a.ipynb").read_text()


def test_a_students_edit_is_kept_on_rebuild_and_the_rest_updated(tmp_path: Path) -> None:
    source, assets = _course_source(tmp_path)
    course = tmp_path / "course"
    edition.build(course, source=source, assets=assets, trust=False)
    mine = course / "notebooks" / "01_a.ipynb"
    student = json.loads(mine.read_text())
    student["cells"].append(md("my own notes"))
    mine.write_text(json.dumps(student))
    # The course changes: both notebooks get a new cell.
    for path in (source / "01_a.ipynb", source / "extra" / "08_b.ipynb"):
        notebook = json.loads(path.read_text())
        notebook["cells"].append(md("new in the course"))
        path.write_text(json.dumps(notebook))

    report = edition.build(course, source=source, assets=assets, trust=False)
    assert report.kept == ["notebooks/01_a.ipynb"]
    assert report.updated == ["notebooks/extra/08_b.ipynb"]
    assert "my own notes" in mine.read_text()
    assert "new in the course" in (course / "notebooks" / "extra" / "08_b.ipynb").read_text()
    assert any("kept" in line and "01_a.ipynb" in line for line in report.lines(course))

    # Kept next time too; deleting it brings the course's version back.
    assert edition.build(course, source=source, assets=assets, trust=False).kept == [
        "notebooks/01_a.ipynb"
    ]
    mine.unlink()
    again = edition.build(course, source=source, assets=assets, trust=False)
    assert again.written == ["notebooks/01_a.ipynb"] and again.kept == []
    assert "new in the course" in mine.read_text()


def test_without_its_record_every_differing_file_counts_as_the_students(tmp_path: Path) -> None:
    source, assets = _course_source(tmp_path)
    course = tmp_path / "course"
    edition.build(course, source=source, assets=assets, trust=False)
    (course / "notebooks" / "glossary.md").write_text("# My glossary\n")
    (course / ".student_edition.json").unlink()
    report = edition.build(course, source=source, assets=assets, trust=False)
    assert report.kept == ["notebooks/glossary.md"]
    assert (course / "notebooks" / "glossary.md").read_text() == "# My glossary\n"


def _build_behind(barrier: Any, course: Path, source: Path, assets: Path, results: Any) -> None:
    # A child process: both builds leave the barrier together, as two ./scripts/lab.sh.
    barrier.wait()
    try:
        report = edition.build(course, source=source, assets=assets, trust=False)
        results.put(report.kept)
    except BaseException as error:
        results.put(f"failed: {error!r}")


ROUNDS = 12


def test_two_builds_at_once_both_succeed_and_leave_one_consistent_course(tmp_path: Path) -> None:
    source, assets = _course_source(tmp_path)
    for n in range(40):  # many notebooks: many chances for the two builds to meet
        (source / f"{n + 10:02d}_n.ipynb").write_text(json.dumps(_notebook(md(f"#{n}"))))
    reference = tmp_path / "reference"
    edition.build(reference, source=source, assets=assets, trust=False)
    expected = {p.relative_to(reference) for p in reference.rglob("*") if p.is_file()}
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        course = tmp_path / f"course-{round_}"
        # The student's own notebook, there before any build: no build may replace it.
        mine = course / "notebooks" / "01_a.ipynb"
        mine.parent.mkdir(parents=True)
        mine.write_text('{"mine": true}')
        barrier, results = context.Barrier(2), context.Queue()
        builds = [
            context.Process(target=_build_behind, args=(barrier, course, source, assets, results))
            for _ in range(2)
        ]
        for build in builds:
            build.start()
        outcomes = [results.get(timeout=120) for _ in builds]
        for build in builds:
            build.join(60)
        assert outcomes == [["notebooks/01_a.ipynb"]] * 2, f"round {round_}: {outcomes}"
        files = {p.relative_to(course) for p in course.rglob("*") if p.is_file()}
        assert files == expected, f"round {round_}: {files ^ expected}"  # no temporary left
        assert mine.read_text() == '{"mine": true}'
        for name in expected - {Path(".student_edition.json"), Path("notebooks/01_a.ipynb")}:
            assert (course / name).read_bytes() == (reference / name).read_bytes(), name
        manifest = json.loads((course / ".student_edition.json").read_text())
        assert manifest == {
            str(name): hashlib.sha256((course / name).read_bytes()).hexdigest()
            for name in expected - {Path(".student_edition.json"), Path("notebooks/01_a.ipynb")}
        }


@pytest.mark.parametrize("kind", ["folder", "symlink"])
def test_git_ignores_the_built_editions_whether_folders_or_symlinks(
    tmp_path: Path, kind: str
) -> None:
    # A fresh repository with this .gitignore: course/ and site/ as built, or as links
    # to folders elsewhere (a course kept on another disk).
    git = shutil.which("git")
    if git is None:
        pytest.skip("no git")
    clone = tmp_path / "clone"
    subprocess.run([git, "init", "-q", str(clone)], check=True)
    shutil.copy(ROOT / ".gitignore", clone / ".gitignore")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "notebooks").mkdir(parents=True)
    (elsewhere / "notebooks" / "01_a.ipynb").write_text("{}")
    for name in ("course", "site", ".site-cache"):
        if kind == "symlink":
            (clone / name).symlink_to(elsewhere, target_is_directory=True)
        else:
            shutil.copytree(elsewhere, clone / name)
    status = subprocess.run(
        [git, "-C", str(clone), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout.splitlines() == ["?? .gitignore"]


def test_a_broken_notebook_is_a_coded_error(tmp_path: Path) -> None:
    source, assets = _course_source(tmp_path)
    (source / "02_bad.ipynb").write_text("{not json")
    with pytest.raises(edition.EditionError) as caught:
        edition.build(tmp_path / "course", source=source, assets=assets, trust=False)
    assert caught.value.code == "bad_notebook"


def _course_notebooks() -> list[Path]:
    folder = ROOT / "notebooks"
    return sorted(folder.glob("*.ipynb")) + sorted(folder.glob("extra/*.ipynb"))


@pytest.mark.parametrize("path", _course_notebooks(), ids=lambda path: path.name)
def test_the_real_course_has_no_reveal_output_or_filled_quiz(path: Path) -> None:
    student = edition.student_notebook(json.loads(path.read_text(encoding="utf-8")))
    for cell in student["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "reveal" in tags:
            assert cell["outputs"] == []
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "check_quiz(" in source:
            assert cell["outputs"] == []
    names = edition._quiz_names(student["cells"])
    for cell in student["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            assert edition.blank_answers(source, names) == source  # nothing left to blank
