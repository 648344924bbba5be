"""How long the course takes to run: each notebook executed top to bottom, and the total.

Run it from the repository root:

    .venv/bin/python benchmarks/notebook_times.py [NOTEBOOK ...] [--budget SECONDS]

Each notebook runs the way nbval and a student's "Run All" run it: a fresh
kernel (the one installed in this environment), every cell in order, on a
temporary copy of `notebooks/` and `assets/` (the notebooks read their
diagrams from ../assets, and nothing they write lands in the checkout). The
kernel's stdin is /dev/null, as in CI. A notebook's time is from the kernel's
start to its last cell's end, measured with a monotonic clock.

The issue's budget is all notebooks in under 3 minutes on 2 cores. Nothing is
asserted: a missed budget prints MISS, a notebook that fails prints its error
and the run goes on. The load average is printed first, because a machine
shared with other work makes every number larger.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parent.parent
BUDGET_SECONDS = 180.0
CELL_TIMEOUT_SECONDS = 600


def run_notebook(path: Path) -> tuple[float, str | None]:
    """Execute `path` in a fresh kernel; (seconds, None) or (seconds, the first error line)."""
    notebook = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
        record_timing=False,
    )
    started = time.monotonic()
    try:
        client.execute(stdin=subprocess.DEVNULL)
    except CellExecutionError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return time.monotonic() - started, lines[-1] if lines else "a cell failed"
    return time.monotonic() - started, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("notebooks", nargs="*", help="notebook names (default: every 0*.ipynb)")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS, help="seconds for all")
    args = parser.parse_args(argv)

    names = args.notebooks or sorted(path.name for path in (REPO / "notebooks").glob("0*.ipynb"))
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{len(names)} notebooks on {os.cpu_count()} cores; load average {load}")
    print(f"python {sys.version.split()[0]}; budget {args.budget:g} s for all of them")
    print()
    total, failed = 0.0, 0
    with tempfile.TemporaryDirectory(prefix="agent17-notebook-times-") as folder:
        copy = Path(folder)
        shutil.copytree(REPO / "notebooks", copy / "notebooks")
        shutil.copytree(REPO / "assets", copy / "assets")
        for name in names:
            seconds, error = run_notebook(copy / "notebooks" / Path(name).name)
            total += seconds
            failed += error is not None
            result = "ok" if error is None else f"FAILED: {error}"
            print(f"{name:<32} {seconds:7.1f} s  {result}", flush=True)
    verdict = "OK" if total < args.budget and not failed else "MISS"
    print(f"{'total':<32} {total:7.1f} s  {verdict} (budget {args.budget:g} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
