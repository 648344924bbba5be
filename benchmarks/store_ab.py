"""This tree's store against another checkout's, cycle for cycle, interleaved: A/B on one machine.

Run it from the repository root:

    .venv/bin/python benchmarks/store_ab.py --compare-with PATH [--dir DIR] [--rounds N] [--batch N]

store_bench.py runs the other checkout after this one, so on a machine shared with
other work (fsync latency and CPU swing by several times within a minute) its two
columns are minutes apart. Here two long-lived processes, one per checkout, each on
its own board in DIR, run `--batch` claim_next + complete_task cycles in turn, for
`--rounds` rounds: each round's ratio compares two batches run seconds apart. It
prints CPU and wall time per cycle (medians) and the median of the rounds' ratios.
On a tmpfs DIR (`/dev/shm`) fsync costs nothing and the store's own work shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORKER = """
import sys, time
from agent17 import SqliteTaskStore
store = SqliteTaskStore(sys.argv[1], lease_seconds=86400.0)
store.create_tasks([(f"task {n}", "", ()) for n in range(int(sys.argv[2]))])
print("ready", flush=True)
for line in sys.stdin:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(int(line)):
        claim = store.claim_next("worker")
        store.complete_task(claim.task.id, "worker", claim.claim_token)
    print(time.process_time() - cpu, time.perf_counter() - wall, flush=True)
store.close()
"""


def _worker(tree: Path, board: Path, tasks: int) -> subprocess.Popen[str]:
    environment = dict(os.environ, PYTHONPATH=str(tree))
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(board), str(tasks)],
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    return worker


def _batch(worker: subprocess.Popen[str], cycles: int) -> tuple[float, float]:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(f"{cycles}\n")
    worker.stdin.flush()
    cpu, wall = worker.stdout.readline().split()
    return float(cpu) / cycles * 1e6, float(wall) / cycles * 1e6


def main() -> int:
    """Run the interleaved rounds and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--compare-with", type=Path, required=True)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=300)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    root = Path(tempfile.mkdtemp(prefix="agent17-ab-", dir=args.dir))
    tasks = args.rounds * args.batch + 100
    trees = {"this tree": here, args.compare_with.name: args.compare_with.resolve()}
    started = time.monotonic()
    try:
        workers = {
            name: _worker(tree, root / str(n), tasks)
            for n, (name, tree) in enumerate(trees.items())
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        names = list(trees)
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else names[::-1]:
                times[name].append(_batch(workers[name], args.batch))
        for worker in workers.values():
            assert worker.stdin is not None
            worker.stdin.close()
            worker.wait(60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mine, theirs = (times[name] for name in names)
    print(f"{args.rounds} rounds of {args.batch} claim+complete cycles each, in {root.parent}")
    for name in names:
        cpu = statistics.median(c for c, _ in times[name])
        wall = statistics.median(w for _, w in times[name])
        print(f"  {name:<20} CPU {cpu:8.1f} µs/cycle   wall {wall:8.1f} µs/cycle")
    for what, index in (("CPU", 0), ("wall", 1)):
        ratio = statistics.median(a[index] / b[index] for a, b in zip(mine, theirs, strict=True))
        print(f"  {what} this tree / {names[1]}: x{ratio:.3f} (median of the rounds' ratios)")
    print(f"ran for {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
