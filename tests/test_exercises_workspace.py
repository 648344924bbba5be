"""inside_workspace: the check attacks a real folder with `..`, symlinks, a hard link and
absolute paths, on every path of its space, and shows the smallest one a candidate gets wrong."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import wrong_paths

from agent17.exercises import EXERCISES, check
from agent17.exercises.workspace import (
    NAMES,
    build_check_folder,
    inside_workspace_solution,
    path_facts,
    paths,
)

# The attacks the course names, each a path of the space, and what the reference says.
ATTACKS = {
    "..": "a `..` that climbs out",
    "out": "a symlinked folder that leads out",
    "copy.txt": "a hard link to a file outside",
    "notes/link.txt": "a symlinked file that leads out",
    "/": "an absolute path",
    "../workspace2": "a folder beside the workspace, named like it",
    "out/..": "a `..` after a symlink",
}


def test_the_check_folder_is_made_of_real_links(tmp_path: Path) -> None:
    workspace = build_check_folder(tmp_path)
    assert (workspace / "out").is_symlink() and (workspace / "docs").is_symlink()
    assert (workspace / "notes" / "link.txt").is_symlink()
    copy, secret = workspace / "copy.txt", tmp_path / "outside" / "secret.txt"
    assert not copy.is_symlink() and copy.stat().st_nlink == 2
    assert os.path.samefile(copy, secret)  # one file, two names


def _names(path: str) -> int:
    # "/notes" splits into "" and "notes": the "" is the name "/".
    return 1 if path == "/" else len(path.split("/"))


def test_the_space_is_every_path_of_one_to_three_names_shortest_first() -> None:
    space = paths()
    first, rest = len(NAMES), len(NAMES) - 1  # "/" only as the first name
    assert len(space) == len(set(space)) == first + first * rest + first * rest * rest
    assert [_names(path) for path in space] == sorted(_names(path) for path in space)
    assert set(ATTACKS) <= set(space)


def test_every_named_attack_is_outside_and_the_honest_paths_are_inside() -> None:
    facts = path_facts()
    assert {path: facts[path].inside for path in ATTACKS} == dict.fromkeys(ATTACKS, False)
    for honest in ("notes", "notes/plan.md", "docs/plan.md", "notes/..", "plan.md"):
        assert facts[honest].inside, honest


def _wrong_only_on(attack: str) -> Callable[[Path, str], bool]:
    def answer(workspace: Path, relative: str) -> bool:
        right = inside_workspace_solution(workspace, relative)
        return not right if relative == attack else right

    return answer


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_answer_wrong_on_one_attack_alone_is_caught_there(attack: str) -> None:
    result = check("inside_workspace", _wrong_only_on(attack))
    assert not result.passed
    assert f"inside_workspace(…/workspace, {attack!r})" in result.feedback


@pytest.mark.parametrize(
    ("wrong", "smallest"),
    [
        (wrong_paths.by_text_only, "out"),
        (wrong_paths.normalises_before_resolving, "out/.."),
        (wrong_paths.compares_text_prefixes, "../workspace2"),
        (wrong_paths.forgets_hard_links, "copy.txt"),
        (wrong_paths.counts_the_names_of_folders, "notes"),
        (wrong_paths.refuses_every_symlink, "docs"),
        (wrong_paths.refuses_every_parent, "notes/.."),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_each_classic_mistake_fails_on_its_smallest_path(
    wrong: Callable[[Path, str], bool], smallest: str
) -> None:
    result = check("inside_workspace", wrong)
    assert not result.passed
    assert f"inside_workspace(…/workspace, {smallest!r})" in result.feedback


def test_the_reference_and_another_right_answer_pass_and_the_starter_fails() -> None:
    exercise = EXERCISES["inside_workspace"]
    assert check("inside_workspace", exercise.solution).passed
    assert check("inside_workspace", wrong_paths.with_realpath).passed
    assert not check("inside_workspace", exercise.starter).passed


def test_the_feedback_names_no_folder_of_this_machine() -> None:
    feedback = check("inside_workspace", wrong_paths.by_text_only).feedback
    for machine in (tempfile.gettempdir(), os.getcwd(), "agent17-check-", "agent17-paths-"):
        assert machine not in feedback
    assert "…/outside" in feedback  # the place, written from the check's own folder


def test_the_check_leaves_the_callers_folder_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    check("inside_workspace", EXERCISES["inside_workspace"].solution)
    assert list(tmp_path.iterdir()) == []
