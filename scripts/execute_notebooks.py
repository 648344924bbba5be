#!/usr/bin/env python3
"""Execute notebooks in place and save the state of their widgets, with stable ids.

    .venv/bin/python scripts/execute_notebooks.py notebooks/03_claims_and_leases.ipynb [...]
    .venv/bin/python scripts/execute_notebooks.py            # every notebook of the course

Why: JupyterLab draws a widget output from the notebook metadata's
`application/vnd.jupyter.widget-state+json`; without it an unrun notebook shows
"Error displaying widget: model not found". The kernel gives every widget a
random model id, so a plain re-execution would change every id and every diff.
Here the saved state is cut down to the models the outputs name (and the models
those name: layouts, styles, children), and each id is replaced by one derived
from the notebook's file name and the order in which the outputs first name the
model. Adjacent stream outputs are joined (where the kernel split them depends
on timing).

Each widget is saved as it was when the cell that first shows it finished, not as
the last cell left it: a stepper that later cells drive would otherwise show, before
anything runs, the whole story they tell, answers to the predictions on the way
included. Executing the same notebook twice gives the same file, apart from what
the notebook itself prints differently (object addresses, say).

Each notebook runs with its own folder as the working directory (as nbval
runs it) and no timing metadata is written. A notebook whose run fails is left
as it was. Exit status: 0 all written, 1 a notebook failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ROOT = Path(__file__).resolve().parent.parent
# nbformat has no type hints; these are its documented signatures.
_read = cast(Callable[..., Any], nbformat.read)
_write = cast(Callable[..., None], nbformat.write)
_from_dict: Callable[[Any], Any] = nbformat.from_dict
_REFERENCE = re.compile(r"IPY_MODEL_([0-9A-Za-z_-]+)")


class WidgetStateError(Exception):
    """An output names a widget model whose state the kernel never sent."""

    code = "missing_widget_state"


def _view_ids(value: Any) -> Iterator[str]:
    """Model ids named by widget-view outputs anywhere in `value` (Output widgets nest them)."""
    if isinstance(value, dict):
        view = value.get(WIDGET_VIEW)
        if isinstance(view, dict) and isinstance(view.get("model_id"), str):
            yield view["model_id"]
        for key in sorted(value):
            if key != WIDGET_VIEW:
                yield from _view_ids(value[key])
    elif isinstance(value, list):
        for item in value:
            yield from _view_ids(item)


def _references(value: Any) -> Iterator[str]:
    """Model ids one model's state refers to, in a fixed order (sorted keys)."""
    if isinstance(value, str):
        yield from _REFERENCE.findall(value)
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _references(value[key])
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)
    yield from _view_ids(value) if isinstance(value, dict) else iter(())


def _renamed(value: Any, mapping: dict[str, str]) -> Any:
    """`value` with every model id renamed: `model_id` values and `IPY_MODEL_` references."""
    if isinstance(value, dict):
        return {
            key: mapping.get(item, item)
            if key == "model_id" and isinstance(item, str)
            else _renamed(item, mapping)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_renamed(item, mapping) for item in value]
    if isinstance(value, str):
        return _REFERENCE.sub(
            lambda match: "IPY_MODEL_" + mapping.get(match.group(1), match.group(1)), value
        )
    return value


def reachable(model_ids: list[str], state: dict[str, Any]) -> list[str]:
    """`model_ids` and every model their states refer to, depth first (each once)."""
    order: list[str] = []
    pending = list(model_ids)
    while pending:
        model_id = pending.pop(0)
        if model_id in order:
            continue
        if model_id not in state:
            raise WidgetStateError(f"an output names model {model_id}, not saved")
        order.append(model_id)
        # Depth first, so a model's layout and children get the ids right after it.
        pending[:0] = [mid for mid in _references(state[model_id]) if mid not in order]
    return order


class FirstViewClient(NotebookClient):  # type: ignore[misc]  # nbclient ships no type hints
    """A NotebookClient that saves each widget as it was when the cell showing it finished."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first_views: dict[str, tuple[Any, Any]] = {}

    async def async_execute_cell(
        self, cell: Any, cell_index: int, *args: Any, **kwargs: Any
    ) -> Any:
        executed = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        shown = list(_view_ids(cell.get("outputs", [])))
        for model_id in reachable(shown, self.widget_state):
            if model_id not in self.first_views:
                buffers = self.widget_buffers.get(model_id)
                self.first_views[model_id] = copy.deepcopy((self.widget_state[model_id], buffers))
        return executed

    def set_widgets_metadata(self) -> None:
        last = self.widget_state, self.widget_buffers
        self.widget_state = {**self.widget_state}
        self.widget_buffers = {**self.widget_buffers}
        for model_id, (state, buffers) in self.first_views.items():
            self.widget_state[model_id] = state
            self.widget_buffers.pop(model_id, None)
            if buffers:
                self.widget_buffers[model_id] = buffers
        try:
            super().set_widgets_metadata()
        finally:
            self.widget_state, self.widget_buffers = last


def stable_id(notebook_name: str, index: int) -> str:
    """The saved id of the `index`-th model (from 0) a notebook's outputs name."""
    return hashlib.sha256(f"{notebook_name}:{index}".encode()).hexdigest()[:32]


def stabilise(nb: Any, notebook_name: str) -> int:
    """Keep the state of the models the outputs reach, under stable ids; return how many.

    With no widget output the notebook carries no widget metadata at all.
    """
    metadata = nb["metadata"]
    state: dict[str, Any] = metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    shown = [mid for cell in nb["cells"] for mid in _view_ids(cell.get("outputs", []))]
    try:
        order = reachable(shown, {mid: model["state"] for mid, model in state.items()})
    except WidgetStateError as error:
        raise WidgetStateError(f"{notebook_name}: {error}") from None
    if not order:
        metadata.pop("widgets", None)
        return 0
    mapping = {old: stable_id(notebook_name, index) for index, old in enumerate(order)}
    kept = {mapping[old]: state[old] for old in order}
    metadata["widgets"] = {WIDGET_STATE: {"state": kept, "version_major": 2, "version_minor": 0}}
    nb["cells"] = _renamed(nb["cells"], mapping)
    metadata["widgets"] = _renamed(metadata["widgets"], mapping)
    return len(order)


def coalesce_streams(nb: Any) -> None:
    """Join adjacent stream outputs of one name: how the kernel split them is timing, not text."""
    for cell in nb["cells"]:
        joined: list[Any] = []
        for output in cell.get("outputs", []):
            previous = joined[-1] if joined else None
            if (
                previous is not None
                and output.get("output_type") == "stream"
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] = _text(previous["text"]) + _text(output["text"])
            else:
                joined.append(output)
        if "outputs" in cell:
            cell["outputs"] = joined


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def execute(path: Path, timeout: int) -> int:
    """Run one notebook in place; return how many widget models it now carries."""
    nb = _read(path, as_version=4)
    client = FirstViewClient(
        nb,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    client.execute()
    plain = json.loads(json.dumps(nb))
    coalesce_streams(plain)
    models = stabilise(plain, path.name)
    _write(_from_dict(plain), path)
    return models


def default_notebooks() -> list[Path]:
    folder = ROOT / "notebooks"
    return sorted(folder.glob("*.ipynb")) + sorted(folder.glob("extra/*.ipynb"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute notebooks in place, widget state saved.")
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: the course's)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (600)")
    args = parser.parse_args(argv)
    paths = args.paths or default_notebooks()
    for path in paths:
        if path.suffix != ".ipynb" or not path.is_file():
            print(f"execute_notebooks: missing_notebook: {path}", file=sys.stderr)
            return 2
    failed = 0
    for path in paths:
        try:
            models = execute(path, args.timeout)
        except (CellExecutionError, WidgetStateError) as error:
            failed += 1
            first = str(error).strip().splitlines()[:12]
            print(
                f"execute_notebooks: {path} failed, left as it was:",
                *first,
                sep="\n  ",
                file=sys.stderr,
            )
            continue
        print(f"executed {path} ({models} widget models saved)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
