"""The browser edition, offline, in a real browser: every core notebook runs in Pyodide.

The site is the one ./scripts/site.sh builds from this checkout (reused while the
hash of its inputs is unchanged), served on 127.0.0.1 and opened in Debian's
headless Chromium, where every request off 127.0.0.1 is aborted and counted.
Each core notebook runs top to bottom; then:

- no request left the origin, the page raised nothing, no cell shows an error;
- every code cell prints what the committed notebook prints (sanitised as nbval
  sanitises it), except the cells tagged needs-processes: the site shows those
  as their saved output and one line saying where they run;
- the stepper's buttons change the board picture (notebook 06's last panel);
- two exercise checks run in the kernel: the starter answer gets NOT YET, the
  right answer passes; and every exercise the browser can check passes there;
- no core notebook fetches python_stdlib_rest.zip; a module in it imports at its first
  import, which fetches it once; a later kernel takes Pyodide's WebAssembly module from
  Cache Storage, where the site's service worker keeps it; a browser without service
  workers inflates the module's .gz itself, and so does a kernel whose service worker
  fails; a worker whose Cache Storage fails still serves the module;
- the race exercises are checked schedule by schedule in the kernel: each starter gets
  NOT YET with the schedule that broke it (claim_one's shown, words and picture), a
  right answer typed into a cell passes (the seconds each check took go to
  test-artifacts/site_race_checks.txt).
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_harness import ARTIFACTS, CHROMIUM
from site_harness import (
    OfflineBrowser,
    QuietHandler,
    built_site,
    cell_outputs,
    offline_chromium,
    offline_context,
    output_text,
    run_all_cells,
    serving,
    site_build_module,
)

from agent17.exercises import EXERCISES

REPO = Path(__file__).resolve().parent.parent
CORE = sorted(path.name for path in (REPO / "notebooks").glob("0*.ipynb"))
NEEDS_PROCESSES = "needs-processes"
STEPPER_NOTEBOOK = "06_the_idle_loop.ipynb"
SVG_IMAGE = ".widget-output [data-mime-type='image/svg+xml'] img"
WAIT_MS = 60_000
# The exercises whose check needs what a browser tab has not: OS processes or threads.
NOT_CHECKABLE_IN_THE_BROWSER = {"wait_or_wake": "a second thread sets the wake"}
# Checked schedule by schedule, each worker's call suspended at its points (JSPI).
RACE_EXERCISES = ("claim_one", "take_if_pending", "append_note")

pytestmark = pytest.mark.browser


class Site:
    """The served site, one offline browser, and the notebooks open in it (by name)."""

    def __init__(self, folder: Path, base_url: str, browser: OfflineBrowser) -> None:
        self.folder = folder
        self.base_url = base_url
        self.browser = browser
        self.pages: dict[str, Any] = {}
        # The URLs each notebook's page asked for, from its opening to its last cell.
        self.requested: dict[str, list[str]] = {}

    def ran(self, name: str) -> Any:
        """The page of notebook `name`, opened and run top to bottom (once)."""
        if name not in self.pages:
            for page in self.pages.values():  # one kernel at a time on a small machine
                page.close()
            self.pages.clear()
            requested = self.requested.setdefault(name, [])

            def asked(request: Any) -> None:
                requested.append(request.url)

            self.browser.context.on("request", asked)
            try:
                page = self.browser.open_notebook(self.base_url, name)
                run_all_cells(page)
            finally:
                self.browser.context.remove_listener("request", asked)
            self.pages[name] = page
        return self.pages[name]


@pytest.fixture(scope="module", name="site")
def site_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    folder = built_site()
    profile = tmp_path_factory.mktemp("site-chromium-profile")
    with serving(folder) as base_url, offline_chromium(profile) as browser:
        yield Site(folder, base_url, browser)


def committed(name: str) -> dict[str, Any]:
    notebook: dict[str, Any] = json.loads((REPO / "notebooks" / name).read_text(encoding="utf-8"))
    return notebook


def tags(cell: dict[str, Any]) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def cell_source(page: Any, index: int) -> str:
    # The model's text: JupyterLab renders a cell only once it scrolls into view.
    text: str = page.evaluate(
        """(index) => window.jupyterapp.shell.currentWidget.content.widgets[index]
            .model.sharedModel.getSource()""",
        index,
    )
    return text


@pytest.mark.parametrize("name", CORE)
def test_a_core_notebook_runs_in_the_browser_as_it_runs_under_nbval(site: Site, name: str) -> None:
    page = site.ran(name)
    ran = cell_outputs(page)
    saved = committed(name)["cells"]
    assert len(ran) == len(saved), "the site's notebook has the committed notebook's cells"

    errors = [
        f"cell {index}: {output.get('ename')}: {output.get('evalue')}"
        for index, cell in enumerate(ran)
        for output in cell["outputs"]
        if output.get("output_type") == "error"
    ]
    assert errors == []
    line = site_build_module().NEEDS_PROCESSES_LINE
    differences = []
    for index, (before, now) in enumerate(zip(saved, ran, strict=True)):
        if before["cell_type"] != "code":
            continue
        if NEEDS_PROCESSES in tags(before):
            assert now["cell_type"] == "markdown", f"cell {index} is shown, not run"
            assert line in cell_source(page, index), f"cell {index} says where it runs"
            continue
        expected, got = output_text(before["outputs"]), output_text(now["outputs"])
        if expected != got:
            source = "".join(before["source"]).splitlines()[0]
            differences.append(f"cell {index} ({source}):\n  saved {expected}\n  ran   {got}")
    assert differences == [], "\n".join(differences)
    assert site.browser.page_errors == []
    assert site.browser.blocked == [], "requests off the page's origin"
    # What the notebook imports was compiled into the kept zip (BROWSER_IMPORTS).
    rest = site_build_module().STDLIB_REST
    assert [url for url in site.requested[name] if rest in url] == []


def test_a_later_kernel_takes_pyodides_webassembly_from_cache_storage(site: Site) -> None:
    # The site's service worker keeps the inflated module there under its own URL, the
    # one copy (with the HTTP cache's) that Chromium keeps compiled code for.
    site.ran(CORE[0])  # a kernel started before this one: the module is kept by now
    asked_before = len(site.requested.get(CORE[1], []))
    page = site.ran(CORE[1])
    asked = site.requested[CORE[1]][asked_before:]
    assert [url for url in asked if url.endswith("pyodide.asm.wasm.gz")] == []
    kept = page.evaluate(
        """async () => Promise.all((await caches.keys()).map(async (name) =>
            [name, (await (await caches.open(name)).keys()).map((request) => request.url)]))"""
    )
    wasm = f"{site.base_url}/static/pyodide/pyodide.asm.wasm"
    holding = [name for name, urls in kept if urls == [wasm]]
    assert holding, kept
    packed = site.folder / "static" / "pyodide" / "pyodide.asm.wasm.gz"
    digest = hashlib.sha256(packed.read_bytes()).hexdigest()[:16]
    assert holding == [f"agent17-pyodide-wasm-{digest}"]  # one cache, this module's


def test_without_service_workers_the_kernel_inflates_pyodides_module_itself(
    site: Site, tmp_path: Path
) -> None:
    # The site stores the module gzipped only, so a browser without service workers
    # (Firefox's private windows) gets a 404 for its plain URL; load_pyodide.mjs then
    # fetches the .gz and inflates it. (Playwright's service_workers="block" is no such
    # browser: JupyterLite still believes it registered one, and waits on it.)
    for page in site.pages.values():  # one kernel at a time on a small machine
        page.close()
    site.pages.clear()
    packed = f"{site.base_url}/static/pyodide/pyodide.asm.wasm.gz"
    with offline_context(site.browser.playwright, tmp_path / "profile") as browser:
        browser.context.add_init_script("delete Navigator.prototype.serviceWorker;")
        asked: list[str] = []
        browser.context.on("request", lambda request: asked.append(request.url))
        page = browser.open_notebook(site.base_url, CORE[0])
        cell = _new_cell(page, "print(6 * 7)")
        _run_cells(page, [cell])
        assert _cell_text(page, cell) == "stdout: 42\n"
        assert asked.count(packed) == 1
        assert browser.page_errors == [] and browser.blocked == []


# What a failing service worker is made of: (text of inflating_service_worker.js, what
# replaces it).
FAILING_WORKERS = {
    # Cache Storage full (a private window's small quota) or refused: the worker answers
    # with the inflated module without keeping it.
    "cache_storage_full": (
        "await caches.open(WASM_CACHE)",
        'await Promise.reject(new DOMException("full", "QuotaExceededError"))',
    ),
    # A worker whose answer fails: the kernel's fetch is a network error, and
    # load_pyodide.mjs inflates the .gz itself.
    "answer_fails": (
        "event.respondWith(answer(event.request, INFLATED[path]));",
        'event.respondWith(Promise.reject(new TypeError("the worker failed")));',
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILING_WORKERS))
def test_a_failing_service_worker_still_lets_the_kernel_start(
    site: Site, tmp_path: Path, failure: str
) -> None:
    for page in site.pages.values():  # one kernel at a time on a small machine
        page.close()
    site.pages.clear()
    worker = (site.folder / "service-worker.js").read_text(encoding="utf-8")
    text, replacement = FAILING_WORKERS[failure]
    assert worker.count(text) == 1
    broken = worker.replace(text, replacement).encode("utf-8")

    class FailingWorker(QuietHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/service-worker.js":
                super().do_GET()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript")
            self.send_header("Content-Length", str(len(broken)))
            self.end_headers()
            self.wfile.write(broken)

    with (
        serving(site.folder, FailingWorker) as base_url,
        offline_context(site.browser.playwright, tmp_path / "profile") as browser,
    ):
        packed: list[str] = []

        def asked(request: Any) -> None:
            if request.url.endswith("/pyodide.asm.wasm.gz"):
                packed.append("worker" if request.service_worker is not None else "kernel")

        browser.context.on("request", asked)
        page = browser.open_notebook(base_url, CORE[0])
        cell = _new_cell(page, "print(6 * 7)")
        _run_cells(page, [cell])
        assert _cell_text(page, cell) == "stdout: 42\n"
        # The kernel asks for the .gz itself only when the worker failed it (JupyterLite's
        # worker then passes that request on, a second "worker" one).
        expected = ["worker"] if failure == "cache_storage_full" else ["kernel", "worker"]
        assert sorted(packed) == expected
        assert browser.page_errors == [] and browser.blocked == []


def test_a_module_no_kernel_start_imports_is_fetched_at_its_first_import(site: Site) -> None:
    page = site.ran(STEPPER_NOTEBOOK)
    rest = site_build_module().STDLIB_REST
    fetched: list[str] = []

    def asked(request: Any) -> None:
        if rest in request.url and request.service_worker is None:  # the kernel's own
            fetched.append(request.url)

    first = _new_cell(
        page,
        "import sys\nprint('doctest' in sys.modules)\nimport doctest\nprint(doctest.__file__)",
    )
    second = _new_cell(
        page, "import pygments.lexers.rust\nprint(pygments.lexers.rust.RustLexer.name)"
    )
    site.browser.context.on("request", asked)
    try:
        _run_cells(page, [first, second])
    finally:
        site.browser.context.remove_listener("request", asked)
    assert _cell_text(page, first) == "stdout: False\n/lib/python314_rest.zip/doctest.py\n"
    assert _cell_text(page, second) == "stdout: Rust\n"
    assert fetched == [f"{site.base_url}/static/pyodide/{rest}.gz"]  # once, for both
    assert site.browser.page_errors == []


def test_the_steppers_buttons_change_the_board_picture(site: Site) -> None:
    from playwright.sync_api import expect

    page = site.ran(STEPPER_NOTEBOOK)
    # The notebook's last panel ("Your turn"): a fresh team, nothing claimed yet.
    panel = (
        page.locator(".jp-OutputArea-output")
        .filter(has=page.get_by_role("button", name="step alice", exact=True))
        .last
    )
    panel.scroll_into_view_if_needed(timeout=WAIT_MS)
    picture = panel.locator(SVG_IMAGE).last
    before = picture.get_attribute("src", timeout=WAIT_MS)
    assert before is not None
    panel.get_by_role("button", name="step alice", exact=True).click(timeout=WAIT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        # The locator, not an element: the output widget draws a new <img> for a new board.
        expect(picture).not_to_have_attribute("src", before, timeout=WAIT_MS)
    finally:
        panel.screenshot(path=str(ARTIFACTS / "site_stepper.png"))
    # alice's tick parks on an approval, as it does on a machine with Python (the
    # browser suspends it where a helper thread would wait); the buttons resume it.
    expect(panel).to_contain_text("alice waits for approval", timeout=WAIT_MS)
    panel.get_by_role("button", name="approve request", exact=True).click(timeout=WAIT_MS)
    expect(panel).to_contain_text("last step: alice", timeout=WAIT_MS)
    panel.screenshot(path=str(ARTIFACTS / "site_stepper_approved.png"))
    assert site.browser.page_errors == []
    assert site.browser.blocked == []


def _code_cell_index(page: Any, starts_with: str) -> int:
    index: int = page.evaluate(
        """(start) => window.jupyterapp.shell.currentWidget.content.widgets
            .findIndex(cell => cell.model.type === 'code'
                && cell.model.sharedModel.getSource().startsWith(start))""",
        starts_with,
    )
    assert index >= 0, f"no code cell starts with {starts_with!r}"
    return index


def _run_cells(page: Any, indices: list[int]) -> None:
    """Run the cells at `indices` one by one, as a student's Shift+Enter does."""
    for index in indices:
        before = page.evaluate(
            "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionCount",
            index,
        )
        page.evaluate(
            """(i) => {
                const panel = window.jupyterapp.shell.currentWidget;
                panel.content.activeCellIndex = i;
                return window.jupyterapp.commands.execute('notebook:run-cell');
            }""",
            index,
        )
        page.wait_for_function(
            """([i, before]) => {
                const panel = window.jupyterapp.shell.currentWidget;
                const count = panel.content.widgets[i].model.executionCount;
                return count !== null && count !== before
                    && panel.sessionContext.session.kernel.status === 'idle';
            }""",
            arg=[index, before],
            timeout=WAIT_MS,
        )


def _cell_text(page: Any, index: int) -> str:
    (cell,) = [c for i, c in enumerate(cell_outputs(page)) if i == index]
    return "\n".join(output_text(cell["outputs"]))


def test_an_exercise_says_not_yet_to_the_starter_and_passes_the_right_answer(site: Site) -> None:
    page = site.ran(STEPPER_NOTEBOOK)
    answer = _code_cell_index(page, "def next_pass(")
    check_cell = _code_cell_index(page, 'check("next_pass"')
    assert _cell_text(page, check_cell).startswith("NOT YET:")  # the starter, from run-all

    solution = textwrap.dedent(inspect.getsource(EXERCISES["next_pass"].solution))
    solution = solution.replace("def next_pass_solution(", "def next_pass(", 1)
    page.evaluate(
        """([i, source]) => window.jupyterapp.shell.currentWidget.content.widgets[i]
            .model.sharedModel.setSource(source)""",
        [answer, solution],
    )
    _run_cells(page, [answer, check_cell])
    assert _cell_text(page, check_cell).startswith("PASSED:")
    ARTIFACTS.mkdir(exist_ok=True)
    page.evaluate(
        "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].node.scrollIntoView()",
        check_cell,
    )
    page.screenshot(path=str(ARTIFACTS / "site_exercise.png"))
    assert site.browser.page_errors == []
    assert site.browser.blocked == []


def _new_cell(page: Any, source: str) -> int:
    """Add a code cell holding `source` at the end of the open notebook; its index."""
    index = int(page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets.length"))
    page.evaluate(
        """(source) => {
            const panel = window.jupyterapp.shell.currentWidget;
            panel.content.activeCellIndex = panel.content.widgets.length - 1;
            window.jupyterapp.commands.execute('notebook:insert-cell-below');
            panel.content.activeCell.model.sharedModel.setSource(source);
        }""",
        source,
    )
    page.wait_for_function(
        "(n) => window.jupyterapp.shell.currentWidget.content.widgets.length > n",
        arg=index,
        timeout=WAIT_MS,
    )
    return index


def test_an_import_asks_the_drive_nothing_and_a_module_beside_the_notebook_imports(
    site: Site,
) -> None:
    # The kernel's folder is on the JupyterLite drive, where each look is a synchronous
    # request to the page: the import path looks there last, after the installed modules.
    page = site.ran(STEPPER_NOTEBOOK)
    drive: list[str] = []

    def asked(request: Any) -> None:
        if "/api/drive" in request.url:
            drive.append(request.post_data or "")

    installed = _new_cell(
        page, "import sys\nprint('tomllib' in sys.modules)\nimport tomllib\nprint(tomllib.__name__)"
    )
    beside = _new_cell(
        page,
        "import importlib, pathlib\n"
        "pathlib.Path('beside_me.py').write_text('WHERE = \"beside the notebook\"\\n')\n"
        "importlib.invalidate_caches()\n"
        "import beside_me\n"
        "pathlib.Path('beside_me.py').unlink()\n"
        "print(beside_me.WHERE, beside_me.__file__)",
    )
    site.browser.context.on("request", asked)
    try:
        _run_cells(page, [installed, beside])
    finally:
        site.browser.context.remove_listener("request", asked)
    assert _cell_text(page, installed) == "stdout: False\ntomllib\n"  # a first import
    assert _cell_text(page, beside) == "stdout: beside the notebook /drive/notebooks/beside_me.py\n"
    # Requests arrive in order: the first the drive was asked is the second cell's file.
    assert drive and "beside_me.py" in drive[0], drive[:3]
    assert site.browser.page_errors == []


def _verdicts(text: str) -> dict[str, str]:
    """The "verdict: NAME ..." lines a probe cell printed: name -> the rest of the line."""
    return {
        line.split()[1]: line.split(None, 2)[2]
        for line in (each.removeprefix("stdout: ") for each in text.splitlines())
        if line.startswith("verdict:")
    }


def test_every_exercise_that_needs_no_os_process_is_checkable_in_the_browser(site: Site) -> None:
    page = site.ran(STEPPER_NOTEBOOK)
    probe = textwrap.dedent(
        """\
        import inspect as _inspect
        from agent17.exercises import EXERCISES as _EXERCISES, check as _check
        for _name, _exercise in _EXERCISES.items():
            _result = _check(_name, _exercise.solution)
            print("verdict:", _name, "PASSED" if _result.passed else "NOT YET")
        """
    )
    index = _new_cell(page, probe)
    _run_cells(page, [index])
    text = _cell_text(page, index)
    verdicts = _verdicts(text)
    assert set(verdicts) == set(EXERCISES), text
    checkable = {name for name in EXERCISES if name not in NOT_CHECKABLE_IN_THE_BROWSER}
    assert {name for name, verdict in verdicts.items() if verdict == "PASSED"} == checkable


def _right_answer_in_a_cell(name: str) -> str:
    """The exercise's reference solution, as a student would type it into a cell."""
    source = textwrap.dedent(inspect.getsource(EXERCISES[name].solution))
    return source.replace(f"def {name}_solution(", f"def {name}(", 1)


def test_the_race_exercises_are_checked_schedule_by_schedule_in_the_browser(site: Site) -> None:
    page = site.ran(STEPPER_NOTEBOOK)
    answers = "\n\n".join(_right_answer_in_a_cell(name) for name in RACE_EXERCISES)
    probe = answers + textwrap.dedent(
        f"""
        import time as _time
        from agent17.exercises import EXERCISES as _EXERCISES, check as _check
        for _name in {RACE_EXERCISES!r}:
            _answers = ("starter", _EXERCISES[_name].starter), ("right", globals()[_name])
            for _which, _candidate in _answers:
                _started = _time.monotonic()
                _result = _check(_name, _candidate)
                _took = _time.monotonic() - _started
                _verdict = "PASSED" if _result.passed else "NOT YET"
                print("verdict:", f"{{_name}}/{{_which}}", _verdict, f"{{_took:.1f}}")
        _check("claim_one", _EXERCISES["claim_one"].starter)
        """
    )
    index = _new_cell(page, probe)
    _run_cells(page, [index])
    (cell,) = [c for i, c in enumerate(cell_outputs(page)) if i == index]
    verdicts = _verdicts(_cell_text(page, index))
    expected = {f"{name}/{which}" for name in RACE_EXERCISES for which in ("starter", "right")}
    assert set(verdicts) == expected, verdicts
    for name in RACE_EXERCISES:
        assert verdicts[f"{name}/starter"].startswith("NOT YET"), name
        assert verdicts[f"{name}/right"].startswith("PASSED"), name
    ARTIFACTS.mkdir(exist_ok=True)
    seconds = "\n".join(
        f"{key} {verdict.split()[-1]} s" for key, verdict in sorted(verdicts.items())
    )
    (ARTIFACTS / "site_race_checks.txt").write_text(seconds + "\n", encoding="utf-8")
    print(seconds)
    # The starter's verdict, shown as a cell shows it: the words with the timeline among
    # them, and the picture of the same schedule beside them.
    (shown,) = [out for out in cell["outputs"] if out.get("output_type") == "execute_result"]
    words = "".join(shown["data"]["text/plain"])
    assert words.startswith("NOT YET:") and "were both told they got job 1" in words
    timeline = words.split("every run finds this same one):\n", 1)[1].splitlines()
    assert timeline[0].split() == ["alice", "bob"]
    assert sum("SELECT → (1,)" in line for line in timeline) == 2
    drawing = "".join(shown["data"]["text/html"]).split("data:image/svg+xml;base64,", 1)[1]
    svg = base64.b64decode(drawing.split('"', 1)[0]).decode("utf-8")
    assert "the schedule that broke the rule" in svg and svg.count('class="returns"') == 2
    picture = page.locator(".jp-OutputArea-output img[alt='the schedule that broke the rule']")
    picture.last.scroll_into_view_if_needed(timeout=WAIT_MS)
    page.screenshot(path=str(ARTIFACTS / "site_race_check.png"))
    assert site.browser.page_errors == []
    assert site.browser.blocked == []
