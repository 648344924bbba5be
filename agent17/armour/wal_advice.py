"""What a state file says when the -wal beside it is not its own; why following it loses nothing.

Each message names the files, says what was (not) done, and ends with what to
do. Followed literally, none deletes or overwrites anything that holds a
committed transaction (tests/test_state_file_restore.py runs each advice):

- "stop every teammate and program ..., then open it again": stopping a
  program loses nothing committed; the next opener sets the other file's -wal
  aside, renamed into a folder of its own, never deleted.
- the -journal's two cases: a journal moved out of the folder is kept, and
  SQLite rolling back its own interrupted transaction is what a journal is for.
- "open it again" after the file changed while opening: the opener decides
  again, as above.
"""

from __future__ import annotations

from pathlib import Path


def in_use(path: Path, wal: Path) -> str:
    """A -wal written for the file that was at `path` before, which a program still has open."""
    return (
        f"{wal} holds transactions written for the file that was at {path} before"
        f" ({path.name} was replaced or changed outside agent17: a backup restored, a file"
        " copied over it), and a program still has that file open, so nothing was opened"
        " and every file was left as it was. To go on: stop every teammate and program"
        f" using this workspace, then open it again; that -wal is then set aside in"
        f" {path.parent}, never deleted"
    )


def set_aside(path: Path, wal: Path, folder: Path) -> str:
    """The -wal of the file `path` replaced went into `folder`."""
    return (
        f"{path} was replaced or changed outside agent17 (a backup restored?) while"
        f" {wal.name} still held the last transactions of the file it replaced: replaying"
        " them would have mixed the two, so they were set aside, never deleted, in"
        f" {folder}, and {path.name} opened as it is now"
    )


def changed_under_store(path: Path, wal: Path, what: str) -> str:
    """The file an open store uses was written over outside agent17."""
    return (
        f"{path} was changed outside agent17 while this {what} had it open (a backup copied"
        f" over it?), so {wal.name} holds transactions of the file that was there before:"
        " nothing was written, and this store takes no more calls. To go on: stop every"
        " teammate and program using this workspace, then open it again (that -wal is"
        " then set aside beside it, never deleted)"
    )


def changed_while_opening(path: Path, wal: Path) -> str:
    """The file changed between the opener's check and its first write."""
    return (
        f"{path} changed while it was being opened, and {wal.name} does not belong to it"
        " now; nothing was written. Open it again"
    )


def journal(path: Path, journal: Path) -> str:
    """A rollback journal beside a file that changed since agent17 last had it."""
    return (
        f"{journal} holds an interrupted transaction's old pages, and {path.name} changed"
        " since agent17 last had it open, so whether the journal belongs to it cannot be"
        " told: nothing was opened and every file was left as it was. To go on: if"
        f" {path.name} was replaced (a backup restored), move {journal.name} out of"
        f" {path.parent}; if not, open it once with the sqlite3 program (sqlite3 {path}"
        " 'PRAGMA quick_check'), which rolls that transaction back. Then open it again"
    )
