"""A real-browser harness: JupyterLab on loopback, driven by Debian's headless Chromium.

Reusable by any test that must see a widget work the way a student sees it:

    from browser_harness import LabSession, lab_fixture  # noqa: F401 (provides `lab`)

    def test_something(lab: LabSession) -> None:
        lab.open_notebook(copy_notebook(source, lab.root_dir))
        lab.run_all_cells()
        lab.click_button("step alice")
        svg = lab.output_svg()

What it guarantees:
- JupyterLab listens on 127.0.0.1 on a free port with a random token, with its
  own HOME, config, runtime, settings, workspace and temporary folders (nothing
  of the user's setup leaks in or is changed), and the news toast disabled.
- Readiness is polled on /api with the token, within a deadline; a server
  that dies early fails with the tail of its log.
- Chromium is /usr/bin/chromium through Playwright (never `playwright install`).
  Every request that is not to 127.0.0.1, data: or blob: is aborted, and any
  uncaught page error fails the test.
- Tests run on a temporary copy of a notebook (Lab autosaves what it opens).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # needed as root in a container
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_SECONDS = 60.0
NOTEBOOK_READY_MS = 60_000
RUN_ALL_MS = 120_000
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def copy_notebook(source: Path, folder: Path) -> str:
    """Copy a notebook into the server's root folder; returns its name there."""
    shutil.copy2(source, folder / source.name)
    return source.name


@dataclass
class JupyterLabServer:
    """A running JupyterLab: where it serves, its token and the folder it serves."""

    port: int
    token: str
    root_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log, for failure messages."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])


def isolated_env(home: Path) -> dict[str, str]:
    """This environment with its own HOME and Jupyter folders under `home` (created)."""
    env = dict(os.environ)
    folders = {
        "HOME": home,
        "JUPYTER_CONFIG_DIR": home / "jupyter-config",
        "JUPYTER_DATA_DIR": home / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": home / "jupyter-runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
        # The kernels' temporary folders too, so a test can see what a notebook leaves.
        "TMPDIR": home / "tmp",
    }
    for name, folder in folders.items():
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env.pop("JUPYTER_TOKEN", None)
    return env


def trust_notebook(path: Path, home: Path) -> None:
    """Sign a notebook for the server whose home is `home` (the lab fixture's: tmp_path/"home").

    JupyterLab renders an untrusted notebook's saved HTML, SVG and widget outputs as
    plain text, so a test of what a student sees opens a trusted copy, as lab.sh does.
    """
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run(
        [str(jupyter), "trust", str(path)], env=isolated_env(home), check=True, capture_output=True
    )


def render_every_cell(home: Path) -> None:
    """Make the lab at `home` draw every cell at once, not only those scrolled into view.

    Call before the server starts (request this fixture before `lab`). JupyterLab 4 draws
    only the cells near the viewport; a test that counts outputs needs all of them.
    """
    folder = (
        Path(isolated_env(home)["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "notebook-extension"
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}), encoding="utf-8"
    )


def _disable_announcements(env: dict[str, str]) -> None:
    # The same as `jupyter labextension disable --level=user ...:announcements`:
    # no news toast covering the notebook, no request for news.
    labconfig = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig"
    labconfig.mkdir(exist_ok=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}),
        encoding="utf-8",
    )


def _wait_until_ready(server: JupyterLabServer, deadline: float) -> None:
    url = f"{server.base_url}/api?token={server.token}"
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"JupyterLab not ready in time:\n{server.log_tail()}")
        time.sleep(0.2)  # polling a server's readiness, not ordering test events


@contextmanager
def running_jupyterlab(root_dir: Path, home: Path) -> Iterator[JupyterLabServer]:
    """Start JupyterLab on loopback serving `root_dir`, yield it once /api answers, stop it."""
    jupyter = Path(sys.executable).with_name("jupyter")
    port = free_port()
    token = secrets.token_hex(16)
    env = isolated_env(home)
    _disable_announcements(env)
    log_path = home / "jupyterlab.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(jupyter),
                "lab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--port-retries=0",
                f"--IdentityProvider.token={token}",
                "--allow-root",
                "--LabApp.expose_app_in_browser=True",
                f"--ServerApp.root_dir={root_dir}",
            ],
            cwd=root_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = JupyterLabServer(port, token, root_dir, process, log_path)
    try:
        _wait_until_ready(server, time.monotonic() + SERVER_START_SECONDS)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _allow_only_loopback(route: Any) -> None:
    url = route.request.url
    if url.startswith(("http://127.0.0.1", "data:", "blob:")):
        route.continue_()
    else:
        route.abort()


def decode_data_url(url: str) -> str:
    """The text inside a data: URL (base64 or percent-encoded)."""
    header, _, payload = url.partition(",")
    if not header.startswith("data:"):
        raise ValueError(f"not a data: URL: {url[:40]}")
    if header.endswith(";base64"):
        return base64.b64decode(payload).decode("utf-8")
    return urllib.parse.unquote(payload)


@dataclass
class LabSession:
    """One Chromium page on the JupyterLab server, with notebook-level actions."""

    server: JupyterLabServer
    page: Any
    page_errors: list[str] = field(default_factory=list)

    @property
    def root_dir(self) -> Path:
        """The folder the server serves: copy notebooks here."""
        return self.server.root_dir

    def open_notebook(self, name: str) -> None:
        """Open a notebook from the root folder and wait until its kernel is idle."""
        quoted = urllib.parse.quote(name)
        self.page.goto(f"{self.server.base_url}/lab/tree/{quoted}?token={self.server.token}&reset")
        wait_for_idle_kernel(self.page, NOTEBOOK_READY_MS)
        self.check_page_errors()

    def run_all_cells(self) -> None:
        """Run every cell; wait until each code cell has run and the kernel is idle again."""
        # Clearing first resets every execution count, so the wait below cannot be met by
        # the outputs a notebook was saved with.
        self.page.evaluate(
            "() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')"
        )
        self.page.wait_for_function(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(cell => cell.model.type === 'code')
                .every(cell => cell.model.executionCount === null)""",
            timeout=RUN_ALL_MS,
        )
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function(
            """() => {
                const panel = window.jupyterapp.shell.currentWidget;
                const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
                const kernel = panel.sessionContext.session.kernel;
                return kernel.status === 'idle'
                    && cells.every(cell => cell.model.executionCount !== null);
            }""",
            timeout=RUN_ALL_MS,
        )
        self.check_page_errors()

    def error_outputs(self) -> list[str]:
        """`ename: evalue` of every error output in the open notebook (Output widgets included)."""
        cells: list[str] = self.page.evaluate(
            """() => {
                const panel = window.jupyterapp.shell.currentWidget;
                const found = [];
                for (const cell of panel.content.widgets) {
                    if (cell.model.type !== 'code') continue;
                    for (const output of cell.model.outputs.toJSON()) {
                        if (output.output_type === 'error') {
                            found.push(output.ename + ': ' + output.evalue);
                        }
                    }
                }
                return found;
            }"""
        )
        shown = self.page.locator(
            ".jp-OutputArea-output[data-mime-type*='error']"
        ).all_inner_texts()
        return [*cells, *shown]

    def click_button(self, description: str) -> None:
        """Click the ipywidgets Button whose description is exactly `description`."""
        button = self.page.get_by_role("button", name=description, exact=True).first
        button.wait_for(state="visible", timeout=NOTEBOOK_READY_MS)
        button.click()

    def wait_for_text(self, text: str) -> None:
        """Wait until `text` is visible somewhere on the page."""
        self.page.get_by_text(text, exact=True).first.wait_for(
            state="visible", timeout=NOTEBOOK_READY_MS
        )

    def output_svg(self, index: int = 0) -> str:
        """The SVG text shown in the `index`-th Output widget (decoded from its <img> data URL)."""
        image = self.page.locator(".widget-output [data-mime-type='image/svg+xml'] img").nth(index)
        image.wait_for(state="attached", timeout=NOTEBOOK_READY_MS)
        source = image.get_attribute("src")
        if source is None:
            raise AssertionError("the Output widget's SVG image has no src")
        return decode_data_url(source)

    def screenshot(self, name: str) -> Path:
        """Save a full-page PNG under test-artifacts/ (gitignored) and return its path."""
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def check_page_errors(self) -> None:
        """Fail if the page raised an uncaught JavaScript error."""
        if self.page_errors:
            raise AssertionError(f"page errors: {self.page_errors}")


@contextmanager
def chromium_session(server: JupyterLabServer, profile_dir: Path) -> Iterator[LabSession]:
    """Debian Chromium via Playwright, loopback only, failing on any uncaught page error."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            context.route("**/*", _allow_only_loopback)
            page = context.pages[0] if context.pages else context.new_page()
            session = LabSession(server, page)
            page.on("pageerror", lambda error: session.page_errors.append(str(error)))
            yield session
            session.check_page_errors()
        finally:
            context.close()


@pytest.fixture(name="lab")
def lab_fixture(tmp_path: Path) -> Iterator[LabSession]:
    """A JupyterLab server on a temp folder and a Chromium page on it; skips without Chromium."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    root = tmp_path / "notebooks"
    root.mkdir()
    with (
        running_jupyterlab(root, tmp_path / "home") as server,
        chromium_session(server, tmp_path / "chromium-profile") as session,
    ):
        yield session


def wait_for_idle_kernel(page: Any, timeout_ms: int) -> None:
    """Wait until the open notebook's kernel has started and is idle."""
    page.wait_for_function(
        """() => {
            const app = window.jupyterapp;
            const panel = app && app.shell.currentWidget;
            const session = panel && panel.sessionContext && panel.sessionContext.session;
            return Boolean(panel && panel.context && panel.context.isReady && session
                && session.kernel && session.kernel.status === 'idle');
        }""",
        timeout=timeout_ms,
    )
