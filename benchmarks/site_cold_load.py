"""The browser edition's first visit and a later one, timed and weighed, in headless Chromium.

    .venv/bin/python benchmarks/site_cold_load.py [--rounds 3] [--site PATH]...

Each --site (default: site/, built first unless it is current) is served on
127.0.0.1 by `python -m http.server`'s handler, as the README serves it. Per
round, each site in turn (a busy machine slows each alike), a class's session:

- first visit: Chromium with a new, empty profile opens the link to notebook
  01 (--first) and runs all its cells;
- later notebook: in that page, the student closes it (its kernel shut down)
  and opens notebook 02 (--later) from the file browser, the browser's cache
  warm, and runs all its cells.

For each, seconds from the opening until: the front end has started the
kernel's worker; the worker has fetched its files (the last Pyodide file before
the kernel is idle: the runtime, the standard library, the kernel's packages);
the kernel is idle; the first code cell's output shows after Run All. And
bytes: every byte Chromium received over a socket until its last cell has run,
headers included (SOCKET_BYTES_RECEIVED in the browser's --log-net-log). For each
site, the first visit of the last round is also broken down by file (each response's
Content-Length), the files under 100 kB summed by folder.

Once per site, one more session is served the way most static hosts serve
(text, JavaScript, JSON and WebAssembly gzipped) and its first visit weighed.
Offline as the tests are: Chromium resolves no host but 127.0.0.1, and every
request the site's pages make elsewhere is counted from the network log (it
must be 0). Playwright's request routing is not used: it turns the cache off.
The load average at the start and the end says how busy the machine was.
Nothing here is a test: no time is asserted.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import io
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from site_harness import (
    KERNEL_READY_MS,
    QuietHandler,
    built_site,
    offline_chromium,
    run_all_cells,
    serving,
    wait_for_idle_kernel,
)

PHASES = ("worker started", "files fetched", "kernel idle", "first output")
SITE_ORIGIN = "http://127.0.0.1:"
# Notes in the page when the first code cell shows output again after its outputs
# were cleared (run_all_cells clears them, then runs every cell).
WATCH_FIRST_OUTPUT = """() => {
    const first = window.jupyterapp.shell.currentWidget.content.widgets
        .find(cell => cell.model.type === 'code');
    let cleared = false;
    const timer = setInterval(() => {
        if (first.model.executionCount === null) {
            cleared = true;
        } else if (cleared && first.model.outputs.length > 0) {
            window.agent17FirstOutput = performance.now();
            clearInterval(timer);
        }
    }, 5);
}"""
# Closes the open notebook and shuts its kernel down, as a student done with it does,
# then opens the next one from the file browser; the page's time of that opening.
OPEN_NEXT = """async (path) => {
    const app = window.jupyterapp;
    const done = app.shell.currentWidget;
    await done.sessionContext.shutdown();
    done.dispose();
    const opened = performance.now();
    app.commands.execute('docmanager:open', {path});
    return opened;
}"""
RESOURCES = """() => [performance.timeOrigin,
    performance.getEntriesByType('resource').map(entry => [entry.name, entry.responseEnd])]"""
COMPRESSED_TYPES = ("text/", "application/javascript", "application/json", "application/wasm")


class GzipHandler(QuietHandler):
    """Sends text, JavaScript, JSON and WebAssembly gzipped to a browser that accepts it."""

    def send_head(self) -> Any:
        path = Path(self.translate_path(self.path))
        kind = self.guess_type(str(path))
        accepted = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepted and path.is_file() and kind.startswith(COMPRESSED_TYPES)):
            return super().send_head()
        body = _gzipped(path)
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@functools.cache
def _gzipped(path: Path) -> bytes:
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)


@dataclass(frozen=True)
class Visit:
    """One notebook opened and run: seconds from its opening per phase, bytes, off-site."""

    seconds: dict[str, float]
    received: int
    off_site: int
    by_file: dict[str, int]


def _network_log(path: Path, split_ms: float) -> tuple[list[int], int]:
    """Bytes received over sockets before and after `split_ms` (epoch), the site's requests
    elsewhere, in a --log-net-log.

    The browser's own requests (no origin asked for them: updates, autofill) fail at
    the resolver as well; they are not the site's, so they are not counted.
    """
    log = json.loads(path.read_text(encoding="utf-8"))
    kinds = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    epoch = int(log["constants"]["timeTickOffset"])
    received, off_site = [0, 0], 0
    for event in log["events"]:
        kind, params = kinds[event["type"]], event.get("params", {})
        if kind == "SOCKET_BYTES_RECEIVED":
            received[epoch + int(event["time"]) >= split_ms] += params["byte_count"]
        elif kind == "URL_REQUEST_START_JOB" and "url" in params:
            asked_by_the_site = params.get("initiator", "").startswith(SITE_ORIGIN)
            local = params["url"].startswith((SITE_ORIGIN, "data:", "blob:"))
            off_site += asked_by_the_site and not local
    return received, off_site


def _by_file(path: Path, split_ms: float) -> dict[str, int]:
    """Body bytes each file of the site sent over the network before `split_ms` (epoch),
    by its path: a response's Content-Length (a 304 sends none; a cached copy is no
    request), as the --log-net-log has them."""
    log = json.loads(path.read_text(encoding="utf-8"))
    kinds = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    epoch = int(log["constants"]["timeTickOffset"])
    urls: dict[int, str] = {}
    sent: dict[str, int] = {}
    for event in log["events"]:
        kind, params = kinds[event["type"]], event.get("params", {})
        request = event["source"]["id"]
        if kind == "URL_REQUEST_START_JOB" and "url" in params:
            urls.setdefault(request, params["url"])
        elif kind == "HTTP_TRANSACTION_READ_RESPONSE_HEADERS" and request in urls:
            if epoch + int(event["time"]) >= split_ms:
                continue
            headers = params.get("headers", [])
            length = [
                h.split(":", 1)[1] for h in headers if h.lower().startswith("content-length:")
            ]
            name = urls[request].split("/", 3)[-1].split("?")[0]
            sent[name] = sent.get(name, 0) + (int(length[0]) if length else 0)
    return sent


def _phases(page: Any, workers: list[Any], opened_ms: float) -> dict[str, float]:
    """Seconds from `opened_ms` (the page's clock) until each phase of the current notebook.

    `workers` gets each worker the page starts: the newest that fetched Pyodide is
    the notebook's kernel.
    """
    wait_for_idle_kernel(page, KERNEL_READY_MS)
    idle = page.evaluate("() => performance.now()")
    page.evaluate(WATCH_FIRST_OUTPUT)
    run_all_cells(page)
    first = page.evaluate("() => window.agent17FirstOutput")
    page_origin = page.evaluate("() => performance.timeOrigin")
    for worker in reversed(workers):
        origin, entries = worker.evaluate(RESOURCES)
        # Each kernel fetches Pyodide's runtime (pyodide.asm.mjs, gzipped or not).
        if any("/static/pyodide/pyodide.asm." in name for name, _ in entries):
            started = origin - page_origin
            ends = [started + end for name, end in entries if "/static/pyodide/" in name]
            fetched = max(end for end in ends if end <= idle)
            times = (started, fetched, idle, first)
            return {phase: (ms - opened_ms) / 1000 for phase, ms in zip(PHASES, times, strict=True)}
    raise RuntimeError("no worker of the page fetched Pyodide")


def class_session(
    base_url: str, profile: Path, netlog: Path, first: str, later: str
) -> tuple[Visit, Visit]:
    """A new profile opens `first` by its link and runs it, shuts it, opens `later`, runs it."""
    with offline_chromium(profile, route=False, args=(f"--log-net-log={netlog}",)) as browser:
        page = browser.new_page()
        workers: list[Any] = []
        page.on("worker", lambda worker: workers.append(worker))
        page.goto(f"{base_url}/lab/index.html?path=notebooks/{first}")
        first_phases = _phases(page, workers, 0.0)
        opened = page.evaluate(OPEN_NEXT, f"notebooks/{later}")
        later_phases = _phases(page, workers, opened)
        split = page.evaluate("() => performance.timeOrigin") + opened
        blocked = len(browser.blocked)
    (first_bytes, later_bytes), off_site = _network_log(netlog, split)
    first_visit = Visit(first_phases, first_bytes, off_site + blocked, _by_file(netlog, split))
    return first_visit, Visit(later_phases, later_bytes, 0, {})


def _load() -> str:
    # Other work on a shared machine swings every time this measures.
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def _size(folder: Path) -> tuple[int, int]:
    files = [path for path in folder.rglob("*") if path.is_file()]
    return sum(path.stat().st_size for path in files), len(files)


def _row(name: str, values: list[float], unit: str) -> str:
    shown = "".join(f"{value:>10.1f}" for value in values)
    ratio = f"{values[-1] / values[0]:>10.2f}" if len(values) > 1 and values[0] else ""
    return f"{name + ' (' + unit + ')':<44}{shown}{ratio}"


def _files(sent: dict[str, int], least: int = 100_000) -> str:
    """Each file that sent at least `least` bytes, the others summed by folder."""
    shown: dict[str, int] = {}
    for name, size in sent.items():
        key = (
            name
            if size >= least
            else f"{name.rsplit('/', 1)[0] if '/' in name else '.'}/ (smaller files)"
        )
        shown[key] = shown.get(key, 0) + size
    rows = sorted(shown.items(), key=lambda row: -row[1])
    return "\n".join(f"{size / 1e3:>10.0f}  {name}" for name, size in rows)


def _shown(visit: Visit) -> str:
    times = ", ".join(f"{phase} {visit.seconds[phase]:.1f} s" for phase in PHASES)
    return f"{times}; {visit.received / 1e6:.1f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--site", type=Path, action="append", help="a built site (repeatable)")
    parser.add_argument("--first", default="01_the_race.ipynb", help="the notebook of the link")
    parser.add_argument("--later", default="02_the_sqlite_board.ipynb", help="the one after it")
    options = parser.parse_args()
    sites = [path.resolve() for path in options.site] if options.site else [built_site()]
    for number, site in enumerate(sites, 1):
        size, count = _size(site)
        print(f"site {number}: {site} ({size / 1e6:.1f} MB in {count} files)")
    print(f"load average (1, 5, 15 min) at the start: {_load()}")
    visits: dict[tuple[str, Path], list[Visit]] = {}

    def session(site: Path, folder: Path, handler: type[QuietHandler]) -> tuple[Visit, Visit]:
        with serving(site, handler) as base_url:
            profile, netlog = folder / "profile", folder / "net.json"
            return class_session(base_url, profile, netlog, options.first, options.later)

    with tempfile.TemporaryDirectory(prefix="agent17-site-bench-") as scratch:
        for round_number in range(1, options.rounds + 1):
            for number, site in enumerate(sites, 1):
                first, later = session(
                    site, Path(scratch) / f"{round_number}-{number}", QuietHandler
                )
                visits.setdefault(("first visit", site), []).append(first)
                visits.setdefault(("later notebook", site), []).append(later)
                print(f"round {round_number}, site {number}: first visit: {_shown(first)}")
                print(f"{'':>20}later notebook: {_shown(later)}")
        for number, site in enumerate(sites, 1):
            gzipped, _ = session(site, Path(scratch) / f"gzip-{number}", GzipHandler)
            visits[("gzip", site)] = [gzipped]

    def median(kind: str, site: Path, measure: Any) -> float:
        return statistics.median(measure(each) for each in visits[(kind, site)])

    print(f"\nmedians of {options.rounds} rounds")
    ratio = "  last/first" if len(sites) > 1 else ""
    print(
        f"{'':<44}" + "".join(f"{'site ' + str(n):>10}" for n in range(1, len(sites) + 1)) + ratio
    )
    for kind in ("first visit", "later notebook"):
        for phase in PHASES:
            values = [median(kind, site, lambda v, p=phase: v.seconds[p]) for site in sites]
            print(_row(f"{kind}: {phase}", values, "s"))
    for kind, label in (
        ("first visit", "first visit, http.server"),
        ("gzip", "first visit, gzip host"),
        ("later notebook", "later notebook, http.server"),
    ):
        print(_row(label, [median(kind, site, lambda v: v.received / 1e6) for site in sites], "MB"))
    for number, site in enumerate(sites, 1):
        print(f"\nsite {number}, first visit of the last round, by file (kB over http.server):")
        print(_files(visits[("first visit", site)][-1].by_file))
    off_site = sum(each.off_site for runs in visits.values() for each in runs)
    print(f"requests off 127.0.0.1: {off_site}")
    print(f"load average (1, 5, 15 min) at the end: {_load()}")
    return 0 if off_site == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
