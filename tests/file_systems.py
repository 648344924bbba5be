"""Real file systems that fail, for the state-file tests: full, read-only, failing, immutable.

Each is the real thing, not a mock: a tiny tmpfs that fills up, a read-only
bind mount, an ext4 image on a loop device shut down mid-use (every I/O is
then EIO, as on a failing disk), `chattr +i`, and a child process running as
the unprivileged user `nobody`. Mounting needs root (the tests run as root
here and in CI); where the machine refuses, the test is skipped and says why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# EXT4_IOC_SHUTDOWN = _IOR('X', 125, __u32); NOLOGFLUSH: stop at once, like a pulled cable.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_NOLOGFLUSH = 2
CHILD_SECONDS = 60


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=CHILD_SECONDS)


def _mount_or_skip(*arguments: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a real file system needs root")
    if shutil.which("mount") is None:
        pytest.skip("no mount command on this machine")
    done = _run("mount", *arguments)
    if done.returncode != 0:
        pytest.skip(f"this machine refuses the mount: {done.stderr.strip()}")


def _unmount(point: Path) -> None:
    # Lazy: a descriptor a failed test still holds must not leave the mount behind.
    _run("umount", "-l", str(point))


class TinyDisk:
    """A tmpfs of `size` bytes (and a few inodes) that a test fills and frees again."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fillers: list[Path] = []

    def fill(self, leave: int = 0) -> None:
        """Write filler files until the disk is full; then free `leave` bytes of it again."""
        big, spare = self.root / "filler", self.root / "spare"
        if leave:
            _write_until_full(spare, limit=leave)
        _write_until_full(big)
        self._fillers += [big, spare]
        spare.unlink(missing_ok=True)

    def use_up_inodes(self) -> None:
        """Create empty files until no inode is left."""
        folder = self.root / "inodes"
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
        self._fillers.append(folder)
        number = 0
        while True:
            try:
                (folder / str(number)).touch()
            except OSError:
                return
            number += 1

    def free(self) -> None:
        """Remove every filler: the disk has room again."""
        for filler in self._fillers:
            if filler.is_dir():
                shutil.rmtree(filler)
            else:
                filler.unlink(missing_ok=True)
        self._fillers.clear()


def _write_until_full(path: Path, limit: int | None = None) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    written = 0
    try:
        while limit is None or written < limit:
            written += os.write(descriptor, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def tiny_disk(where: Path, size: str = "1m", inodes: int = 200) -> Iterator[TinyDisk]:
    """A fresh tmpfs at `where`, unmounted afterwards."""
    where.mkdir()
    _mount_or_skip(
        "-t", "tmpfs", "-o", f"size={size},nr_inodes={inodes},mode=755", "tmpfs", str(where)
    )
    try:
        yield TinyDisk(where)
    finally:
        _unmount(where)


@contextlib.contextmanager
def read_only_view(folder: Path, where: Path) -> Iterator[Path]:
    """`folder` again at `where`, through a read-only bind mount."""
    where.mkdir()
    _mount_or_skip("--bind", str(folder), str(where))
    try:
        done = _run("mount", "-o", "remount,bind,ro", str(where))
        if done.returncode != 0:
            pytest.skip(f"this machine refuses a read-only bind mount: {done.stderr.strip()}")
        yield where
    finally:
        _unmount(where)


class Ext4Disk:
    """An ext4 image on a loop device; `shut_down()` makes every I/O on it fail with EIO."""

    def __init__(self, image: Path, root: Path) -> None:
        self.image, self.root = image, root

    def shut_down(self) -> None:
        """Stop the file system at once, as a failing disk would (committed data is kept)."""
        descriptor = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            # Only ever this mount: shutting down the disk the tests run on would be a disaster.
            assert os.fstat(descriptor).st_dev != os.stat(self.root.parent).st_dev
            fcntl.ioctl(
                descriptor, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH)
            )
        finally:
            os.close(descriptor)

    def remount(self) -> None:
        """Unmount and mount again: the disk "works" again, with what it had committed."""
        done = _run("umount", str(self.root))
        assert done.returncode == 0, done.stderr
        done = _run("mount", "-o", "loop", str(self.image), str(self.root))
        assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def ext4_disk(where: Path) -> Iterator[Ext4Disk]:
    """A fresh 16 MiB ext4 file system mounted at `where`."""
    image = where.with_name(where.name + ".img")
    with open(image, "wb") as handle:
        handle.truncate(16 * 1024 * 1024)
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("no mkfs.ext4 on this machine")
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed here: {made.stderr.strip()}")
    where.mkdir()
    _mount_or_skip("-o", "loop", str(image), str(where))
    try:
        yield Ext4Disk(image, where)
    finally:
        _unmount(where)


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """`chattr +i` on each path for the block (and `chattr -i` after, whatever happened)."""
    if shutil.which("chattr") is None:
        pytest.skip("no chattr on this machine")
    done: list[Path] = []
    try:
        for path in paths:
            result = _run("chattr", "+i", str(path))
            if result.returncode != 0:
                pytest.skip(f"this file system refuses chattr +i: {result.stderr.strip()}")
            done.append(path)
        yield
    finally:
        for path in done:
            _run("chattr", "-i", str(path))


@contextlib.contextmanager
def folder_for_nobody() -> Iterator[Path]:
    """A folder under /tmp that the user `nobody` can reach (pytest's tmp_path is root's only)."""
    if os.geteuid() != 0:
        pytest.skip("switching to the user nobody needs root")
    folder = Path(tempfile.mkdtemp(prefix="agent17-nobody-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


NOBODY_PRELUDE = """
import grp, os, pwd


def become_nobody():
    # The interpreter lives under /root, which nobody may not enter: the child starts
    # as root, imports what it needs, and only then drops to nobody for good.
    os.setgroups([])
    os.setgid(grp.getgrnam("nogroup").gr_gid)
    os.setuid(pwd.getpwnam("nobody").pw_uid)
    assert os.geteuid() != 0 and os.getuid() != 0
"""


def as_nobody(code: str, *arguments: str) -> dict[str, str]:
    """Run Python `code` (which calls `become_nobody()` after its imports); its JSON line.

    `code` prints one JSON object as its last line, returned here.
    """
    if os.geteuid() != 0:
        pytest.skip("switching to the user nobody needs root")
    done = subprocess.run(
        [sys.executable, "-c", NOBODY_PRELUDE + code, *arguments],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=CHILD_SECONDS,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (done.returncode, done.stdout, done.stderr)
    result: dict[str, str] = json.loads(lines[-1])
    return result
