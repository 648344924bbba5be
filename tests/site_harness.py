"""The browser edition in headless Chromium: site/ served on loopback, nothing else reachable.

Used by tests/test_site.py and benchmarks/site_cold_load.py:

    with serving(site_folder()) as base_url, offline_chromium(profile) as browser:
        page = browser.open_notebook(base_url, "01_the_race.ipynb")

What it guarantees:
- the site is the one ./scripts/site.sh builds from this checkout: `built_site()`
  reuses site/ when the hash of its inputs (scripts/site/build.py's
  `inputs_digest`: pins, build script, agent17, notebooks, assets, the student
  edition's rules) is the one stamped in it, and builds it again otherwise;
- it is served by a thread of http.server on 127.0.0.1;
- every request Chromium makes that is not to 127.0.0.1 (or data:, blob:) is
  aborted and counted (`OfflineBrowser.blocked`), and, as a second wall that
  needs no routing, Chromium resolves no host name but 127.0.0.1;
- any uncaught page error is recorded (`OfflineBrowser.page_errors`).
"""

from __future__ import annotations

import configparser
import functools
import http.server
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from browser_harness import CHROMIUM, CHROMIUM_ARGS, wait_for_idle_kernel
from script_modules import load_script

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / "site"
BUILD_SCRIPT = REPO / "scripts" / "site" / "build.py"
SITE_BUILD_SECONDS = 900
KERNEL_READY_MS = 120_000
RUN_ALL_MS = 240_000
# No name resolves but loopback: a request that escaped the routing still goes nowhere.
OFFLINE_ARGS = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
# What the site keeps in the browser (JupyterLite's files, settings and workspace, in
# IndexedDB and localStorage), forgotten: otherwise the next page restores the notebooks
# an earlier page left open, each with its own kernel, and opens their saved copies.
FORGET_THE_SITE = """async () => {
    localStorage.clear();
    const databases = await indexedDB.databases();
    await Promise.all(databases.map(database => new Promise(done => {
        const request = indexedDB.deleteDatabase(database.name);
        request.onsuccess = request.onerror = request.onblocked = done;
    })));
}"""


@functools.cache
def site_build_module() -> ModuleType:
    """scripts/site/build.py as a module (its `inputs_digest`, `NEEDS_PROCESSES_LINE`...)."""
    return load_script("agent17_site_build", BUILD_SCRIPT)


def site_is_current(site: Path = SITE) -> bool:
    """Whether `site` was built from exactly the inputs in this checkout."""
    build = site_build_module()
    stamp = site / build.INPUTS_STAMP
    return stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == build.inputs_digest()


def built_site(site: Path = SITE) -> Path:
    """`site`, built by ./scripts/site.sh first unless it is current."""
    if not site_is_current(site):
        result = subprocess.run(
            [str(REPO / "scripts" / "site.sh"), "--output", str(site)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=SITE_BUILD_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"./scripts/site.sh failed:\n{result.stderr[-4000:]}")
    return site


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".wasm": "application/wasm",
    }

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(folder: Path, handler_class: type[QuietHandler] = QuietHandler) -> Iterator[str]:
    """Serve `folder` on 127.0.0.1 (a free port) from a thread; yields the base URL."""
    handler = functools.partial(handler_class, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _is_local(url: str) -> bool:
    return url.startswith(("http://127.0.0.1:", "http://127.0.0.1/", "data:", "blob:"))


@dataclass
class OfflineBrowser:
    """A Chromium context that reaches only loopback; what it blocked and what broke."""

    context: Any
    playwright: Any
    blocked: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if _is_local(url):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def _failed(self, request: Any) -> None:
        # A request the routing never saw (a worker's, say) that the resolver stopped.
        if not _is_local(request.url) and request.url not in self.blocked:
            self.blocked.append(request.url)

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        return page

    def open_notebook(self, base_url: str, name: str) -> Any:
        """A new page with notebooks/`name` as the site has it open, and its kernel idle."""
        page = self.new_page()
        page.goto(f"{base_url}/jupyter-lite.json")  # a page of the site's origin, a light one
        page.evaluate(FORGET_THE_SITE)
        page.goto(f"{base_url}/lab/index.html?path=notebooks/{name}")
        wait_for_idle_kernel(page, KERNEL_READY_MS)
        return page


@contextmanager
def offline_chromium(
    profile_dir: Path, *, route: bool = True, args: tuple[str, ...] = ()
) -> Iterator[OfflineBrowser]:
    """Debian's Chromium through Playwright, every non-loopback request aborted and counted.

    route=False keeps the browser's cache, which Playwright's routing turns off: then
    the resolver alone keeps the page offline, and what it stopped is still counted.
    """
    from playwright.sync_api import sync_playwright

    with (
        sync_playwright() as playwright,
        offline_context(playwright, profile_dir, route=route, args=args) as browser,
    ):
        yield browser


@contextmanager
def offline_context(
    playwright: Any,
    profile_dir: Path,
    *,
    route: bool = True,
    args: tuple[str, ...] = (),
) -> Iterator[OfflineBrowser]:
    """One offline Chromium of a running Playwright (a process holds one at a time)."""
    context = playwright.chromium.launch_persistent_context(
        str(profile_dir),
        executable_path=str(CHROMIUM),
        headless=True,
        args=[*CHROMIUM_ARGS, *OFFLINE_ARGS, *args],
        viewport={"width": 1280, "height": 900},
    )
    browser = OfflineBrowser(context, playwright)
    try:
        if route:
            context.route("**/*", browser._route)
        context.on("requestfailed", browser._failed)
        yield browser
    finally:
        context.close()


def run_all_cells(page: Any, timeout_ms: int = RUN_ALL_MS) -> float:
    """Clear every output, run all cells, wait until each code cell ran; the seconds it took."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.wait_for_function(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
            .filter(cell => cell.model.type === 'code')
            .every(cell => cell.model.executionCount === null)""",
        timeout=timeout_ms,
    )
    started = time.monotonic()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    # Done when every code cell has run, or when one failed (the rest are then not run).
    page.wait_for_function(
        """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
            const kernel = panel.sessionContext.session.kernel;
            const failed = cells.some(cell => cell.model.outputs.toJSON()
                .some(output => output.output_type === 'error'));
            return kernel.status === 'idle'
                && (failed || cells.every(cell => cell.model.executionCount !== null));
        }""",
        timeout=timeout_ms,
    )
    return time.monotonic() - started


def cell_outputs(page: Any) -> list[dict[str, Any]]:
    """Every cell of the open notebook: its type and, for code, its outputs as nbformat JSON."""
    cells: list[dict[str, Any]] = page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets.map(cell => ({
            cell_type: cell.model.type,
            outputs: cell.model.type === 'code' ? cell.model.outputs.toJSON() : [],
        }))"""
    )
    return cells


SANITIZE_CFG = REPO / "notebooks" / "nbval_sanitize.cfg"


@functools.cache
def _sanitizers() -> tuple[tuple[re.Pattern[str], str], ...]:
    parser = configparser.ConfigParser()
    parser.read(SANITIZE_CFG, encoding="utf-8")
    return tuple(
        (re.compile(parser[section]["regex"]), parser[section]["replace"])
        for section in parser.sections()
    )


def sanitize(text: str) -> str:
    """`text` as nbval compares it with --nbval-sanitize-with notebooks/nbval_sanitize.cfg."""
    for pattern, replacement in _sanitizers():
        text = pattern.sub(replacement, text)
    return text


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def output_text(outputs: list[dict[str, Any]]) -> list[str]:
    """A cell's outputs as the text nbval compares: streams joined by name, text/plain, errors."""
    streams: dict[str, str] = {}
    shown: list[str] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            name = output.get("name", "stdout")
            streams[name] = streams.get(name, "") + _text(output.get("text", ""))
        elif kind in {"display_data", "execute_result"}:
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                shown.append("(a widget)")
            elif "text/plain" in data:
                shown.append(_text(data["text/plain"]))
        elif kind == "error":
            shown.append(f"{output.get('ename')}: {output.get('evalue')}")
    texts = [f"{name}: {text}" for name, text in sorted(streams.items())] + shown
    return [sanitize(text) for text in texts]
