"""What agent17 reads beside a state file: the -wal's frames, the -shm's counters, its record.

Formats only; what they decide is wal_owner.py's.

- The -wal (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte
  header (magic, version, page size, checkpoint sequence, two salts, a
  checksum), then frames of a 24-byte header (page number, the database's size
  in pages on a commit frame, the salts, a running checksum) and one page.
  SQLite replays the frames whose salts match the header's and whose checksums
  chain, up to the last commit frame among them; `read_frames` finds exactly
  those.
- The -shm, the wal-index (https://www.sqlite.org/walformat.html; every
  SQLite since 3.7.0 shares it): its header says how many frames the -wal holds
  and how many a checkpoint has copied back, and its hash tables list each
  frame's page number. The counts are read after a commit, to tell when a
  checkpoint is due (a torn read costs one early or late checkpoint); the page
  numbers under the write lock, where nobody changes them.
- The owner record `<file>-wal-owner`: a lineage (8 random bytes), the page
  size, the database file's state when it was recorded (inode, size, mtime and
  ctime: any write, rename or copy changes one), and an 8-byte BLAKE2b hash of
  each of its pages. Written whole or not at all.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import os
import struct
import tempfile
from collections.abc import Iterable, Iterator, KeysView
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from agent17.armour.held_files import Held

HASH_BYTES: Final = 8
_WAL_HEADER: Final = struct.Struct(">8I")
_FRAME_HEADER: Final = struct.Struct(">6I")
_WAL_VERSION: Final = 3007000
_CHECKSUM_ORDER: Final = {0x377F0682: "<", 0x377F0683: ">"}  # the magic says the word order
_WORD: Final = 0xFFFFFFFF
_FRAMES_PER_READ: Final = 256

# The -shm: its header's version, mxFrame (frames in the -wal) and nBackfill (frames
# copied back), in the byte order of the machine, as SQLite's wal.c lays them out.
_INDEX_VERSION: Final = struct.Struct("=I")
_INDEX_FRAMES_AT: Final = 16
_INDEX_BACKFILLED_AT: Final = 96
_INDEX_BYTES: Final = 100
# The hash tables: 32 KiB blocks, whose first half lists the page numbers of 4096
# frames (the first block's, after the 136-byte header, of 4062).
_INDEX_BLOCK: Final = 32768
_INDEX_HEADER_BYTES: Final = 136

# magic, lineage, page size, inode, size, mtime, ctime, pages
_RECORD_HEADER: Final = struct.Struct(">8s8sIQQqqI")
_RECORD_MAGIC: Final = b"a17own2\n"
_READ_CHUNK: Final = 1 << 20

FileState = tuple[int, int, int, int]
"""(inode, size, mtime_ns, ctime_ns) of a database file: compared before anything is hashed."""


def state_of(info: os.stat_result) -> FileState:
    """The (inode, size, mtime_ns, ctime_ns) of a stat result."""
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@dataclass(frozen=True)
class Frames:
    """A -wal's frames: their page size, the pages they hold, the database's size after them."""

    page_size: int
    database_pages: int
    versions: dict[int, set[bytes]]
    """The hash of every version of each page the frames hold."""

    @property
    def pages(self) -> KeysView[int]:
        """The pages the frames hold."""
        return self.versions.keys()


@dataclass(frozen=True)
class Record:
    """What the owner record says about the database file as agent17 last left it."""

    lineage: bytes
    page_size: int
    state: FileState
    hashes: bytes

    @property
    def pages(self) -> int:
        """How many pages the recorded file had."""
        return len(self.hashes) // HASH_BYTES


def read_frames(wal: Path) -> Frames | None:
    """The frames SQLite would replay from `wal` (None: none at all)."""
    try:
        handle = open(wal, "rb")  # noqa: SIM115 (closed below; a -wal carries no SQLite lock)
    except FileNotFoundError:
        return None
    with handle:
        header = handle.read(_WAL_HEADER.size)
        if len(header) < _WAL_HEADER.size:
            return None
        magic, version, page_size, _, *salts, sum0, sum1 = _WAL_HEADER.unpack(header)
        order = _CHECKSUM_ORDER.get(magic)
        valid_size = 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
        if order is None or version != _WAL_VERSION or not valid_size:
            return None
        sums = _checksum(header[:24], 0, 0, order)
        if sums != (sum0, sum1):
            return None
        pages: list[int] = []
        hashes: list[bytes] = []
        committed, database_pages = 0, 0
        for (page, size_after, *frame_salts, sum0, sum1), frame in _frames(handle, page_size):
            if page == 0 or frame_salts != salts:
                break
            sums = _checksum(frame[:8], *sums, order)
            if _checksum(frame[_FRAME_HEADER.size :], *sums, order) != (sum0, sum1):
                break
            sums = sum0, sum1
            pages.append(page)
            hashes.append(page_hash(frame[_FRAME_HEADER.size :]))
            if size_after:
                committed, database_pages = len(pages), size_after
    if committed == 0:
        return None
    versions: dict[int, set[bytes]] = {}
    for page, version in zip(pages[:committed], hashes[:committed], strict=True):
        versions.setdefault(page, set()).add(version)
    return Frames(page_size, database_pages, versions)


def _frames(handle: BinaryIO, page_size: int) -> Iterator[tuple[tuple[int, ...], memoryview]]:
    """Each whole frame after the -wal's header: its header's fields, and its bytes."""
    size = _FRAME_HEADER.size + page_size
    while chunk := handle.read(size * _FRAMES_PER_READ):  # a read per frame costs more
        view = memoryview(chunk)
        for start in range(0, len(chunk) - size + 1, size):
            yield _FRAME_HEADER.unpack_from(chunk, start), view[start : start + size]


def _checksum(data: bytes | memoryview, sum0: int, sum1: int, order: str) -> tuple[int, int]:
    words = iter(struct.unpack(f"{order}{len(data) // 4}I", data))
    for first, second in zip(words, words, strict=True):
        sum0 = (sum0 + first + sum1) & _WORD
        sum1 = (sum1 + second + sum0) & _WORD
    return sum0, sum1


def wal_pages(shm: Held, frames: int) -> set[int]:
    """The page numbers of the -wal's first `frames` frames, from the -shm's hash tables."""
    pages: set[int] = set()
    first, block = 1, 0
    while first <= frames:
        start = block * _INDEX_BLOCK + (_INDEX_HEADER_BYTES if block == 0 else 0)
        capacity = (_INDEX_BLOCK // 2 - (start - block * _INDEX_BLOCK)) // 4
        count = min(capacity, frames - first + 1)
        numbers = array.array("I", os.pread(shm.descriptor, count * 4, start))
        pages.update(numbers)
        first, block = first + count, block + 1
    return pages


def wal_counts(shm: Held) -> tuple[int, int] | None:
    """(frames in the -wal, frames copied back) from the -shm, or None if it holds no header yet."""
    data = os.pread(shm.descriptor, _INDEX_BYTES, 0)
    if len(data) < _INDEX_BYTES or _INDEX_VERSION.unpack_from(data)[0] != _WAL_VERSION:
        return None
    (frames,) = _INDEX_VERSION.unpack_from(data, _INDEX_FRAMES_AT)
    (backfilled,) = _INDEX_VERSION.unpack_from(data, _INDEX_BACKFILLED_AT)
    return frames, backfilled


def database_page_size(database: Held) -> int | None:
    """The page size a database file's header names, or None if it has no header."""
    header = os.pread(database.descriptor, 100, 0)
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    (size,) = struct.unpack_from(">H", header, 16)
    return 65536 if size == 1 else size


def page_hashes(database: Held, page_size: int, pages: Iterable[int] | None = None) -> bytes:
    """The hash of each page of the file (or of `pages`, 1-based, in that order)."""
    if pages is not None:
        return b"".join(
            page_hash(os.pread(database.descriptor, page_size, (page - 1) * page_size))
            for page in pages
        )
    hashes = bytearray()
    chunk = max(1, _READ_CHUNK // page_size) * page_size
    offset = 0
    while len(data := os.pread(database.descriptor, chunk, offset)) >= page_size:
        view = memoryview(data)
        for start in range(0, len(data) - page_size + 1, page_size):
            hashes += page_hash(view[start : start + page_size])
        offset += chunk
    return bytes(hashes)


def rehashed(record: Record, database: Held, pages: Iterable[int], size: int) -> bytes:
    """`record`'s hashes, for a file now `size` bytes long whose `pages` may have changed."""
    count = size // record.page_size
    hashes = bytearray(record.hashes[: count * HASH_BYTES].ljust(count * HASH_BYTES, b"\0"))
    changed = sorted(
        {page for page in pages if page <= count} | set(range(record.pages + 1, count + 1))
    )
    fresh = page_hashes(database, record.page_size, changed)
    for index, page in enumerate(changed):
        hashes[(page - 1) * HASH_BYTES : page * HASH_BYTES] = fresh[
            index * HASH_BYTES : (index + 1) * HASH_BYTES
        ]
    return bytes(hashes)


def page_hash(page: bytes | memoryview) -> bytes:
    """The hash the record keeps of one page."""
    return hashlib.blake2b(page, digest_size=HASH_BYTES).digest()


def read_record(path: Path) -> Record | None:
    """The record at `path`, or None when there is none or it is not one."""
    # O_NONBLOCK: a FIFO swapped in after the path checks must not hang the open.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        return None
    with open(descriptor, "rb") as handle:
        header = handle.read(_RECORD_HEADER.size)
        if len(header) < _RECORD_HEADER.size:
            return None
        magic, lineage, page_size, inode, size, mtime, ctime, pages = _RECORD_HEADER.unpack(header)
        if magic != _RECORD_MAGIC:
            return None
        hashes = handle.read(pages * HASH_BYTES + 1)
    if len(hashes) != pages * HASH_BYTES:
        return None
    return Record(lineage, page_size, (inode, size, mtime, ctime), hashes)


def write_record(path: Path, record: Record) -> None:
    """Write `record` at `path` whole or not at all, durably (file, rename, folder)."""
    header = _RECORD_HEADER.pack(
        _RECORD_MAGIC, record.lineage, record.page_size, *record.state, record.pages
    )
    folder = path.parent
    descriptor, temporary = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(header + record.hashes)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    sync_folder(folder)


def sync_folder(folder: Path) -> None:
    """fsync a folder, so the names just made or changed in it survive a power cut."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
