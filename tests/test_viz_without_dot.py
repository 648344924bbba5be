"""A board picture without Graphviz's `dot` program: one line of advice and the board as text.

A student who installed with pip alone has the graphviz Python package but no
`dot` binary. Jupyter (and an ipywidgets Output, as in the replay slider and
the stepper) calls `_repr_mimebundle_`, which runs `dot`: that must not end in
an ExecutableNotFound traceback. With `dot` present nothing may change.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import graphviz
import ipywidgets
import pytest
from IPython.core.formatters import format_display_data

from agent17 import Task, TaskStatus
from agent17.viz import board_digraph
from agent17.viz.dag import NO_DOT_MESSAGE

A = "00000000-0000-4000-8000-001700000001"
B = "00000000-0000-4000-8000-001700000002"
C = "00000000-0000-4000-8000-001700000003"
D = "00000000-0000-4000-8000-001700000004"
NINE = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

BOARD = [
    Task(A, "A", "", TaskStatus.COMPLETED, "alice", ()),
    Task(B, "B", "", TaskStatus.IN_PROGRESS, "bob", ()),
    Task(C, "C", "", TaskStatus.PENDING, None, (A, B)),
    Task(D, "D", "", TaskStatus.PENDING, None, (A,)),
]

EXPECTED_TEXT = f"""{NO_DOT_MESSAGE}
board: small board
t1 A (00000001) · completed · alice
t2 B (00000002) · in_progress · bob · lease until 09:05:00Z (240 s left)
t3 C (00000003) · pending · blocked by t1 (done), t2
t4 D (00000004) · READY · blocked by t1 (done)"""


def _displayed(obj: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """What Jupyter shows for `obj`: IPython's (data, metadata) for its display."""
    data, metadata = format_display_data(obj)  # type: ignore[no-untyped-call]
    return data, metadata


def _small_board() -> graphviz.Digraph:
    return board_digraph(
        BOARD,
        leases={B: NINE + timedelta(minutes=5)},
        now=NINE + timedelta(minutes=1),
        title="small board",
    )


@pytest.fixture
def no_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with nothing on it, so graphviz cannot find `dot`."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("dot") is None


def test_the_advice_is_one_line_naming_the_installers() -> None:
    assert "\n" not in NO_DOT_MESSAGE
    for installer in ("apt-get install graphviz", "brew install graphviz", "conda install"):
        assert installer in NO_DOT_MESSAGE


@pytest.mark.usefixtures("no_dot")
def test_without_dot_the_mimebundle_is_the_advice_and_the_board_as_text() -> None:
    graph = _small_board()
    with pytest.raises(graphviz.ExecutableNotFound):
        graph.pipe(format="svg")  # proof that dot is really missing here
    assert graph._repr_mimebundle_() == {"text/plain": EXPECTED_TEXT}


@pytest.mark.usefixtures("no_dot")
def test_without_dot_jupyter_shows_only_that_text() -> None:
    data, metadata = _displayed(_small_board())
    assert data == {"text/plain": EXPECTED_TEXT}
    assert metadata == {}


@pytest.mark.usefixtures("no_dot")
def test_without_dot_an_output_widget_gets_the_text_not_an_error() -> None:
    picture = ipywidgets.Output()
    picture.append_display_data(_small_board())
    assert picture.outputs == (
        {"output_type": "display_data", "data": {"text/plain": EXPECTED_TEXT}, "metadata": {}},
    )


@pytest.mark.usefixtures("no_dot")
def test_without_dot_an_empty_board_says_so() -> None:
    assert board_digraph([])._repr_mimebundle_() == {"text/plain": f"{NO_DOT_MESSAGE}\n(no tasks)"}


requires_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")


@requires_dot
def test_with_dot_the_mimebundle_is_the_svg_a_plain_digraph_gives() -> None:
    graph = _small_board()
    bundle = graph._repr_mimebundle_()
    assert list(bundle) == ["image/svg+xml"]
    assert bundle == graphviz.Digraph._repr_mimebundle_(graph)
    svg = bundle["image/svg+xml"]
    assert isinstance(svg, str)
    assert svg.startswith("<?xml")
    assert "READY" in svg


@requires_dot
def test_with_dot_jupyter_shows_the_svg_and_the_repr_of_a_plain_digraph() -> None:
    graph = _small_board()
    data, _ = _displayed(graph)
    assert sorted(data) == ["image/svg+xml", "text/plain"]
    # The committed notebook outputs hold exactly this text/plain.
    assert data["text/plain"] == f"<graphviz.graphs.Digraph at {id(graph):#x}>"
    assert repr(graph) == f"<graphviz.graphs.Digraph object at {id(graph):#x}>"
    plain = graphviz.Digraph()
    assert repr(plain) == f"<graphviz.graphs.Digraph object at {id(plain):#x}>"
    assert _displayed(plain)[0]["text/plain"] == f"<graphviz.graphs.Digraph at {id(plain):#x}>"
