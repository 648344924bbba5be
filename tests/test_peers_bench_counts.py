"""The peers benchmark's exactly-once count, on a real litequeue file (needs the bench extra)."""

from __future__ import annotations

import collections
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("litequeue", reason="needs the bench extra: pip install -e '.[bench]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import peer_queues

JOBS = 6


@pytest.fixture
def ran() -> Iterator[list[int]]:
    peer_queues.RAN.keys.clear()
    yield peer_queues.RAN.keys
    peer_queues.RAN.keys.clear()


def _count(place: str, expected: list[int], ran: list[int]) -> tuple[int, int]:
    peer = peer_queues.LITEQUEUE
    peer.work(place, lambda: None)
    return peer_queues.tally(expected, collections.Counter(ran), peer.done(place))


def test_a_clean_drain_counts_no_double_and_no_loss(tmp_path: Path, ran: list[int]) -> None:
    expected = peer_queues.LITEQUEUE.enqueue(str(tmp_path), JOBS)

    assert _count(str(tmp_path), expected, ran) == (0, 0)
    assert sorted(ran) == expected


def test_a_job_run_twice_and_a_job_never_marked_done_are_both_counted(
    tmp_path: Path, ran: list[int]
) -> None:
    expected = peer_queues.LITEQUEUE.enqueue(str(tmp_path), JOBS)
    queue = peer_queues.litequeue_at(str(tmp_path))
    queue.put("3")  # job 3 queued twice: it runs, and is marked done, twice
    taken = queue.pop()  # job 0: its worker runs it, then dies before marking it done
    queue.close()
    assert taken is not None and taken.data == "0"
    ran.append(0)  # only the storage can tell that job 0 was lost

    assert _count(str(tmp_path), expected, ran) == (1, 1)
