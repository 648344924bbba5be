"""The browser edition's size and its cold load, in Debian's headless Chromium, offline.

    .venv/bin/python benchmarks/site_cold_load.py [--rounds 3] [--notebook 01_the_race.ipynb]

Builds site/ if it is not current (./scripts/site.sh), serves it on 127.0.0.1,
and per round opens one notebook in a Chromium with a new, empty profile (no
cache: what a student's first visit pays), every request off 127.0.0.1
aborted. It prints the site's size and, per round: the seconds until the
notebook is on screen with its Pyodide kernel idle (Pyodide, the packages and
agent17 loaded), and until the first code cell's output shows after Run All,
both counted from the navigation; the requests blocked (it must be 0). Then
the same with the browser's cache warm (a second page in the same profile).
Nothing here is a test: no time is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from site_harness import (
    KERNEL_READY_MS,
    built_site,
    offline_chromium,
    serving,
    wait_for_idle_kernel,
)

FIRST_OUTPUT = """() => {
    const cells = window.jupyterapp.shell.currentWidget.content.widgets
        .filter(cell => cell.model.type === 'code');
    return cells.length > 0 && cells[0].model.outputs.length > 0
        && cells[0].model.executionCount !== null;
}"""


def _size(folder: Path) -> tuple[int, int]:
    files = [path for path in folder.rglob("*") if path.is_file()]
    return sum(path.stat().st_size for path in files), len(files)


def _load(browser: Any, base_url: str, notebook: str) -> tuple[float, float]:
    """(seconds to an idle kernel, seconds to the first cell's output), from navigation."""
    page = browser.new_page()
    started = time.monotonic()
    page.goto(f"{base_url}/lab/index.html?path=notebooks/{notebook}")
    wait_for_idle_kernel(page, KERNEL_READY_MS)
    kernel = time.monotonic() - started
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(FIRST_OUTPUT, timeout=KERNEL_READY_MS)
    first = time.monotonic() - started
    page.close()
    return kernel, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notebook", default="01_the_race.ipynb")
    options = parser.parse_args()
    site = built_site()
    size, count = _size(site)
    print(f"site/: {size / 1e6:.1f} MB in {count} files")
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    blocked = 0
    with serving(site) as base_url:
        for round_number in range(1, options.rounds + 1):
            with (
                tempfile.TemporaryDirectory() as profile,
                offline_chromium(Path(profile)) as browser,
            ):
                cold.append(_load(browser, base_url, options.notebook))
                warm.append(_load(browser, base_url, options.notebook))
                blocked += len(browser.blocked)
            print(
                f"round {round_number}: cold kernel {cold[-1][0]:.1f} s, first output"
                f" {cold[-1][1]:.1f} s; warm cache {warm[-1][0]:.1f} s, {warm[-1][1]:.1f} s"
            )
    for name, runs in (("cold", cold), ("warm", warm)):
        kernel = statistics.median(run[0] for run in runs)
        first = statistics.median(run[1] for run in runs)
        print(f"median {name}: kernel idle {kernel:.1f} s, first output {first:.1f} s")
    print(f"requests off 127.0.0.1 blocked: {blocked}")
    return 0 if blocked == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
