"""The pictures: exact DOT for a small board, replay from the event log, the lease timeline."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from IPython.core.formatters import format_display_data

from agent17 import SqliteTaskStore, Task, TaskError, TaskStatus
from agent17.deterministic import ManualClock, uuid_sequence
from agent17.domain import EventKind, TaskEvent
from agent17.viz import (
    active_leases,
    board_at,
    board_digraph,
    board_dot,
    board_table,
    describe_event,
    lease_timeline,
    replay_slider,
)

A = "00000000-0000-4000-8000-001700000001"
B = "00000000-0000-4000-8000-001700000002"
C = "00000000-0000-4000-8000-001700000003"
D = "00000000-0000-4000-8000-001700000004"
NINE = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

SMALL_BOARD = [
    Task(A, "A", "", TaskStatus.COMPLETED, "alice", ()),
    Task(B, 'B "quoted"', "", TaskStatus.IN_PROGRESS, "bob", ()),
    Task(C, "C", "", TaskStatus.PENDING, None, (A, B)),
    Task(D, "D", "", TaskStatus.PENDING, None, (A,)),
]

EXPECTED_DOT = """digraph board {
\tgraph [fontname=Helvetica nodesep=0.3 rankdir=LR size="11,8"]
\tnode [fontname=Helvetica shape=box style="rounded,filled"]
\tedge [arrowsize=0.7]
\tfontsize=14 label="small board" labelloc=t
\tt1 [label="A\\nt1 · 00000001\\ncompleted · alice" color="#009e73" fillcolor="#bfe6d8" penwidth=1]
\tt2 [label="B \\"quoted\\"\\nt2 · 00000002\\nin_progress · bob\\nlease until 09:05:00Z (240 s left)" color="#0072b2" fillcolor="#c6e5f7" penwidth=2]
\tt3 [label="C\\nt3 · 00000003\\npending" color="#777777" fillcolor="#eeeeee" penwidth=1]
\tt4 [label="D\\nt4 · 00000004\\nREADY" color="#e69f00" fillcolor="#fbe3b0" penwidth=3]
\tt1 -> t3 [color="#aaaaaa" style=dashed]
\tt2 -> t3 [color="#444444" style=solid]
\tt1 -> t4 [color="#aaaaaa" style=dashed]
\tsubgraph cluster_legend {
\t\tcolor="#999999" fontsize=10 label=legend style=dashed
\t\tlegend [label=<<table border="0" cellborder="1" cellspacing="3" cellpadding="3"><tr><td bgcolor="#eeeeee" color="#777777" border="1">pending</td></tr><tr><td bgcolor="#fbe3b0" color="#e69f00" border="3">READY</td></tr><tr><td bgcolor="#c6e5f7" color="#0072b2" border="2">in_progress</td></tr><tr><td bgcolor="#bfe6d8" color="#009e73" border="1">completed</td></tr><tr><td border="0"><font color="#444444">&#8212;&#8212;&gt;</font> still waited for</td></tr><tr><td border="0"><font color="#aaaaaa">- - &gt;</font> done (dashed)</td></tr></table>> fontsize=10 shape=plaintext style=""]
\t}
\tt3 -> legend [style=invis]
\tt4 -> legend [style=invis]
}
"""  # noqa: E501


def test_dot_source_of_a_small_board_is_exactly_as_expected() -> None:
    dot = board_dot(
        SMALL_BOARD,
        leases={B: NINE + timedelta(minutes=5)},
        now=NINE + timedelta(minutes=1),
        title="small board",
    )
    assert dot == EXPECTED_DOT


def test_dot_source_is_the_same_on_every_call() -> None:
    first = board_digraph(SMALL_BOARD).source
    assert board_digraph(list(SMALL_BOARD)).source == first


def test_only_a_pending_task_with_every_dependency_completed_is_marked_ready() -> None:
    dot = board_dot(SMALL_BOARD)
    assert 't4 [label="D\\nt4 · 00000004\\nREADY"' in dot
    assert 't3 [label="C\\nt3 · 00000003\\npending"' in dot
    assert dot.count("\\nREADY") == 1


def test_a_lease_is_shown_expired_at_its_exact_last_instant() -> None:
    dot = board_dot(SMALL_BOARD, leases={B: NINE}, now=NINE)
    assert "lease until 09:00:00Z (expired)" in dot


def test_a_lease_without_now_shows_only_its_end() -> None:
    dot = board_dot(SMALL_BOARD, leases={B: NINE})
    assert "lease until 09:00:00Z\\n" not in dot
    assert 'lease until 09:00:00Z"' in dot


def test_a_lease_on_a_task_not_in_progress_is_not_drawn() -> None:
    assert "lease" not in board_dot(SMALL_BOARD, leases={A: NINE, C: NINE})


def test_a_dependency_missing_from_the_board_is_refused_not_drawn() -> None:
    with pytest.raises(ValueError, match="not on this board"):
        board_digraph(SMALL_BOARD[2:])


def test_a_task_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        board_digraph([SMALL_BOARD[0], SMALL_BOARD[0]])


def test_html_looking_subjects_stay_plain_text() -> None:
    task = Task(A, "<b>bold</b>", "", TaskStatus.PENDING, None, ())
    assert 'label="<b>bold</b>\\nt1' in board_dot([task])


def test_board_table_lists_subject_status_owner_dependencies_and_short_id() -> None:
    assert board_table(SMALL_BOARD) == "\n".join(
        [
            "node  subject     status           owner  blocked by     id",
            "----  ----------  ---------------  -----  -------------  --------",
            "t1    A           completed        alice  -              00000001",
            't2    B "quoted"  in_progress      bob    -              00000002',
            't3    C           pending          -      A, B "quoted"  00000003',
            "t4    D           pending (ready)  -      A              00000004",
        ]
    )


# -- from a real store -----------------------------------------------------------------


@pytest.fixture
def story(tmp_path: Path) -> Iterator[tuple[SqliteTaskStore, ManualClock]]:
    """A, B, C(A, B): alice completes A, bob's lease on B runs out, carol completes B."""
    clock = ManualClock()
    store = SqliteTaskStore(
        tmp_path,
        clock=clock,
        new_task_id=uuid_sequence(17),
        new_claim_token=uuid_sequence(71),
        lease_seconds=300,
    )
    a = store.create_task("A")
    b = store.create_task("B")
    store.create_task("C", blocked_by=[a.id, b.id])
    claim_a = store.claim_next("alice")
    claim_b = store.claim_next("bob")
    assert claim_a is not None and claim_b is not None
    clock.advance(60)
    store.complete_task(a.id, "alice", claim_a.claim_token)
    clock.advance(240)
    with pytest.raises(TaskError):
        store.complete_task(b.id, "bob", claim_b.claim_token)
    claim_b2 = store.claim_next("carol")
    assert claim_b2 is not None
    clock.advance(30)
    store.complete_task(b.id, "carol", claim_b2.claim_token)
    yield store, clock
    store.close()


def test_the_story_writes_the_expected_event_log(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    kinds = [(event.kind.value, event.owner) for event in store.events()]
    assert kinds == [
        ("created", None),
        ("created", None),
        ("created", None),
        ("claimed", "alice"),
        ("claimed", "bob"),
        ("completed", "alice"),
        ("lease_expired", "bob"),
        ("claimed", "carol"),
        ("completed", "carol"),
    ]


def _states(tasks: list[Task]) -> list[tuple[str, str, str | None]]:
    return [(task.subject, task.status.value, task.owner) for task in tasks]


def test_board_at_replays_the_board_step_by_step(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    events, tasks = store.events(), store.list_tasks()
    assert board_at(events, tasks, 0) == []
    assert _states(board_at(events, tasks, 2)) == [("A", "pending", None), ("B", "pending", None)]
    assert _states(board_at(events, tasks, 5)) == [
        ("A", "in_progress", "alice"),
        ("B", "in_progress", "bob"),
        ("C", "pending", None),
    ]
    assert _states(board_at(events, tasks, 7)) == [
        ("A", "completed", "alice"),
        ("B", "pending", None),
        ("C", "pending", None),
    ]
    assert board_at(events, tasks, len(events)) == tasks


def test_board_at_keeps_blocked_by_from_the_final_tasks(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    tasks = store.list_tasks()
    replayed = board_at(store.events(), tasks, 3)
    assert replayed[2].blocked_by == tasks[2].blocked_by


@pytest.mark.parametrize("step", [-1, 10])
def test_board_at_refuses_a_step_outside_the_log(
    story: tuple[SqliteTaskStore, ManualClock], step: int
) -> None:
    store, _ = story
    with pytest.raises(ValueError, match="step must be between 0 and 9"):
        board_at(store.events(), store.list_tasks(), step)


def test_board_at_refuses_events_of_unknown_tasks() -> None:
    event = TaskEvent(1, EventKind.CREATED, A, NINE)
    with pytest.raises(ValueError, match="not in `tasks`"):
        board_at([event], [], 1)


def test_events_are_described_as_sentences(story: tuple[SqliteTaskStore, ManualClock]) -> None:
    store, _ = story
    tasks = store.list_tasks()
    lines = [describe_event(event, tasks) for event in store.events()]
    assert lines[3] == "#4 09:00:00Z alice claimed A (lease until 09:05:00Z)"
    assert lines[5] == "#6 09:01:00Z alice completed A"
    assert lines[6] == "#7 09:05:00Z bob's lease on B expired; B is pending again"


def test_active_leases_follow_claims_completions_and_expiries(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    events = store.events()
    b_id = store.list_tasks()[1].id
    a_id = store.list_tasks()[0].id
    assert active_leases(events[:5], store.lease) == {
        a_id: NINE + timedelta(minutes=5),
        b_id: NINE + timedelta(minutes=5),
    }
    assert active_leases(events[:7], store.lease) == {}
    assert active_leases(events[:8], store.lease) == {b_id: NINE + timedelta(minutes=10)}
    assert active_leases(events, store.lease) == {}


def test_the_timeline_shows_one_lane_per_teammate_and_an_expired_bar(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    timeline = lease_timeline(store.events(), store.list_tasks(), lease=store.lease)
    assert timeline.owners == ("alice", "bob", "carol")
    assert [(bar.owner, bar.label, bar.outcome) for bar in timeline.bars] == [
        ("alice", "A", "completed"),
        ("bob", "B", "expired"),
        ("carol", "B", "completed"),
    ]
    assert timeline.describe().splitlines() == [
        "alice  A  0s -> 60s  completed (lease until 300s)",
        "bob    B  0s -> 300s  expired (lease until 300s)",
        "carol  B  300s -> 330s  completed (lease until 600s)",
    ]
    assert timeline.svg.count('<g class="lease expired">') == 1
    assert 'fill="url(#expired-hatch)"' in timeline.svg
    # Each claim draws its whole lease window; completions and expiries are marked.
    assert timeline.svg.count('class="window"') == 3
    assert timeline.svg.count('class="mark"') == 3
    assert timeline._repr_svg_() == timeline.svg


def test_the_timeline_svg_is_deterministic(story: tuple[SqliteTaskStore, ManualClock]) -> None:
    store, _ = story
    first = lease_timeline(store.events(), store.list_tasks(), lease=store.lease).svg
    second = lease_timeline(list(reversed(store.events())), store.list_tasks(), lease=store.lease)
    assert second.svg == first
    assert first.startswith("<svg") and first.endswith("</svg>")


def test_a_claim_still_held_is_an_open_bar_up_to_its_lease_end(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    store.create_task("D")
    assert store.claim_next("alice") is not None
    timeline = lease_timeline(store.events(), store.list_tasks(), lease=store.lease)
    assert timeline.bars[-1].outcome == "open"
    assert timeline.bars[-1].end - timeline.bars[-1].start == timedelta(minutes=5)
    assert 'stroke-dasharray="4 3"' in timeline.svg


def test_an_empty_log_gives_an_empty_timeline() -> None:
    timeline = lease_timeline([])
    assert timeline.bars == ()
    assert "no claims yet" in timeline.svg
    assert timeline.describe() == "(no claims)"


# -- the slider, in the kernel -----------------------------------------------------------


def _svg_of(output: object) -> str:
    outputs = output.outputs  # type: ignore[attr-defined]
    assert len(outputs) == 1
    assert all(item["output_type"] != "error" for item in outputs)
    svg = outputs[0]["data"]["image/svg+xml"]
    assert isinstance(svg, str)
    return svg


def test_moving_the_slider_redraws_the_board_and_the_caption(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    replay = replay_slider(store, step=5)
    slider, caption, picture = replay.children
    assert slider.max == 9
    assert caption.value == "#5 09:00:00Z bob claimed B (lease until 09:05:00Z)"
    at_five = _svg_of(picture)
    assert "in_progress · bob" in at_five

    slider.value = 7
    assert caption.value == "#7 09:05:00Z bob's lease on B expired; B is pending again"
    at_seven = _svg_of(picture)
    assert at_seven != at_five
    assert "in_progress · bob" not in at_seven

    slider.value = 0
    assert caption.value == "#0 the empty board"
    assert "t1" not in board_digraph(board_at(store.events(), store.list_tasks(), 0)).source


def test_the_slider_starts_at_the_last_event_and_accepts_a_plain_event_list(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    replay = replay_slider(store.events(), store.list_tasks(), lease=store.lease)
    slider, caption, picture = replay.children
    assert slider.value == 9
    assert caption.value == "#9 09:05:30Z carol completed B"
    assert "completed · carol" in _svg_of(picture)


def test_the_slider_refuses_a_list_of_events_without_tasks(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    with pytest.raises(ValueError, match="final tasks"):
        replay_slider(store.events())


def test_the_slider_spans_the_output_width_and_starts_at_the_step_asked_for(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    replay = replay_slider(store, step=7)
    slider, caption, picture = replay.children
    assert slider.value == 7
    assert caption.value == "#7 09:05:00Z bob's lease on B expired; B is pending again"
    for widget in (replay, slider, caption, picture):
        assert widget.layout.width == "100%"
    with pytest.raises(ValueError, match="between 0 and 9"):
        replay_slider(store, step=10)


def test_a_displayed_slider_leaves_the_board_at_its_step_as_a_static_svg(
    story: tuple[SqliteTaskStore, ManualClock],
) -> None:
    store, _ = story
    replay = replay_slider(store, step=5)
    data, _ = format_display_data(replay)  # type: ignore[no-untyped-call]
    # JupyterLab draws the widget; GitHub and nbviewer, without widget state, the SVG.
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "in_progress · bob" in data["image/svg+xml"]
    assert data["image/svg+xml"] == _svg_of(replay.children[2])
    assert data["text/plain"] == (
        "replay of 9 events at step #5 09:00:00Z bob claimed B (lease until 09:05:00Z)"
    )
    replay.children[0].value = 9
    later, _ = format_display_data(replay)  # type: ignore[no-untyped-call]
    assert "completed · carol" in later["image/svg+xml"]
    assert "in_progress · bob" not in later["image/svg+xml"]


def test_without_dot_a_displayed_slider_carries_the_board_as_text(
    story: tuple[SqliteTaskStore, ManualClock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = story
    monkeypatch.setenv("PATH", str(tmp_path))  # graphviz cannot find `dot` now
    replay = replay_slider(store, step=5)
    data, _ = format_display_data(replay)  # type: ignore[no-untyped-call]
    assert "image/svg+xml" not in data
    assert data["text/plain"].splitlines()[:3] == [
        "replay of 9 events at step #5 09:00:00Z bob claimed B (lease until 09:05:00Z)",
        "board: replay, step #5 09:00:00Z bob claimed B (lease until 09:05:00Z)",
        "t1 A (00000001) · in_progress · alice · lease until 09:05:00Z",
    ]


# -- the package's own code on screen ---------------------------------------------------


def test_show_source_prints_the_packages_own_code_highlighted() -> None:
    import inspect
    import textwrap

    from agent17.team.teammate import Teammate
    from agent17.viz.source import show_source

    view = show_source(Teammate.tick)
    assert str(view) == textwrap.dedent(inspect.getsource(Teammate.tick)).rstrip("\n")
    html = view._repr_html_()
    assert ">def</span>" in html and "tick" in html  # a highlighted keyword, the real name
    assert "agent17.team.teammate.Teammate.tick" in html  # the caption says where it lives


def test_sql_on_screen_has_no_error_boxes_on_either_engines_dialect() -> None:
    # The generic SQL lexer boxed PostgreSQL's $$ quoting in red, like a syntax error.
    from agent17.store import sqlite
    from agent17.viz.source import show_source

    schema = (Path(sqlite.__file__).parent / "postgres_schema.sql").read_text()

    def function(name: str) -> str:
        return schema[schema.index(f"CREATE FUNCTION {name}(") :].split("$$;", 1)[0] + "$$;"

    for sql in (function("lock_board"), function("claim_next"), sqlite.CLAIM_NEXT_SQL):
        html = show_source(sql)._repr_html_()
        assert "solid #F00" not in html, sql
        assert "UPDATE" in html or "CREATE" in html
