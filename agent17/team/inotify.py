"""Linux's inotify on one folder, through ctypes on the C library; and what file system it is on.

Python has no inotify of its own, and the three calls it takes (`inotify_init1`,
`inotify_add_watch`, a `read`) are not worth a dependency. Everything that can
make notifications unavailable is an `Unavailable` with a reason people can
read: not Linux, the browser, no C library, `inotify_init1` refused (the
per-user instance limit, fs.inotify.max_user_instances), the watch refused
(fs.inotify.max_user_watches), or a file system where writes made on other
hosts are never notified here (NFS, SMB, 9p, FUSE and the like: only the file
systems in LOCAL_FILE_SYSTEMS are trusted, by the `f_type` magic of statfs).

`libc` is an injection seam: a test hands in a stand-in whose calls fail.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent17.browser import IN_BROWSER

IN_MODIFY: Final = 0x00000002
IN_CLOSE_WRITE: Final = 0x00000008
IN_MOVED_TO: Final = 0x00000080
IN_CREATE: Final = 0x00000100
IN_DELETE_SELF: Final = 0x00000400
IN_MOVE_SELF: Final = 0x00000800
IN_UNMOUNT: Final = 0x00002000
IN_Q_OVERFLOW: Final = 0x00004000
IN_IGNORED: Final = 0x00008000
IN_ONLYDIR: Final = 0x01000000

WATCH_GONE: Final = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
"""The folder itself went away (deleted, moved, unmounted): nothing more will be heard."""

_EVENT_HEADER: Final = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name

LOCAL_FILE_SYSTEMS: Final = {
    0x0000EF53: "ext2/ext3/ext4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",
    0x858458F6: "ramfs",
    0x794C7630: "overlayfs",
    0x2FC12FC1: "zfs",
    0xF2F52010: "f2fs",
    0xCA451A4E: "bcachefs",
}
"""File systems of one kernel: every write to them, whichever process makes it, is notified."""

NOT_NOTIFIED_HERE: Final = {
    0x00006969: "nfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x01021997: "9p",
    0x65735546: "fuse",
    0x6A656A63: "virtiofs",
    0x00C36400: "ceph",
    0x0BD00BD0: "lustre",
    0x01161970: "gfs2",
    0x7461636F: "ocfs2",
}
"""Shared or user-space file systems: writes made elsewhere reach this kernel unannounced."""


class Unavailable(Exception):
    """inotify cannot tell us of every change to this folder; `str()` says why."""


@dataclass(frozen=True, slots=True)
class Event:
    """One notification: what happened (the mask) to which name in the folder."""

    mask: int
    name: str


def _c_library(libc: Any) -> Any:
    if libc is not None:
        return libc
    if IN_BROWSER:
        raise Unavailable("the browser has no file notifications")
    if not sys.platform.startswith("linux"):
        raise Unavailable(f"inotify is Linux's, this is {sys.platform}")
    import ctypes
    import ctypes.util

    try:
        library = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        library.inotify_init1.argtypes = [ctypes.c_int]
        library.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        library.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    except (OSError, AttributeError) as error:
        raise Unavailable(f"no C library with inotify: {error}") from None
    return library


def _failed(call: str, hint: str) -> Unavailable:
    import ctypes

    number = ctypes.get_errno()
    text = f"{call} failed: {os.strerror(number)} (errno {number})"
    return Unavailable(f"{text}{hint}" if number in (errno.EMFILE, errno.ENOSPC) else text)


def file_system_of(folder: Path, libc: Any) -> tuple[int, str]:
    """The statfs `f_type` magic of `folder`'s file system, and its name (or the magic in hex)."""
    import ctypes

    buffer = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if libc.statfs(os.fsencode(folder), buffer) != 0:
        raise _failed("statfs", "")
    # f_type is the first field, a C long (an int on 32-bit systems): the low 32 bits are the magic.
    magic = ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF
    name = LOCAL_FILE_SYSTEMS.get(magic) or NOT_NOTIFIED_HERE.get(magic) or f"0x{magic:08x}"
    return magic, name


class Inotify:
    """An inotify instance (non-blocking, closed on exec) with one watch: a folder."""

    def __init__(self, descriptor: int, file_system: str) -> None:
        self._descriptor = descriptor
        self.file_system = file_system
        """The name of the watched folder's file system, as people know it."""

    @classmethod
    def open(cls, folder: Path, mask: int, *, libc: Any = None) -> Inotify:
        """Watch `folder` for the events in `mask`; Unavailable when it would not hear them all."""
        library = _c_library(libc)
        magic, file_system = file_system_of(folder, library)
        if magic not in LOCAL_FILE_SYSTEMS:
            raise Unavailable(
                f"the state folder is on {file_system}, where writes made on another host"
                " may never be notified"
            )
        descriptor = library.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if descriptor < 0:
            raise _failed("inotify_init1", ": the per-user limit, fs.inotify.max_user_instances")
        if library.inotify_add_watch(descriptor, os.fsencode(folder), mask | IN_ONLYDIR) < 0:
            failure = _failed("inotify_add_watch", ": the limit, fs.inotify.max_user_watches")
            os.close(descriptor)
            raise failure
        return cls(descriptor, file_system)

    def fileno(self) -> int:
        """The descriptor to poll: readable when events are queued."""
        return self._descriptor

    def read(self) -> list[Event]:
        """Every event queued now (none if there are none: it never blocks)."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self._descriptor, 65536)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT_HEADER.unpack_from(data, offset)
                offset += _EVENT_HEADER.size
                name = data[offset : offset + length].rstrip(b"\0")
                offset += length
                events.append(Event(mask, os.fsdecode(name)))

    def close(self) -> None:
        """Close the instance (its watch goes with it)."""
        os.close(self._descriptor)
