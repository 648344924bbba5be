#!/usr/bin/env python3
"""Build the student edition of the course in course/ (gitignored) from notebooks/.

    .venv/bin/python scripts/student_edition.py            # build or update course/
    .venv/bin/python scripts/student_edition.py --into DIR

./scripts/lab.sh runs it, then opens course/; a class never writes to the
committed notebooks. What a student gets:

- every notebook of notebooks/ and notebooks/extra/, with
  - the outputs of code cells tagged `reveal` removed (the answer to the
    prediction above them: the student runs the cell to see it);
  - markdown cells tagged `reveal` collapsed (`metadata.jupyter.source_hidden`:
    JupyterLab shows their first line and "..." until the student clicks it), with
    a first line that says so, since the cell's own first line is the answer;
  - the quiz blank: every string in a dict literal assigned to a name that is
    passed to `check_quiz(...)` becomes "", and the outputs of the cells calling
    `check_quiz` are removed;
  - the outputs of cells that list an answer key or a solution (a call of
    `answer_key(...)`, or `show_source(...)` of something named `*solution*`)
    removed;
- the glossary and the SQLite primer (notebooks/*.md) and assets/, laid out as
  in the repository (course/notebooks/, course/assets/) so links and pictures
  work;
- not the teacher's guide (teacher/, outside notebooks/), nor any README.md.

Kept across sessions: course/.student_edition.json records the SHA-256 of every
file as it was written. A rebuild replaces a file only while it is still
exactly what was written; a file the student changed (edited, or ran and saved)
is kept and listed, and deleting it brings the course's version back.
Written notebooks are marked trusted (their saved pictures and widgets show).
Exit status: 0 done, 2 bad input (a notebook that is not JSON).
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ASSETS = ROOT / "assets"
COURSE = ROOT / "course"
MANIFEST = ".student_edition.json"
REVEAL = "reveal"
REVEAL_FIRST_LINE = "The answer: open it once you have run the cell above."
_MAGIC = re.compile(r"^\s*[%!].*$", re.MULTILINE)


class EditionError(Exception):
    """Bad input, with a stable code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tree(code: str) -> ast.Module | None:
    # Magic lines are blanked, not removed, so that line numbers stay those of the cell.
    try:
        return ast.parse(_MAGIC.sub(lambda match: " " * len(match.group(0)), code))
    except SyntaxError:
        return None


def _calls(tree: ast.Module | None) -> Iterator[tuple[str, ast.Call]]:
    if tree is None:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            yield name, node


def _quiz_names(cells: list[dict[str, Any]]) -> set[str]:
    """The names whose value a notebook passes to `check_quiz(...)`."""
    names: set[str] = set()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        for name, call in _calls(_tree(_source(cell))):
            if name == "check_quiz":
                names.update(arg.id for arg in call.args if isinstance(arg, ast.Name))
    return names


def _offset(lines: list[str], line: int, column: int) -> int:
    # ast columns count UTF-8 bytes.
    prefix = lines[line - 1].encode("utf-8")[:column].decode("utf-8")
    return sum(len(text) for text in lines[: line - 1]) + len(prefix)


def blank_answers(code: str, names: set[str]) -> str:
    """`code` with every string value of a dict literal assigned to one of `names` made ""."""
    tree = _tree(code)
    if tree is None or not names:
        return code
    spans: list[tuple[int, int]] = []
    lines = code.splitlines(keepends=True)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(isinstance(t, ast.Name) and t.id in names for t in targets):
            continue
        if not isinstance(node.value, ast.Dict):
            continue
        for value in node.value.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
                assert value.end_lineno is not None and value.end_col_offset is not None
                start = _offset(lines, value.lineno, value.col_offset)
                end = _offset(lines, value.end_lineno, value.end_col_offset)
                spans.append((start, end))
    for start, end in sorted(spans, reverse=True):
        code = code[:start] + '""' + code[end:]
    return code


def _lists_an_answer(code: str) -> bool:
    """Whether a cell prints an answer key or a solution's source."""
    for name, call in _calls(_tree(code)):
        if name in {"answer_key", "check_quiz"}:
            return True
        if name == "show_source" and "solution" in ast.unparse(call).lower():
            return True
    return False


def _clear_outputs(cell: dict[str, Any]) -> None:
    cell["outputs"] = []
    cell["execution_count"] = None


def student_notebook(notebook: dict[str, Any]) -> dict[str, Any]:
    """The student edition of one notebook (a new dict; `notebook` is not changed)."""
    result = copy.deepcopy(notebook)
    cells: list[dict[str, Any]] = result.get("cells", [])
    quiz = _quiz_names(cells)
    for cell in cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") == "markdown" and REVEAL in tags:
            cell.setdefault("metadata", {}).setdefault("jupyter", {})["source_hidden"] = True
            cell["source"] = f"{REVEAL_FIRST_LINE}\n\n{_source(cell)}"
        if cell.get("cell_type") != "code":
            continue
        source = _source(cell)
        blanked = blank_answers(source, quiz)
        if blanked != source:
            cell["source"] = blanked
        if REVEAL in tags or _lists_an_answer(source):
            _clear_outputs(cell)
    return result


def _notebook_text(notebook: dict[str, Any]) -> str:
    # The layout nbformat writes (and JupyterLab saves), so an unchanged file stays unchanged.
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Report:
    written: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def lines(self, course: Path) -> list[str]:
        out = [
            f"student edition in {course}: {len(self.written)} new, {len(self.updated)} updated,"
            f" {len(self.unchanged)} unchanged, {len(self.kept)} kept as you changed them"
        ]
        out += [
            f"  kept (yours; delete it to get the course's version): {name}" for name in self.kept
        ]
        return out


def _course_files(source: Path, assets: Path) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(path inside the course, its content) for every file of the student edition."""
    for folder, prefix in ((source, "notebooks"), (source / "extra", "notebooks/extra")):
        for path in sorted(folder.glob("*.ipynb")):
            yield f"{prefix}/{path.name}", _edition_of(path)
        for path in sorted(folder.glob("*.md")):
            if path.name != "README.md":  # a teacher's page, never a student's
                yield f"{prefix}/{path.name}", path.read_bytes
    for path in sorted(assets.glob("*")):
        if path.is_file():
            yield f"assets/{path.name}", path.read_bytes


def _edition_of(path: Path) -> Callable[[], bytes]:
    def content() -> bytes:
        try:
            notebook = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise EditionError("bad_notebook", f"{path}: {error}") from None
        return _notebook_text(student_notebook(notebook)).encode("utf-8")

    return content


def _trust(paths: list[Path]) -> None:
    if not paths:
        return
    import nbformat
    from nbformat.sign import NotebookNotary

    # nbformat has no type hints: its documented signatures.
    read = cast(Callable[..., Any], nbformat.read)
    notary = cast(Callable[[], Any], NotebookNotary)()
    sign = cast(Callable[[Any], None], notary.sign)
    for path in paths:
        sign(read(str(path), as_version=4))


def _replace(target: Path, data: bytes) -> None:
    """Put `data` at `target` whole, through a temporary file no other build shares.

    Two builds at once (two ./scripts/lab.sh) each write their own file and replace
    the target with it; both write the same content, and a reader (a build, the
    manifest's) sees the old file or a whole new one.
    """
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.writing")
    try:
        with temporary.open("xb") as file:
            file.write(data)
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def build(
    course: Path = COURSE,
    *,
    source: Path = NOTEBOOKS,
    assets: Path = ASSETS,
    trust: bool = True,
) -> Report:
    """Build or update the student edition in `course`, keeping what the student changed."""
    course.mkdir(parents=True, exist_ok=True)
    manifest_path = course / MANIFEST
    try:
        recorded: dict[str, str] = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        recorded = {}  # no record: every existing file counts as the student's
    report = Report()
    manifest: dict[str, str] = {}
    to_trust: list[Path] = []
    for name, content in _course_files(source, assets):
        data = content()
        target = course / name
        new_hash = _sha256(data)
        if target.exists():
            current = _sha256(target.read_bytes())
            if current == new_hash:
                report.unchanged.append(name)
                manifest[name] = new_hash
                continue
            if current != recorded.get(name):
                report.kept.append(name)
                if name in recorded:
                    manifest[name] = recorded[name]  # still the student's, next time too
                continue
            report.updated.append(name)
        else:
            report.written.append(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace(target, data)
        manifest[name] = new_hash
        if name.endswith(".ipynb"):
            to_trust.append(target)
    _replace(manifest_path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    if trust:
        _trust(to_trust)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the student edition in course/.")
    parser.add_argument("--into", type=Path, default=COURSE, help="where (default: course/)")
    args = parser.parse_args(argv)
    try:
        report = build(args.into)
    except EditionError as error:
        print(f"student_edition: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines(args.into)))
    return 0


__all__ = ["EditionError", "Report", "blank_answers", "build", "student_notebook"]

if __name__ == "__main__":
    sys.exit(main())
