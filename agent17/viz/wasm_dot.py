"""Graphviz in the browser: the board's SVG from Graphviz compiled to WebAssembly.

In the browser edition (a JupyterLite site, Python in Pyodide) there is no
`dot` program to run. The site ships `@viz-js/viz` (Graphviz with its wasm
inlined, one script) beside Pyodide in static/pyodide/; the first picture
loads it with one same-origin request and waits for its instance through
Pyodide's `run_sync` (JavaScript promise integration), so a picture is drawn
in the cell that asks for it, with no request outside the site.
"""

from __future__ import annotations

from typing import Any, Final

from agent17.browser import IN_BROWSER

VIZ_SCRIPT: Final = "viz-global.js"


class WasmDotUnavailable(Exception):
    """Graphviz's WebAssembly build cannot be loaded here (not the browser edition's site)."""


_instance: list[Any] = []


def _script_url() -> str:
    import pyodide_js  # type: ignore[import-not-found]  # exists in Pyodide only

    # Pyodide's own folder: the site build puts the Viz script beside pyodide.mjs.
    return f"{pyodide_js._api.config.indexURL}{VIZ_SCRIPT}"


def _load() -> Any:
    if _instance:
        return _instance[0]
    import js  # type: ignore[import-not-found]  # exists in Pyodide only
    from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]

    if not can_run_sync():
        raise WasmDotUnavailable("this browser cannot wait for Graphviz's WebAssembly module")
    url = _script_url()
    request = js.XMLHttpRequest.new()
    request.open("GET", url, False)  # synchronous: allowed in the kernel's worker
    request.send(None)
    if request.status != 200:
        raise WasmDotUnavailable(f"{url} answered {request.status}")
    # An indirect eval runs the script in the worker's global scope, where it sets Viz.
    js.eval(request.responseText)
    _instance.append(run_sync(js.Viz.instance()))
    return _instance[0]


def render_svg(source: str) -> str:
    """`source` (DOT) drawn as SVG text by Graphviz's WebAssembly build."""
    if not IN_BROWSER:
        raise WasmDotUnavailable("Graphviz's WebAssembly build is used in the browser only")
    import js

    viz = _load()
    options = js.Object.new()
    options.format = "svg"
    result = viz.render(source, options)
    if result.status != "success":
        problems = "; ".join(str(error.message) for error in result.errors)
        raise ValueError(f"Graphviz could not draw this graph: {problems}")
    return str(result.output)
