"""Runs inside Pyodide (scripts/site/pyodide_run.mjs): the site's zips, their hot modules compiled.

    bytecode.py JOBS.json    (paths in it are relative to /work, the mounted folder)

JOBS.json holds "archives", each {"source": ZIP, "target": ZIP, "keep_source":
BOOL} (the wheels and Pyodide's python_stdlib.zip),
and "imports", the import statements the kernel and the notebooks run. The
wheels are installed here and those statements run; every module they load is
then compiled, by this interpreter (the browser's own), into an unchecked-hash
.pyc (PEP 552: used as it is, never compared with a source), so the browser
imports it without compiling its source in WebAssembly on every visit. What
nothing imports stays source: it costs fewer bytes, and compiles if ever used.
With keep_source the .py stays and the .pyc goes to __pycache__ (agent17:
tracebacks and show_source read its source); without, the .pyc replaces the
.py, as in Pyodide's own packages (the import system and zipimport both load a
lone foo.pyc). RECORD is rewritten.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import py_compile
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

WORK = Path("/work")
# Fixed, so that the same inputs give the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# Where the browser imports from: the standard library's zip and site-packages.
STDLIB_ZIP = next(Path(entry) for entry in sys.path if entry.endswith(".zip"))
SITE_PACKAGES = next(Path(entry) for entry in sys.path if entry.endswith("site-packages"))


def install(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(SITE_PACKAGES)


def imported_files() -> set[tuple[Path, str]]:
    """Every loaded module's file: (where its zip is installed, its member name there)."""
    files = set()
    for module in list(sys.modules.values()):
        file = Path(getattr(module, "__file__", None) or "/")
        for root in (SITE_PACKAGES, STDLIB_ZIP):
            if file.is_relative_to(root):
                files.add((root, file.relative_to(root).as_posix()))
    return files


def compiled(source: bytes, shown_as: str, scratch: Path) -> bytes:
    """`source` as .pyc bytes, its code named `shown_as` (the path it is imported from)."""
    (scratch / "module.py").write_bytes(source)
    py_compile.compile(
        str(scratch / "module.py"),
        cfile=str(scratch / "module.pyc"),
        dfile=shown_as,
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return (scratch / "module.pyc").read_bytes()


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def rewrite(source: Path, target: Path, keep_source: bool, hot: set[tuple[Path, str]]) -> None:
    installed_at = STDLIB_ZIP if source.suffix == ".zip" else SITE_PACKAGES
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(source) as archive, tempfile.TemporaryDirectory() as scratch:
        for name in archive.namelist():
            if name.endswith("/"):
                continue
            data = archive.read(name)
            if (installed_at, name) not in hot or not name.endswith(".py"):
                files[name] = data
                continue
            pyc = compiled(data, f"{installed_at}/{name}", Path(scratch))
            if keep_source:
                files[name] = data
                folder, _, stem = name.rpartition("/")
                cached = f"__pycache__/{stem[:-3]}.{sys.implementation.cache_tag}.pyc"
                files[f"{folder}/{cached}" if folder else cached] = pyc
            else:
                files[name + "c"] = pyc
    for record in [name for name in files if name.endswith(".dist-info/RECORD")]:
        lines = [record_line(name, data) for name, data in sorted(files.items()) if name != record]
        files[record] = ("\n".join([*lines, f"{record},,"]) + "\n").encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Stored, not deflated: the site gzips each zip whole (build.py), which packs it
    # smaller than member by member, and the browser then reads members uninflated.
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as archive:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)


def main() -> None:
    jobs = json.loads((WORK / sys.argv[1]).read_text(encoding="utf-8"))
    for job in jobs["archives"]:
        if job["source"].endswith(".whl"):
            install(WORK / job["source"])
    warnings.simplefilter("ignore")  # other packages' SyntaxWarnings: nothing to act on here
    namespace: dict[str, object] = {}
    for statement in jobs["imports"]:
        # A module Pyodide lacks fails in the browser too: nothing to compile.
        with contextlib.suppress(ImportError):
            exec(statement, namespace)
    hot = imported_files()
    for job in jobs["archives"]:
        rewrite(WORK / job["source"], WORK / job["target"], job["keep_source"], hot)


main()
