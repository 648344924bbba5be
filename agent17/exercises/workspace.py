"""The exercise on a teammate's hands: does a path stay inside the workspace?

The check builds a real folder on disk, in the sandbox's scratch folder: a workspace with a
symlinked folder that stays inside, one that leads out, a symlinked file that leads out, a
hard link to a file outside, and a folder beside the workspace whose name starts like the
workspace's. It then asks the candidate about every path of one to three names from a small
alphabet (`..` and `/` among them), shortest first, and compares each answer with the
reference's on a copy of the same folder made in the caller's process (`search`). So the
smallest attack that gets out (or the smallest honest path that is refused) is what a
failure shows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from itertools import product
from pathlib import Path
from typing import Final

from agent17.exercises.search import Answer, Search, shown, value, wrong_kind

InsideWorkspace = Callable[[Path, str], bool]


def inside_workspace_starter(workspace: Path, relative: str) -> bool:
    """True if `relative`, read from `workspace`, leads to a place inside the workspace."""
    where = os.path.normpath(os.path.join(workspace, relative))
    return where == str(workspace) or where.startswith(str(workspace) + os.sep)


def inside_workspace_solution(workspace: Path, relative: str) -> bool:
    """True if `relative`, read from `workspace`, leads to a place inside the workspace."""
    root = workspace.resolve()
    # Every link followed and every `..` taken where it really is: the place the OS would open.
    where = (root / relative).resolve()
    if not where.is_relative_to(root):
        return False
    # A second name of the same file (a hard link) may be outside: one name only, for a file.
    return not (where.is_file() and where.stat().st_nlink > 1)


INSIDE_WORKSPACE_HINT = (
    "Text cannot tell you where a path leads: a name may be a symlink, and a `..` after a"
    " symlink climbs from where the link leads. Ask the file system for the real place (pathlib"
    " can), then compare whole folder names, not the first letters. And a file can have a"
    " second name somewhere else, which no path shows: its link count does. A folder's link"
    " count is always above one (each sub-folder's `..` is a name of it)."
)

WORKSPACE: Final = "workspace"
_OUTSIDE_FILE: Final = "outside/secret.txt"
# Every path of the space is made of these names, shortest paths first, in this order; `/`
# (the root of the file system) only as the first. Each one is an attack or an honest path.
NAMES: Final = ("notes", "plan.md", "docs", "..", "out", "link.txt", "copy.txt", "workspace2", "/")
MAX_NAMES: Final = 3

LAYOUT: Final = """\
  …/                        the check's folder
    outside/secret.txt      not for the model
    workspace/              the workspace
      notes/plan.md
      notes/link.txt        -> ../../outside/secret.txt
      docs                  -> notes
      out                   -> ../outside
      copy.txt              the text of outside/secret.txt
    workspace2/notes.md     beside the workspace, not in it"""


def build_check_folder(folder: Path) -> Path:
    """Make the check's files in `folder` (real links, a hard link if the file system has
    them); return the workspace's real path."""
    folder = Path(os.path.realpath(folder))
    outside = folder / _OUTSIDE_FILE
    outside.parent.mkdir()
    outside.write_text("not for the model\n", encoding="utf-8")
    workspace = folder / WORKSPACE
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "plan.md").write_text("# plan\n", encoding="utf-8")
    (workspace / "notes" / "link.txt").symlink_to("../../outside/secret.txt")
    (workspace / "docs").symlink_to("notes", target_is_directory=True)
    (workspace / "out").symlink_to("../outside", target_is_directory=True)
    try:
        os.link(outside, workspace / "copy.txt")
    except (OSError, AttributeError):  # no hard links here (the browser's Python has no os.link)
        shutil.copyfile(outside, workspace / "copy.txt")
    (folder / "workspace2").mkdir()
    (folder / "workspace2" / "notes.md").write_text("# not yours\n", encoding="utf-8")
    return workspace


def _folder_here() -> Path:
    """The workspace in the current folder (the sandbox's scratch folder), made on first use."""
    here = Path(os.path.realpath(os.getcwd()))
    if not (here / WORKSPACE).is_dir():
        build_check_folder(here)
    return here / WORKSPACE


@cache
def paths() -> tuple[str, ...]:
    """Every path of the space: one to three names, fewest first, then in the order of NAMES."""
    found: list[str] = []
    for count in range(1, MAX_NAMES + 1):
        for names in product(NAMES, repeat=count):
            if "/" in names[1:]:
                continue
            found.append("/" + "/".join(names[1:]) if names[0] == "/" else "/".join(names))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class PathFacts:
    """What one path of the space really is, found on the caller's copy of the folder."""

    inside: bool
    leads_to: str
    kind: str
    first_link: str | None
    link_target: str | None
    by_text_inside: bool
    hard_link: bool


def _place(where: Path, folder: Path) -> str:
    """A place as feedback shows it: beneath the check's folder as `…/x`, never a machine path."""
    if where == folder:
        return "…/ (the check's folder)"
    if where.is_relative_to(folder):
        return "…/" + where.relative_to(folder).as_posix()
    if where == Path(where.anchor):
        return f"{where.anchor} (the root of the file system)"
    if folder.is_relative_to(where):
        return "a folder above the check's folder"
    return where.as_posix()  # from an absolute path: its names are the space's, not the machine's


def _kind(where: Path) -> str:
    if where.is_dir():
        return "a folder"
    if where.is_file():
        return "a file"
    return "nothing there yet"


def _first_link(workspace: Path, relative: str) -> tuple[str, str] | None:
    """The first name of `relative` (from the workspace) that is a symlink, and its target."""
    if relative.startswith("/"):
        return None
    here = workspace
    walked: list[str] = []
    for name in relative.split("/"):
        walked.append(name)
        here = here / name
        if here.is_symlink():
            return "/".join(walked), os.readlink(here)
    return None


def _facts_of(workspace: Path, relative: str) -> PathFacts:
    folder = workspace.parent
    where = (workspace / relative).resolve()
    link = _first_link(workspace, relative)
    by_text = Path(os.path.normpath(workspace / relative))
    hard = where.is_file() and where.stat().st_nlink > 1
    return PathFacts(
        inside=inside_workspace_solution(workspace, relative),
        leads_to=_place(where, folder),
        kind=_kind(where),
        first_link=None if link is None else link[0],
        link_target=None if link is None else link[1],
        by_text_inside=by_text.is_relative_to(workspace),
        hard_link=hard,
    )


@cache
def path_facts() -> dict[str, PathFacts]:
    """The facts of every path, found on a copy of the check's folder made here and removed."""
    folder = tempfile.mkdtemp(prefix="agent17-paths-")
    try:
        workspace = build_check_folder(Path(folder))
        return {relative: _facts_of(workspace, relative) for relative in paths()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _ask(candidate: InsideWorkspace, relative: str) -> object:
    return candidate(_folder_here(), relative)


def _read(got: object, relative: str) -> Answer:
    if type(got) is not bool:
        return wrong_kind(f"return a bool (True or False), not {type(got).__name__}", shown(got))
    return value(got)


def _draw(relative: str) -> str:
    facts = path_facts()[relative]
    return (
        LAYOUT
        + f"\n\n  inside_workspace(…/workspace, {relative!r})"
        + f"\n  leads to {facts.leads_to}: {facts.kind}"
    )


def _explain(relative: str, said: object, right: object) -> str:
    facts = path_facts()[relative]
    words = f"It is {'inside' if right else 'outside'} the workspace, and you said {said}."
    link = (
        f"{facts.first_link} is a symlink to {facts.link_target}"
        if facts.first_link is not None
        else None
    )
    if right:
        if link is not None:
            return f"{words} {link}, which stays inside: where a path leads is what counts."
        if ".." in relative.split("/"):
            return f"{words} Its `..` climbs back to a folder of the workspace: it stays inside."
        if facts.kind == "a folder":
            return (
                f"{words} A folder is never a hard link: its link count is above one because"
                " each sub-folder's `..` (and its own `.`) is a name of it."
            )
        if facts.kind == "nothing there yet":
            return f"{words} Nothing is there yet, but write_file could make it, inside."
        return words
    if relative.startswith("/"):
        return (
            f"{words} An absolute path does not start from the workspace: `workspace / '/'` is `/`."
        )
    if facts.hard_link:
        return (
            f"{words} copy.txt is the very file outside/secret.txt under a second name (a hard"
            " link): no path shows that, its link count (st_nlink, 2 here) does."
        )
    if facts.leads_to.startswith("…/workspace2"):
        return (
            f"{words} …/workspace2 starts with the same letters as …/workspace, but it is"
            " beside it, not in it: compare whole folder names (Path.is_relative_to), not"
            " text."
        )
    if link is not None and facts.by_text_inside:
        if ".." in relative.split("/"):
            return (
                f"{words} {link}, so a `..` after it climbs from where the link leads, not"
                " back into the workspace: follow the links first, then take the `..`s"
                " (os.path.normpath knows no links)."
            )
        return f"{words} {link}: ask where the path really leads (links followed)."
    return f"{words} Its `..` climbs out of the workspace."


INSIDE_WORKSPACE_SEARCH: Final = Search(
    space=paths,
    ask=_ask,
    read=_read,
    reference=lambda relative: path_facts()[relative].inside,
    draw=_draw,
    explain=_explain,
    space_text=(
        "paths of one to three names (notes, plan.md, docs, .., out, link.txt, copy.txt,"
        " workspace2, and / first), on a real folder with symlinks and a hard link"
    ),
    noun="path",
)

INSIDE_WORKSPACE_CHECK: Final = INSIDE_WORKSPACE_SEARCH.checker()
"""Every path of the space, on real folders, compared with the reference's answer."""
