"""The browser edition's build (scripts/site/build.py) on small wheels and notebooks it is given.

What the kernel loads follows from the site's pyodide-lock.json: each wheel's
dependencies as Pyodide's Python reads its Requires-Dist, the import names it
provides (bytecode-only modules included), and which imports the build compiles.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from site_harness import site_build_module


def make_wheel(folder: Path, name: str, requires: list[str], files: tuple[str, ...] = ()) -> Path:
    """A wheel of `name` 1.0 whose METADATA requires `requires` and which holds `files`."""
    wheel = folder / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
    metadata = "".join(f"Requires-Dist: {line}\n" for line in requires)
    with zipfile.ZipFile(wheel, "w") as archive:
        info = f"{name.replace('-', '_')}-1.0.dist-info"
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\n{metadata}\n")
        archive.writestr(f"{info}/RECORD", "")
        for file in files or (f"{name.replace('-', '_')}/__init__.py",):
            archive.writestr(file, "")
    return wheel


def fake_pyodide(folder: Path) -> Path:
    """What write_pyodide copies from Pyodide's npm package, as empty files and a lock."""
    folder.mkdir()
    for name in ("pyodide.mjs", "pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm"):
        (folder / name).write_text("", encoding="utf-8")
    (folder / "package.json").write_text("{}", encoding="utf-8")
    lock = {"info": {"abi_version": "x"}, "packages": {}}
    (folder / "pyodide-lock.json").write_text(json.dumps(lock), encoding="utf-8")
    return folder


def built_lock(tmp_path: Path, wheels: list[Path]) -> dict[str, Any]:
    build = site_build_module()
    stdlib = tmp_path / "python_stdlib.zip"
    with zipfile.ZipFile(stdlib, "w") as archive:
        archive.writestr("json/__init__.pyc", "")
    target = tmp_path / "site"
    build.write_pyodide(fake_pyodide(tmp_path / "npm"), stdlib, wheels, target)
    lock: dict[str, Any] = json.loads((target / "pyodide-lock.json").read_text(encoding="utf-8"))
    return lock


def kernel_wheels(folder: Path) -> list[Path]:
    build = site_build_module()
    names = [name for name in build.KERNEL_PACKAGES if name not in build.NOT_IN_THE_BROWSER]
    return [make_wheel(folder, name, []) for name in names]


def test_a_wheels_dependencies_are_its_requirements_as_pyodide_reads_them(tmp_path: Path) -> None:
    wheels = [
        *kernel_wheels(tmp_path),
        make_wheel(
            tmp_path,
            "agent17",
            [
                "pydantic>=2.7,<3",
                "openai>=3,<4",  # left out of the site: no model server is reachable
                "httpx2>=2.12,<3",
                'pexpect>4.3; sys_platform != "emscripten"',
                'pytest; extra == "test"',
                'typing_extensions; python_version < "3.12"',
                "Graph.Viz",
            ],
        ),
        make_wheel(tmp_path, "pydantic", []),
        make_wheel(tmp_path, "graph-viz", []),
    ]
    packages = built_lock(tmp_path, wheels)["packages"]
    assert packages["agent17"]["depends"] == ["pydantic", "graph-viz"]


def test_the_kernels_packages_and_their_requirements_are_in_the_standard_librarys_zip(
    tmp_path: Path,
) -> None:
    build = site_build_module()
    wheels = [
        *[w for w in kernel_wheels(tmp_path) if not w.name.startswith("ipython-")],
        make_wheel(tmp_path, "ipython", ["jedi>=0.18", "traitlets"], ("IPython/__init__.pyc",)),
        make_wheel(tmp_path, "traitlets", [], ("traitlets/__init__.pyc",)),
        make_wheel(tmp_path, "ipywidgets", ["comm", "traitlets", "widgetsnbextension"]),
        make_wheel(tmp_path, "widgetsnbextension", []),
    ]
    lock = built_lock(tmp_path, wheels)
    # What a notebook imports is a wheel in the lock; it requires nothing the zip holds.
    assert sorted(lock["packages"]) == ["ipywidgets", "widgetsnbextension"]
    assert lock["packages"]["ipywidgets"]["depends"] == ["widgetsnbextension"]
    zipped = gzip.decompress((tmp_path / "site" / "python_stdlib.zip.gz").read_bytes())
    (tmp_path / "merged.zip").write_bytes(zipped)
    with zipfile.ZipFile(tmp_path / "merged.zip") as archive:
        names = set(archive.namelist())
        stored = {info.compress_type for info in archive.infolist()}
    assert {"json/__init__.pyc", "IPython/__init__.pyc", "traitlets/__init__.pyc"} <= names
    assert not any(name.startswith(("ipywidgets", "jedi")) for name in names)
    for name in build.KERNEL_PACKAGES:  # importlib.metadata finds them there
        if name not in build.NOT_IN_THE_BROWSER:
            assert f"{name.replace('-', '_')}-1.0.dist-info/METADATA" in names
    assert stored == {zipfile.ZIP_STORED}


def test_what_no_kernel_start_imports_waits_in_a_zip_of_its_own(tmp_path: Path) -> None:
    build = site_build_module()
    files = ("IPython/__init__.pyc", "IPython/cold.py", "IPython/lexers/__init__.py", "a-b.py")
    wheels = [
        *[w for w in kernel_wheels(tmp_path) if not w.name.startswith("ipython-")],
        make_wheel(tmp_path, "ipython", [], files),
    ]
    built_lock(tmp_path, wheels)
    site = tmp_path / "site"
    archives = {}
    for name in ("python_stdlib.zip", build.STDLIB_REST):
        (tmp_path / name).write_bytes(gzip.decompress((site / f"{name}.gz").read_bytes()))
        archives[name] = zipfile.ZipFile(tmp_path / name)
    kept, rest = (set(archives[name].namelist()) for name in archives)
    # Source is what bytecode.py left uncompiled: nothing a kernel start imports.
    assert {"IPython/__init__.pyc", "json/__init__.pyc", "a-b.py"} <= kept
    assert "ipython-1.0.dist-info/METADATA" in kept  # importlib.metadata reads it there
    assert {"IPython/cold.py", "IPython/lexers/__init__.py"} <= rest
    assert not kept & rest
    # load_pyodide.mjs's finder takes these names from the kept zip (no request).
    listed = archives["python_stdlib.zip"].read(build.STDLIB_REST_INDEX).decode().split()
    assert {"IPython.cold", "IPython.lexers"} <= set(listed)
    assert "a-b" not in listed and "IPython" not in listed
    loader = build.LOAD_PYODIDE.read_text(encoding="utf-8")
    assert f'"{build.STDLIB_REST_INDEX}"' in loader and f"{build.STDLIB_REST}.gz" in loader


def test_what_the_kernel_fetches_is_stored_gzipped_alone_and_its_loader_knows_which(
    tmp_path: Path,
) -> None:
    build = site_build_module()
    wheels = [make_wheel(tmp_path, "agent17", ["pydantic"]), make_wheel(tmp_path, "pydantic", [])]
    lock = built_lock(tmp_path, [*kernel_wheels(tmp_path), *wheels])
    site = tmp_path / "site"
    names = {path.name for path in site.iterdir()}
    for name in ("pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"):
        assert f"{name}.gz" in names and name not in names
    assert {"pyodide.mjs", "pyodide-lock.json"} <= names
    assert build.LOAD_PYODIDE.name in names
    for wheel in wheels:
        inflated = gzip.decompress((site / f"{wheel.name}.gz").read_bytes())
        assert inflated == wheel.read_bytes() and wheel.name not in names
        (package,) = [p for p in lock["packages"].values() if p["file_name"] == wheel.name]
        assert package["sha256"] == hashlib.sha256(inflated).hexdigest()  # what the loader checks
    loader = build.LOAD_PYODIDE.read_text(encoding="utf-8")
    listed = re.search(r"const GZIPPED = \[(.*?)\];", loader)
    assert listed is not None
    assert tuple(json.loads(f"[{listed.group(1)}]")) == build.GZIPPED


def test_a_requirement_the_site_does_not_ship_stops_the_build(tmp_path: Path) -> None:
    wheels = [*kernel_wheels(tmp_path), make_wheel(tmp_path, "agent17", ["graphviz"])]
    with pytest.raises(site_build_module().BuildError, match="agent17 requires graphviz"):
        built_lock(tmp_path, wheels)


def test_a_wheel_of_bytecode_names_the_modules_it_provides(tmp_path: Path) -> None:
    files = (
        "typing_extensions.pyc",
        "tools/__init__.pyc",
        "shown.py",
        "__pycache__/shown.cpython-314.pyc",
    )
    wheel = make_wheel(tmp_path, "tools", [], files)
    assert site_build_module()._top_level_imports(wheel) == ["shown", "tools", "typing_extensions"]


def test_the_notebooks_imports_are_those_a_cell_runs(tmp_path: Path) -> None:
    cells = [
        {"cell_type": "markdown", "source": ["import nothing_in_markdown"]},
        {"cell_type": "code", "source": ["%%time\n", "import magic_cells_are_not_python"]},
        {"cell_type": "code", "source": ["import json\n", "from agent17 import Task\n", "x = 1"]},
        {"cell_type": "code", "source": ["def f():\n", "    from agent17.viz import board_dot\n"]},
        {"cell_type": "code", "source": ["import json"]},
    ]
    notebook = tmp_path / "01.ipynb"
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert site_build_module().notebook_imports([notebook]) == [
        "import json",
        "from agent17 import Task",
        "from agent17.viz import board_dot",
    ]


def test_what_the_imports_load_is_compiled_and_the_rest_stays_source(tmp_path: Path) -> None:
    build = site_build_module()
    pyodide = build.download_npm(build.read_pins())["pyodide"]
    jedi = make_wheel(tmp_path, "jedi", [], ("jedi/__init__.py", "jedi/cold.py"))
    agent17 = make_wheel(tmp_path, "agent17", [], ("agent17/__init__.py", "agent17/cold.py"))
    (stdlib, jedi, agent17) = build.compile_to_bytecode(
        pyodide,
        [pyodide / "python_stdlib.zip", jedi, agent17],
        ["import jedi", "from agent17 import __name__", "import no_such_module_in_pyodide"],
        tmp_path / "bytecode",
    )
    with zipfile.ZipFile(jedi) as archive:
        names = archive.namelist()
        record = archive.read("jedi-1.0.dist-info/RECORD").decode()
    assert {"jedi/__init__.pyc", "jedi/cold.py"} <= set(names)  # no source where compiled
    assert "jedi/__init__.py" not in names
    assert "jedi/__init__.pyc,sha256=" in record and "jedi/__init__.py," not in record
    with zipfile.ZipFile(agent17) as archive:
        names = archive.namelist()
    assert {"agent17/__init__.py", "agent17/cold.py"} <= set(names)  # agent17 keeps its sources
    assert [name for name in names if name.endswith(".pyc")] == [
        "agent17/__pycache__/__init__.cpython-314.pyc"
    ]
    with zipfile.ZipFile(stdlib) as archive:
        names = set(archive.namelist())
    assert "zipfile/__init__.pyc" in names and "zipfile/__init__.py" not in names  # installing
    assert "antigravity.py" in names and "antigravity.pyc" not in names  # nothing imports it
