"""The classic wrong answers to `inside_workspace`, and another right one.

Each function has one line above it saying the mistake it makes; `wrong_answers.WRONG_ANSWERS`
lists them with words their feedback must contain.
"""

from __future__ import annotations

import os
from pathlib import Path


# Normalises the text of the path and never asks where a link leads.
def by_text_only(workspace: Path, relative: str) -> bool:
    return Path(os.path.normpath(workspace / relative)).is_relative_to(workspace)


def _one_name(where: Path) -> bool:
    return not (where.is_file() and where.stat().st_nlink > 1)


# Takes the `..`s by text first, then follows the links of what is left.
def normalises_before_resolving(workspace: Path, relative: str) -> bool:
    where = Path(os.path.normpath(workspace / relative)).resolve()
    return where.is_relative_to(workspace.resolve()) and _one_name(where)


# Compares the first letters of the two paths, not whole folder names.
def compares_text_prefixes(workspace: Path, relative: str) -> bool:
    where = (workspace / relative).resolve()
    return str(where).startswith(str(workspace.resolve())) and _one_name(where)


# Follows every link and `..`, but never asks whether a file has a second name.
def forgets_hard_links(workspace: Path, relative: str) -> bool:
    return (workspace / relative).resolve().is_relative_to(workspace.resolve())


# Counts the names of folders too, and a folder always has more than one.
def counts_the_names_of_folders(workspace: Path, relative: str) -> bool:
    where = (workspace / relative).resolve()
    if not where.is_relative_to(workspace.resolve()):
        return False
    return not (where.exists() and where.stat().st_nlink > 1)


# Refuses every symlink, even one that stays inside.
def refuses_every_symlink(workspace: Path, relative: str) -> bool:
    here = workspace
    for name in relative.split("/"):
        here = here / name
        if here.is_symlink():
            return False
    return forgets_hard_links(workspace, relative) and _one_name(here)


# Refuses every path with a `..` in it, even one that climbs back into the workspace.
def refuses_every_parent(workspace: Path, relative: str) -> bool:
    if ".." in relative.split("/"):
        return False
    return forgets_hard_links(workspace, relative) and _one_name((workspace / relative).resolve())


# Right: os.path.realpath and os.path.commonpath, with the link count of a file.
def with_realpath(workspace: Path, relative: str) -> bool:
    root = os.path.realpath(workspace)
    where = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([root, where]) != root:
        return False
    return not (os.path.isfile(where) and os.stat(where).st_nlink != 1)
