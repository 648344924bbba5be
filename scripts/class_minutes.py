#!/usr/bin/env python3
"""How long the class takes, read along at a class's pace.

    .venv/bin/python scripts/class_minutes.py            # table for notebooks/ and notebooks/extra/
    .venv/bin/python scripts/class_minutes.py --check    # exit 1: the core class is over 90 min
    .venv/bin/python scripts/class_minutes.py --json     # the same numbers, for tools
    .venv/bin/python scripts/class_minutes.py A.ipynb    # only these notebooks
    .venv/bin/python scripts/class_minutes.py --guide    # rewrite teacher/README.md's table

The rules (API.md, "Course layout"), made precise so two people get one number:

- Cells tagged `optional` or `homework` (Jupyter cell metadata `tags`) are not
  part of the class and count nothing. Every other cell counts, including cells
  tagged `reveal`: the class does read the answer to its prediction, so leaving
  it out would make the estimate too kind. Other tags (`needs-processes`, ...)
  change nothing.
- Opening a notebook: one minute each.
- Prose: the words of markdown cells at 200 a minute. Fenced code blocks
  (```) and indented code inside markdown are read as code. Link targets,
  images and HTML tags are not words; their visible text is.
- Code: the words (whitespace-separated tokens) of code cells at 150 a minute.
- Text outputs: at 300 words a minute. A stream's text, an error's name and
  message, and a result's `text/html` (tags removed) or else `text/plain`.
- A picture or a widget, half a minute each: an output that carries `image/*`
  or `application/vnd.jupyter.widget-view+json` (its text fallback is not
  read as well), or an image in a markdown cell.
- A prediction: a line of a markdown cell that starts with `**Predict` (after
  leading spaces and an optional heading mark), one minute each; write one
  prediction per markdown cell (`**Predict:** ...`).
- An exercise check: a code cell that calls `check(...)` or `check_quiz(...)`
  (a plain name or an attribute, e.g. `exercises.check(...)`), four minutes per
  such cell however many calls it holds; nine when it checks an exercise the
  class writes from the ground up (`check("claim_one", ...)`).
- Each notebook's minutes are rounded up to a whole minute; the core total is
  the sum of the rounded minutes of the notebooks directly in `notebooks/`
  (not `notebooks/extra/`), so the table adds up.

Each prediction's answer: the first cell after the prediction (and before the
next one) that carries `"agent17": {"answer_key": "..."}` in its metadata, a
short phrase that only the answer says (`lease_expired`, `SQLITE_BUSY_SNAPSHOT`)
or a list of such phrases. That cell is tagged `reveal` and says the phrase (a
markdown cell in its text, a code cell in its output: its code is on the page
before it runs), and nothing before it does: no goal, heading, code, output,
saved widget state or glossary entry linked from an earlier cell. Case,
spacing and Markdown's `*` and backticks are ignored. tests/test_course.py
checks every core notebook.

Exit status: 0 fine, 1 over the limit with --check, 2 bad input (a missing or
unreadable notebook), with a one-line `class_minutes: <code>: ...` message.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROSE_WPM = 200
CODE_WPM = 150
OUTPUT_WPM = 300
PREDICTION_MINUTES = 1
CHECK_MINUTES = 4
PICTURE_MINUTES = 0.5
OPEN_MINUTES = 1
# The exercises the class writes from the ground up, not one line of a starter.
GROUND_UP_EXERCISES = frozenset({"claim_one"})
GROUND_UP_MINUTES = 9
LIMIT_MINUTES = 90
EXCLUDED_TAGS = frozenset({"optional", "homework"})
CHECK_FUNCTIONS = frozenset({"check", "check_quiz"})
PICTURE_MIME_PREFIXES = ("image/", "application/vnd.jupyter.widget-view+json")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


class EstimateError(Exception):
    """Bad input, with a stable code (`missing_notebook`, `bad_notebook`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True)
class Estimate:
    notebook: str
    prose_words: int
    code_words: int
    output_words: int
    pictures: int
    predictions: int
    checks: int
    ground_up_checks: int
    exact_minutes: float
    minutes: int


_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INDENTED = re.compile(r"^(?: {4}|\t)\S.*$", re.MULTILINE)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_HTML_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")
_PREDICT = re.compile(r"^[ \t]*(?:#+[ \t]*)?\*\*Predict", re.MULTILINE)
_MAGIC = re.compile(r"^\s*[%!].*$", re.MULTILINE)


def _words(text: str) -> int:
    return len(text.split())


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def split_markdown(text: str) -> tuple[int, int]:
    """(prose words, code words) of one markdown cell."""
    code_words = 0
    for pattern in (_FENCE, _INDENTED):
        code_words += sum(_words(match.group(0)) for match in pattern.finditer(text))
        text = pattern.sub(" ", text)
    text = _IMAGE.sub(" ", text)
    text = _HTML_IMG.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = html.unescape(_TAG.sub(" ", text))
    # Markdown punctuation that stands alone (table rules, list bullets) is not a word.
    prose = [w for w in text.split() if re.search(r"\w", w)]
    return len(prose), code_words


def is_picture(output: dict[str, Any]) -> bool:
    """Whether an output shows a picture or a widget (not text to read)."""
    data = output.get("data", {})
    return isinstance(data, dict) and any(mime.startswith(PICTURE_MIME_PREFIXES) for mime in data)


def holds_picture(output: dict[str, Any]) -> bool:
    """Whether an output shows a picture: its own (`is_picture`) or one inside its HTML."""
    data = output.get("data", {})
    if is_picture(output):
        return True
    return isinstance(data, dict) and _HTML_IMG.search(_text(data.get("text/html", ""))) is not None


def output_words(output: dict[str, Any]) -> int:
    """The words a class reads in one text output; a picture or widget has none."""
    kind = output.get("output_type")
    if kind == "stream":
        return _words(_text(output.get("text", "")))
    if kind == "error":
        return _words(f"{output.get('ename', '')} {output.get('evalue', '')}")
    data = output.get("data", {})
    if not isinstance(data, dict):
        return 0
    if is_picture(output):
        return 0
    if "text/html" in data:
        return _words(html.unescape(_TAG.sub(" ", _text(data["text/html"]))))
    if "text/plain" in data:
        return _words(_text(data["text/plain"]))
    return 0


def _checked_names(code: str) -> list[str] | None:
    """Each `check(...)` call's first argument ("" if not a string); None if unparsable."""
    try:
        tree = ast.parse(_MAGIC.sub("", code))
    except SyntaxError:
        return None
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in CHECK_FUNCTIONS:
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.append(first.value)
                else:
                    names.append("")
    return names


def calls_check(code: str) -> bool:
    """Whether a code cell calls `check(...)` or `check_quiz(...)`."""
    names = _checked_names(code)
    if names is None:
        # A cell that does not parse (rare: cell magics) still says what it calls.
        return re.search(r"(?<![\w.])(?:\w+\.)?(?:check|check_quiz)\s*\(", code) is not None
    return bool(names)


def checks_ground_up(code: str) -> bool:
    """Whether a code cell checks an exercise the class writes from the ground up."""
    return bool(GROUND_UP_EXERCISES.intersection(_checked_names(code) or ()))


def counted(cell: dict[str, Any]) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return not EXCLUDED_TAGS.intersection(tags)


def estimate_cells(name: str, cells: Iterable[dict[str, Any]]) -> Estimate:
    prose = code = outputs = pictures = predictions = checks = ground_up = 0
    for cell in cells:
        if not counted(cell):
            continue
        source = _source(cell)
        if cell.get("cell_type") == "markdown":
            prose_words, code_words = split_markdown(source)
            prose += prose_words
            code += code_words
            pictures += len(_IMAGE.findall(source)) + len(_HTML_IMG.findall(source))
            predictions += len(_PREDICT.findall(source))
        elif cell.get("cell_type") == "code":
            code += _words(source)
            for output in cell.get("outputs", []):
                outputs += output_words(output)
                pictures += holds_picture(output)
            if checks_ground_up(source):
                ground_up += 1
            elif calls_check(source):
                checks += 1
    exact = (
        OPEN_MINUTES
        + prose / PROSE_WPM
        + code / CODE_WPM
        + outputs / OUTPUT_WPM
        + pictures * PICTURE_MINUTES
        + predictions * PREDICTION_MINUTES
        + checks * CHECK_MINUTES
        + ground_up * GROUND_UP_MINUTES
    )
    # Rounded up so that the whole minutes in the table add up to the total.
    minutes = math.ceil(round(exact, 6))
    return Estimate(
        name, prose, code, outputs, pictures, predictions, checks + ground_up, ground_up,
        round(exact, 2), minutes,
    )  # fmt: skip


def estimate(path: Path) -> Estimate:
    """The estimate of one notebook file."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EstimateError("missing_notebook", f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise EstimateError("bad_notebook", f"{path}: {error}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise EstimateError("bad_notebook", f"{path}: no list of cells")
    try:
        name = str(path.resolve().relative_to(NOTEBOOKS.resolve()))
    except ValueError:
        name = str(path)
    return estimate_cells(name, notebook["cells"])


def core_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The core class: the notebooks directly in `folder`, in course order."""
    return sorted(folder.glob("*.ipynb"))


def extra_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    return sorted((folder / "extra").glob("*.ipynb"))


def core_total(estimates: Iterable[Estimate]) -> int:
    return sum(item.minutes for item in estimates)


def table(core: Sequence[Estimate], extra: Sequence[Estimate]) -> str:
    header = (
        f"{'notebook':<36} {'prose':>6} {'code':>6} {'output':>6} {'pic':>4} {'pred':>4}"
        f" {'chk':>4} {'min':>5}"
    )
    lines = [header, "-" * len(header)]

    def row(item: Estimate) -> str:
        return (
            f"{item.notebook:<36} {item.prose_words:>6} {item.code_words:>6} {item.output_words:>6}"
            f" {item.pictures:>4} {item.predictions:>4} {item.checks:>4} {item.minutes:>5}"
        )

    lines += [row(item) for item in core]
    lines.append(f"{'core total (notebooks/*.ipynb)':<71} {core_total(core):>5}")
    if extra:
        lines.append("")
        lines += [row(item) for item in extra]
        lines.append(
            f"{'optional (notebooks/extra/, not in the total)':<71} {core_total(extra):>5}"
        )
    return "\n".join(lines)


GUIDE = ROOT / "teacher" / "README.md"
GUIDE_START = "<!-- class_minutes: start (scripts/class_minutes.py --guide rewrites this table) -->"
GUIDE_END = "<!-- class_minutes: end -->"


def guide_block(core: Sequence[Estimate], extra: Sequence[Estimate]) -> str:
    """The teacher's guide's minutes table, between its markers."""

    def link(item: Estimate) -> str:
        return f"[{Path(item.notebook).stem}](../notebooks/{item.notebook})"

    rows = [GUIDE_START, "| Notebook | Minutes |", "|---|---|"]
    rows += [f"| {link(item)} | {item.minutes} |" for item in core]
    rows.append(f"| **core class** | **{core_total(core)}** |")
    rows += [f"| {link(item)} | {item.minutes}, optional |" for item in extra]
    rows.append(GUIDE_END)
    return "\n".join(rows)


def guide_with_block(text: str, block: str) -> str:
    """`text` (the guide) with its minutes table replaced by `block`."""
    start, end = text.find(GUIDE_START), text.find(GUIDE_END)
    if start < 0 or end < start:
        raise EstimateError("no_guide_table", f"the guide has no {GUIDE_START!r} ... {GUIDE_END!r}")
    return text[:start] + block + text[end + len(GUIDE_END) :]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Estimate the class's minutes per notebook.")
    parser.add_argument(
        "paths", nargs="*", type=Path, help="notebooks (default: notebooks/ and notebooks/extra/)"
    )
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 when the core total is over {LIMIT_MINUTES}"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--guide", action="store_true", help="rewrite the minutes table in teacher/README.md"
    )
    args = parser.parse_args(argv)
    try:
        if args.paths:
            core = [estimate(path) for path in args.paths]
            extra: list[Estimate] = []
        else:
            core = [estimate(path) for path in core_notebooks()]
            extra = [estimate(path) for path in extra_notebooks()]
        if args.guide:
            try:
                text = GUIDE.read_text(encoding="utf-8")
            except OSError as error:
                raise EstimateError("no_guide", f"{GUIDE}: {error}") from None
            GUIDE.write_text(guide_with_block(text, guide_block(core, extra)), encoding="utf-8")
    except EstimateError as error:
        print(f"class_minutes: {error}", file=sys.stderr)
        return 2
    total = core_total(core)
    if args.json:
        print(
            json.dumps(
                {
                    "core": [asdict(e) for e in core],
                    "extra": [asdict(e) for e in extra],
                    "core_total": total,
                },
                indent=2,
            )
        )
    else:
        print(table(core, extra))
    if args.check and total > LIMIT_MINUTES:
        print(
            f"class_minutes: over_limit: the core class takes {total} min, over {LIMIT_MINUTES}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
