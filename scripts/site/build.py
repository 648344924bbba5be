"""Build the browser edition: a static JupyterLite site in site/, no request off its origin.

Run through ./scripts/site.sh (which makes the build's own venv first). Every
download is pinned in scripts/site/pins.txt and cached under .site-cache/, so a
second build needs no registry at all. The site holds:

- static/pyodide/: Pyodide's core (npm), the standard library's zip with the
  kernel's own packages inside, every other wheel the kernel may load, and a
  pyodide-lock.json listing exactly those wheels with their dependencies
  (Pyodide's own lock names hundreds of packages this site does not ship, and
  its repackaged wheels do not match PyPI's hashes), so nothing falls back to a
  CDN or PyPI. A cell that imports agent17 loads agent17 and what it requires
  (the kernel runs Pyodide's loadPackagesFromImports on every cell). All Python
  in it, the standard library included, is compiled to bytecode by Pyodide's
  own interpreter at build time (scripts/site/bytecode.py): the browser would
  otherwise compile every module it imports from source, in WebAssembly, on
  every visit. What the kernel fetches is stored gzipped, and the kernel loads
  Pyodide through load_pyodide.mjs, which inflates it;
- static/pyodide/viz-global.js: Graphviz compiled to WebAssembly, which agent17's
  pictures use where there is no `dot` program;
- files/notebooks/: the core notebooks under the student edition's rules, and
  files/assets/: the diagrams they read.
"""

from __future__ import annotations

import argparse
import ast
import base64
import email.parser
import gzip
import hashlib
import html
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
PINS = Path(__file__).with_name("pins.txt")
CACHE = REPO / ".site-cache"
SITE = REPO / "site"
PYODIDE_PLATFORM = "pyemscripten_2026_0_wasm32"
PYODIDE_PYTHON = "3.14"
NEEDS_PROCESSES = "needs-processes"
NEEDS_PROCESSES_LINE = (
    "This cell starts OS processes or threads; it runs on a machine with Python: `./scripts/lab.sh`"
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KERNEL_SETTINGS = "@jupyterlite/pyodide-kernel-extension:kernel"
MATHJAX_EXTENSION = "@jupyterlab/mathjax-extension"
# The kernel's own wheels (the ipykernel and widgetsnbextension shims, piplite and
# the kernel itself) ship inside the kernel's lab extension.
KERNEL_WHEELS = "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension/static/pypi"
# What the kernel's worker (pyodide-kernel's worker.js) needs before the kernel is
# ready: the packages it installs through piplite, one at a time, unless preloaded
# (their dependencies come along), and the imports it then runs.
KERNEL_PACKAGES = ("micropip", "piplite", "ipykernel", "comm", "pyodide-kernel", "jedi", "ipython")
KERNEL_IMPORTS = ["import micropip", "import piplite.piplite", "import pyodide_kernel"]
# What the browser imports besides those and the notebooks' import statements, as a
# run of every core notebook there shows: the shell's logger as the kernel starts,
# Pyodide's loading of a wheel, and show_source colouring SQL. Compiled, they stay in
# the standard library's zip, and no notebook fetches STDLIB_REST.
BROWSER_IMPORTS = [
    "import traitlets.log",
    "import tarfile",
    "import importlib.metadata._adapters",
    "import importlib.metadata._text",
    "import pygments.lexers.sql",
]
# Requirements of the site's wheels that the browser does without, and why.
NOT_IN_THE_BROWSER = {
    "openai": "agent17 imports it only to make a real model; the site reaches no model server",
    "httpx2": "openai's HTTP client, imported with it",
    "jupyterlab": "the site itself is the front end",
    "jupyterlab-widgets": "ipywidgets' front end, built into the site's JupyterLab",
    # jedi (and parso) would have to be unpacked as files (they read their grammars and
    # type stubs by path), about 800 of them at every kernel start: a second.
    "jedi": "IPython completes with its own completer when jedi is missing",
}
# Environment markers as Pyodide's Python evaluates them (a wheel's Requires-Dist).
PYODIDE_MARKERS = {
    "sys_platform": "emscripten",
    "platform_system": "Emscripten",
    "platform_machine": "wasm32",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": PYODIDE_PYTHON,
    "python_full_version": f"{PYODIDE_PYTHON}.0",
    "extra": "",
}
# The module the kernel loads Pyodide through (its pyodideUrl): it fetches what is
# stored gzipped and makes Python look for imports in the notebook's folder last.
LOAD_PYODIDE = Path(__file__).with_name("load_pyodide.mjs")
# What the site stores gzipped only (NAME.gz): the files of Pyodide's folder that
# the kernel fetches. load_pyodide.mjs holds the same list. The site's service worker
# answers for the WebAssembly module's own URL (add_inflating_service_worker).
GZIPPED = (".asm.mjs", ".asm.wasm", ".zip", ".whl")
# What no kernel start imports (the modules of the standard library's zip left as
# source, about a third of its bytes: most of them Pygments' lexers) is stored in a
# zip of its own; load_pyodide.mjs fetches it the first time Python imports one of
# them, as STDLIB_REST_INDEX (in the standard library's zip) lists them. Pyodide's own
# packages stay whole: Python imports them before load_pyodide.mjs can look.
STDLIB_REST = "python_stdlib_rest.zip"
STDLIB_REST_INDEX = "python_stdlib_rest.txt"
STDLIB_KEPT_WHOLE = ("pyodide", "_pyodide")
# Python compiled by Pyodide itself, under Node (see bytecode.py).
PYODIDE_RUN = Path(__file__).with_name("pyodide_run.mjs")
BYTECODE = Path(__file__).with_name("bytecode.py")
# Wheels whose .py files stay beside their bytecode: tracebacks and show_source read them.
KEEP_SOURCE = ("agent17",)
# The inputs whose change makes a new build (the test reuses a build otherwise).
INPUTS = (
    "agent17", "notebooks", "assets", "scripts/site", "scripts/site.sh",
    "scripts/student_edition.py", "pyproject.toml",
)  # fmt: skip
INPUTS_STAMP = ".build-inputs"


class BuildError(Exception):
    """A build step failed; the message says which and why."""


@dataclass(frozen=True)
class Pin:
    kind: str
    name: str
    version: str


def read_pins(path: Path = PINS) -> list[Pin]:
    """The pinned downloads: `kind name version` lines, # comments."""
    pins = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 3 or words[0] not in {"build", "npm", "wheel"}:
            raise BuildError(f"{path}:{number}: expected 'build|npm|wheel NAME VERSION'")
        pins.append(Pin(*words))
    return pins


def inputs_digest() -> str:
    """One hash of every file the site is built from."""
    digest = hashlib.sha256()
    for top in INPUTS:
        root = REPO / top
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO)).encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def run(command: list[str], **kwargs: Any) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        output = result.stdout[-3000:] + result.stderr[-3000:]
        raise BuildError(f"{' '.join(command)} failed:\n{output}")


def download_wheels(pins: list[Pin], python: Path) -> Path:
    """Every pinned wheel for Pyodide's platform, under .site-cache/wheels (downloaded once)."""
    folder = CACHE / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    wanted = [pin for pin in pins if pin.kind == "wheel"]
    missing = [pin for pin in wanted if not _find_wheel(folder, pin.name, pin.version)]
    if missing:
        run([
            str(python), "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--platform", PYODIDE_PLATFORM, "--platform", "any",
            "--python-version", PYODIDE_PYTHON, "--implementation", "cp",
            "--abi", "cp314", "--abi", "none", "-d", str(folder),
            *[f"{pin.name}=={pin.version}" for pin in missing],
        ])  # fmt: skip
    return folder


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _find_wheel(folder: Path, name: str, version: str) -> Path | None:
    for wheel in folder.glob("*.whl"):
        dist, found_version = wheel.name.split("-")[:2]
        if _normal(dist) == _normal(name) and found_version == version:
            return wheel
    return None


def download_npm(pins: list[Pin]) -> dict[str, Path]:
    """Each pinned npm package unpacked under .site-cache/npm/NAME@VERSION/package."""
    unpacked = {}
    for pin in pins:
        if pin.kind != "npm":
            continue
        target = CACHE / "npm" / f"{pin.name.replace('/', '+')}@{pin.version}"
        if not (target / "package" / "package.json").exists():
            with tempfile.TemporaryDirectory() as scratch:
                run(["npm", "pack", "--silent", f"{pin.name}@{pin.version}"], cwd=scratch)
                (tarball,) = Path(scratch).glob("*.tgz")
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                with tarfile.open(tarball) as archive:
                    archive.extractall(target, filter="data")
        unpacked[pin.name] = target / "package"
    return unpacked


def build_agent17_wheel(python: Path, folder: Path) -> Path:
    """agent17 as a wheel, built from a copy of the sources (the tree may be busy)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "agent17-src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(REPO / name, source / name)
        shutil.copytree(
            REPO / "agent17", source / "agent17", ignore=shutil.ignore_patterns("__pycache__")
        )
        run([
            str(python), "-m", "pip", "wheel", "--quiet", "--no-deps",
            "--no-build-isolation", "-w", str(folder), str(source),
        ])  # fmt: skip
    (wheel,) = folder.glob("agent17-*.whl")
    return wheel


def _top_level_imports(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = set()
    for name in names:
        first = name.split("/", 1)[0]
        if first.endswith((".dist-info", ".data")) or first == "__pycache__":
            continue
        if "/" in name:
            tops.add(first)
        elif first.endswith((".py", ".pyc")):
            tops.add(first.rpartition(".")[0])
    return sorted(tops)


def requirements(wheel: Path) -> list[str]:
    """What `wheel` requires in Pyodide: its Requires-Dist, markers evaluated there."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = email.parser.HeaderParser().parsestr(archive.read(metadata).decode("utf-8"))
    names = []
    for line in headers.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(PYODIDE_MARKERS):
            names.append(_normal(requirement.name))
    return names


def notebook_imports(notebooks: list[Path]) -> list[str]:
    """The import statements of the code cells in `notebooks`, as a cell's loader sees them."""
    statements = []
    for path in notebooks:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:
                continue  # an IPython magic, say: Python never sees that cell as it is
            statements += [
                ast.unparse(node)
                for node in ast.walk(tree)
                if isinstance(node, ast.Import)
                or (isinstance(node, ast.ImportFrom) and not node.level)
            ]
    return list(dict.fromkeys(statements))


def compile_to_bytecode(
    pyodide_npm: Path, archives: list[Path], imports: list[str], cache: Path = CACHE / "bytecode"
) -> list[Path]:
    """The archives with the modules `imports` loads compiled by Pyodide (bytecode.py); cached."""
    jobs = [
        {
            "source": f"in/{archive.name}",
            "target": f"out/{archive.name}",
            "keep_source": archive.name.startswith(KEEP_SOURCE),
        }
        for archive in archives
    ]
    task = json.dumps({"archives": jobs, "imports": imports}, indent=1)
    digest = hashlib.sha256(task.encode() + BYTECODE.read_bytes() + PYODIDE_RUN.read_bytes())
    for source in [pyodide_npm / "package.json", *archives]:
        digest.update(hashlib.sha256(source.read_bytes()).digest())
    folder = cache / digest.hexdigest()[:16]
    if not (folder / "done").exists():
        shutil.rmtree(cache, ignore_errors=True)  # an older build's: one is kept
        (folder / "in").mkdir(parents=True)
        for archive in archives:
            shutil.copy2(archive, folder / "in" / archive.name)
        (folder / "jobs.json").write_text(task, encoding="utf-8")
        run(["node", str(PYODIDE_RUN), str(pyodide_npm), str(BYTECODE), str(folder),
             "jobs.json"])  # fmt: skip
        shutil.rmtree(folder / "in")
        (folder / "done").touch()
    return [folder / "out" / archive.name for archive in archives]


def write_pyodide(pyodide_npm: Path, stdlib: Path, wheels: list[Path], target: Path) -> None:
    """Pyodide's core; `stdlib` with the kernel's packages in it; the other `wheels` with
    their own lock file; all in `target`."""
    target.mkdir(parents=True)
    for name in ("pyodide.mjs", "pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm",
                 "package.json"):  # fmt: skip
        shutil.copy2(pyodide_npm / name, target / name)
    stock = json.loads((pyodide_npm / "pyodide-lock.json").read_text(encoding="utf-8"))
    named = {_normal(wheel.name.split("-")[0]): wheel for wheel in wheels}
    depends = {
        name: [dep for dep in requirements(wheel) if dep not in NOT_IN_THE_BROWSER]
        for name, wheel in named.items()
    }
    in_stdlib = kernel_packages_in_the_stdlib(depends)
    with_packages(stdlib, [named[name] for name in sorted(in_stdlib)], target / "python_stdlib.zip")
    packages = {}
    for name, wheel in named.items():
        if name in in_stdlib:
            continue
        shutil.copy2(wheel, target / wheel.name)
        packages[name] = {
            "name": name,
            "version": wheel.name.split("-")[1],
            "file_name": wheel.name,
            "install_dir": "site",
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "package_type": "package",
            "imports": _top_level_imports(wheel),
            # Pyodide loads these along, whether by name or for a cell's import; what
            # the standard library's zip holds is always there.
            "depends": [dep for dep in depends[name] if dep not in in_stdlib],
            "unvendored_tests": False,
        }
    missing = [
        f"the kernel needs {name}"
        for name in KERNEL_PACKAGES
        if name not in in_stdlib and name not in NOT_IN_THE_BROWSER
    ]
    missing += [
        f"{name} requires {dep}"
        for name, package in packages.items()
        for dep in package["depends"]
        if dep not in packages
    ]
    if missing:
        raise BuildError(f"not in pins.txt (or NOT_IN_THE_BROWSER): {'; '.join(missing)}")
    lock = {"info": stock["info"], "packages": dict(sorted(packages.items()))}
    (target / "pyodide-lock.json").write_text(json.dumps(lock, indent=1), encoding="utf-8")
    shutil.copy2(LOAD_PYODIDE, target / LOAD_PYODIDE.name)
    for path in sorted(target.iterdir()):
        if path.name.endswith(GZIPPED):
            gzip_alone(path)


def kernel_packages_in_the_stdlib(depends: dict[str, list[str]]) -> frozenset[str]:
    """The kernel's packages and all they require, of those the site ships.

    They ride inside python_stdlib.zip, which Pyodide puts on sys.path as it starts,
    and import from there as they are: loaded as wheels, each of their files was
    unpacked into Pyodide's file system at every kernel start.
    """
    found: set[str] = set()
    todo = list(KERNEL_PACKAGES)
    while todo:
        name = todo.pop()
        if name not in found and name in depends:
            found.add(name)
            todo += depends[name]
    return frozenset(found)


def with_packages(stdlib: Path, wheels: list[Path], target: Path) -> None:
    """`stdlib` and the files of `wheels` in one zip at `target`, stored (see bytecode.py),
    but what no kernel start imports, which goes to its own zip beside it (STDLIB_REST).

    A wheel's .data/ (scripts, man pages) has no place on sys.path and stays out. The
    bytecode keeps the file name it was compiled under, in site-packages: tracebacks
    through the kernel's own code name that folder.
    """
    rest_names: list[str] = []
    with (
        zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as merged,
        zipfile.ZipFile(target.with_name(STDLIB_REST), "w", zipfile.ZIP_STORED) as rest,
    ):
        seen: set[str] = set()
        for archive_path in [stdlib, *wheels]:
            with zipfile.ZipFile(archive_path) as archive:
                for info in archive.infolist():
                    if info.filename.split("/", 1)[0].endswith(".data"):
                        continue
                    if info.filename in seen:
                        raise BuildError(f"{archive_path.name}: {info.filename} is there twice")
                    seen.add(info.filename)
                    info.compress_type = zipfile.ZIP_STORED
                    module = _not_imported_module(info.filename)
                    if module:
                        rest_names.append(module)
                    (rest if module else merged).writestr(info, archive.read(info))
        merged.writestr(STDLIB_REST_INDEX, "".join(f"{name}\n" for name in sorted(rest_names)))


def _not_imported_module(member: str) -> str | None:
    """The module a member of the standard library's zip is, if it is source (no kernel
    start imported it: bytecode.py compiled those) and may go to the rest."""
    path, dot, suffix = member.rpartition(".")
    parts = path.split("/")
    if suffix != "py" or not dot or parts[0] in STDLIB_KEPT_WHOLE:
        return None
    if not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def gzip_alone(path: Path, keep: bool = False) -> None:
    """`path` replaced by PATH.gz, or beside it if `keep` (same bytes on every build: no
    name, no time in it)."""
    with (
        path.open("rb") as source,
        path.with_name(path.name + ".gz").open("wb") as target,
        gzip.GzipFile(filename="", mode="wb", fileobj=target, compresslevel=9, mtime=0) as packed,
    ):
        shutil.copyfileobj(source, packed)
    if not keep:
        path.unlink()


def _saved_output_markdown(cell: dict[str, Any]) -> dict[str, Any]:
    """A needs-processes cell as the student sees it in the browser: code, saved output, a line."""
    source = "".join(cell["source"])
    parts = [f"```python\n{source}\n```"]
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream":
            parts.append(f"```text\n{''.join(output['text']).rstrip()}\n```")
        elif kind in {"display_data", "execute_result"}:
            data = output["data"]
            if WIDGET_VIEW in data:
                # A widget needs its kernel; its saved text would be a repr, not the widget.
                parts.append("*(a widget: it shows when the cell runs)*")
            elif "image/svg+xml" in data or "image/png" in data:
                # An <img> with a data: URL, not an attachment: JupyterLab resolves
                # attachments only for bitmaps, and an unresolved one is a request
                # for "attachment:NAME" that goes off the page.
                mime = "image/svg+xml" if "image/svg+xml" in data else "image/png"
                body = "".join(data[mime])
                if mime == "image/svg+xml":
                    body = base64.b64encode(body.encode("utf-8")).decode("ascii")
                parts.append(f'<img alt="saved output" src="data:{mime};base64,{body}">')
            elif "text/html" in data:
                parts.append("".join(data["text/html"]))
            elif "text/plain" in data:
                parts.append(f"```text\n{''.join(data['text/plain']).rstrip()}\n```")
        elif kind == "error":
            parts.append(f"```text\n{html.escape(output['ename'])}: {output['evalue']}\n```")
    parts.append(f"*{NEEDS_PROCESSES_LINE}*")
    markdown: dict[str, Any] = {
        "cell_type": "markdown",
        "metadata": dict(cell.get("metadata", {})),
        "source": "\n\n".join(parts),
    }
    return markdown


def student_edition(notebook: dict[str, Any]) -> dict[str, Any]:
    """The student edition's rules (scripts/student_edition.py), then the browser's own."""
    edition = _student_rules()
    notebook = edition(notebook) if edition else _fallback_student_rules(notebook)
    cells = []
    for cell in notebook["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and NEEDS_PROCESSES in tags:
            cells.append(_saved_output_markdown(cell))
        else:
            cells.append(cell)
    notebook["cells"] = cells
    notebook["metadata"]["kernelspec"] = {
        "display_name": "Python (Pyodide)",
        "language": "python",
        "name": "python",
    }
    return notebook


def _student_rules() -> Any:
    module_path = REPO / "scripts" / "student_edition.py"
    if not module_path.exists():
        return None
    sys.path.insert(0, str(module_path.parent))
    try:
        import student_edition as module  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return getattr(module, "student_notebook", None)


def _fallback_student_rules(notebook: dict[str, Any]) -> dict[str, Any]:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and "reveal" in cell.get("metadata", {}).get("tags", []):
            cell["outputs"] = []
            cell["execution_count"] = None
    return notebook


def write_contents(target: Path) -> list[Path]:
    """The core notebooks (student edition, browser rules) and the assets they read."""
    (target / "notebooks").mkdir(parents=True)
    written = []
    for source in sorted((REPO / "notebooks").glob("*.ipynb")):
        notebook = student_edition(json.loads(source.read_text(encoding="utf-8")))
        written.append(target / "notebooks" / source.name)
        written[-1].write_text(
            json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    shutil.copytree(REPO / "assets", target / "assets")
    return written


def lite_config() -> dict[str, Any]:
    """jupyter-lite.json: the local Pyodide, the kernel's own packages there already, no PyPI."""
    return {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "agent17: work stealing and autonomy",
            # The tests drive the page through window.jupyterapp.
            "exposeAppInBrowser": True,
            # MathJax: no core notebook writes mathematics, and JupyterLab fetched its
            # 0.85 MB (seven files) on every first visit to typeset the Markdown.
            "disabledExtensions": [
                "@jupyterlab/apputils-extension:announcements",
                MATHJAX_EXTENSION,
            ],
            "litePluginSettings": {
                KERNEL_SETTINGS: {
                    "pyodideUrl": f"./static/pyodide/{LOAD_PYODIDE.name}",
                    "disablePyPIFallback": True,
                    "pipliteUrls": [],
                    # The kernel installs none of these; load_pyodide.mjs loads none.
                    "loadPyodideOptions": {"packages": list(KERNEL_PACKAGES)},
                }
            },
        },
    }


def keep_kernel_loader(config: Path) -> None:
    """The kernel's pyodideUrl as lite_config sets it: `jupyter lite build` points it at
    pyodide.mjs whenever static/pyodide/ holds one."""
    site = json.loads(config.read_text(encoding="utf-8"))
    wanted = lite_config()["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]
    site["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]["pyodideUrl"] = wanted[
        "pyodideUrl"
    ]
    config.write_text(json.dumps(site, indent=2), encoding="utf-8")


# JupyterLite mounts the drive in a kernel only if its service worker is registered
# when the kernel is made. A notebook opened by a link on a first visit gets its
# kernel sooner, which then starts with no files (its folder /home/pyodide: no
# ../assets, nothing it writes seen by JupyterLab). So the kernel waits for the
# registration first, 10 s at most: with no service worker it goes on as before.
# The text is the pinned pyodide-kernel-extension's, minified; a new pin that no
# longer holds it stops the build.
DRIVE_CHECK = "l=!!((null==i?void 0:i.enabled)||crossOriginIsolated)"
DRIVE_CHECK_WHEN_READY = (
    "l=(await Promise.race([null==i?void 0:i.ready,new Promise(r=>setTimeout(r,1e4))])"
    ".catch(()=>{}),!!((null==i?void 0:i.enabled)||crossOriginIsolated))"
)


def mount_drive_when_ready(site: Path) -> None:
    """Make the kernel wait for the service worker before it decides to mount the drive."""
    folder = site / "extensions" / "@jupyterlite" / "pyodide-kernel-extension" / "static"
    found = [script for script in folder.glob("*.js") if DRIVE_CHECK in script.read_text("utf-8")]
    if len(found) != 1:
        raise SystemExit(
            f"site build: the kernel's drive check is in {len(found)} files of {folder}, not 1"
            " (a new pyodide-kernel-extension? see DRIVE_CHECK in scripts/site/build.py)"
        )
    text = found[0].read_text("utf-8")
    found[0].write_text(text.replace(DRIVE_CHECK, DRIVE_CHECK_WHEN_READY), encoding="utf-8")


INFLATING_SERVICE_WORKER = Path(__file__).with_name("inflating_service_worker.js")


def add_inflating_service_worker(site: Path) -> None:
    """Put inflating_service_worker.js before JupyterLite's service worker, its cache named
    after the module it keeps."""
    packed = site / "static" / "pyodide" / "pyodide.asm.wasm.gz"
    digest = hashlib.sha256(packed.read_bytes()).hexdigest()[:16]
    ours = INFLATING_SERVICE_WORKER.read_text(encoding="utf-8").replace("WASM_DIGEST", digest)
    worker = site / "service-worker.js"
    worker.write_text(ours + "\n" + worker.read_text(encoding="utf-8"), encoding="utf-8")


# The largest image an icon of the site keeps: a tab shows 16 pixels (32 on a dense
# screen). JupyterLab's lab/favicon.ico holds ten, up to 256 pixels: 0.32 MB that a
# first visit fetches.
ICON_PIXELS = 48


def small_icons(site: Path) -> None:
    """Every .ico of `site` with its images of ICON_PIXELS or fewer only."""
    for icon in site.rglob("*.ico"):
        data = icon.read_bytes()
        count = struct.unpack_from("<H", data, 4)[0]
        entries = [data[6 + 16 * n : 22 + 16 * n] for n in range(count)]
        # Width and height 0 mean 256.
        kept = [entry for entry in entries if 0 < max(entry[0], entry[1]) <= ICON_PIXELS]
        if not kept or len(kept) == count:
            continue
        images = []
        offset = 6 + 16 * len(kept)
        header = struct.pack("<HHH", 0, 1, len(kept))
        for entry in kept:
            size, start = struct.unpack_from("<II", entry, 8)
            header += entry[:8] + struct.pack("<II", size, offset)
            images.append(data[start : start + size])
            offset += size
        icon.write_bytes(header + b"".join(images))


def build(output: Path) -> None:
    pins = read_pins()
    python = Path(sys.executable)
    wheel_folder = download_wheels(pins, python)
    npm = download_npm(pins)
    wheels = [
        found
        for pin in pins
        if pin.kind == "wheel" and (found := _find_wheel(wheel_folder, pin.name, pin.version))
    ]
    kernel_wheels = sorted((Path(sys.prefix) / KERNEL_WHEELS).glob("*.whl"))
    # The kernel ships two widgetsnbextension shims: ipywidgets 8 takes the 4.x one.
    kernel_wheels = [w for w in kernel_wheels if not w.name.startswith("widgetsnbextension-3")]
    wheels += kernel_wheels
    wheels.append(build_agent17_wheel(python, CACHE / "agent17-wheel"))

    lite = CACHE / "lite"
    shutil.rmtree(lite, ignore_errors=True)
    lite.mkdir(parents=True)
    notebooks = write_contents(lite / "contents")
    imports = KERNEL_IMPORTS + BROWSER_IMPORTS + notebook_imports(notebooks)
    archives = [npm["pyodide"] / "python_stdlib.zip", *wheels]
    stdlib, *wheels = compile_to_bytecode(npm["pyodide"], archives, imports)
    write_pyodide(npm["pyodide"], stdlib, wheels, lite / "static" / "pyodide")
    # Beside Pyodide: the build copies that folder into the site as it is.
    shutil.copy2(npm["@viz-js/viz"] / "dist" / "viz-global.js", lite / "static" / "pyodide")
    # The site's service worker answers for it with the .gz (inflating_service_worker.js).
    gzip_alone(lite / "static" / "pyodide" / "viz-global.js", keep=True)
    (lite / "jupyter-lite.json").write_text(json.dumps(lite_config(), indent=1), encoding="utf-8")
    digest = inputs_digest()
    staging = output.with_name(output.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    jupyter = Path(sys.executable).with_name("jupyter")
    run(
        [str(jupyter), "lite", "build", "--lite-dir", str(lite), "--contents",
         str(lite / "contents"), "--output-dir", str(staging), "--no-sourcemaps"],
        cwd=lite,
        env={**os.environ, "JUPYTERLITE_NO_LIBARCHIVE": "1"},
    )  # fmt: skip
    keep_kernel_loader(staging / "jupyter-lite.json")
    mount_drive_when_ready(staging)
    small_icons(staging)
    add_inflating_service_worker(staging)
    (staging / INPUTS_STAMP).write_text(digest + "\n", encoding="utf-8")
    shutil.rmtree(output, ignore_errors=True)
    staging.rename(output)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=SITE, help="where the site goes (site/)")
    arguments = parser.parse_args()
    try:
        build(arguments.output.resolve())
    except BuildError as error:
        print(f"site.sh: {error}", file=sys.stderr)
        return 1
    print(f"site.sh: built {arguments.output} (serve it: python -m http.server -d site)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
