"""The package's shape: every import points down the layers, and there are no cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import agent17

PACKAGE = Path(agent17.__file__).parent

# Lowest first. A module may import its own layer or any layer below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agent17.domain", "agent17.deterministic", "agent17.browser"),
    ("agent17.wire", "agent17.inputs"),
    ("agent17.armour",),
    ("agent17.store",),
    ("agent17.claims",),
    ("agent17.team",),
    ("agent17.tools",),
    ("agent17.agent",),
    ("agent17.bootstrap",),
    ("agent17.viz", "agent17.racelab"),
    ("agent17.exercises",),
    ("agent17.demo", "agent17.demo_processes", "agent17.live", "agent17.teammate_process"),
    ("agent17.cli", "agent17.__main__", "agent17.__init__"),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts)


def _layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _imports(path: Path) -> Iterator[str]:
    """Every agent17 module `path` imports, at any depth of the file (lazy imports too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("agent17"):
                yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("agent17"):
                    yield alias.name


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module.endswith(".__init__") and module != "agent17.__init__":
            module = module.removesuffix(".__init__")
        # `from agent17.x import sub` in x/__init__.py imports its own submodules, not itself.
        graph[module] = {name for name in _imports(path) if name not in ("agent17", module)}
    return graph


def test_every_import_points_down_the_layers() -> None:
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_there_are_no_import_cycles() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_module_or_sql_file_of_the_package_is_longer_than_500_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): count
        for pattern in ("*.py", "*.sql")
        for path in PACKAGE.rglob(pattern)
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}
