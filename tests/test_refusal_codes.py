"""Every refusal code is typed and documented: README's tables against the enums, both ways."""

from __future__ import annotations

import ast
import importlib
import re
from enum import StrEnum
from pathlib import Path

import agent17

PACKAGE = Path(agent17.__file__).parent
README = PACKAGE.parent / "README.md"

_HEADING = re.compile(r"^### .*`(agent17(?:\.\w+)+)`")
_ROW = re.compile(r"^\| `([a-z_]+)` \|")


def _readme_tables() -> dict[str, set[str]]:
    """Each documented enum (dotted path) and the codes its table lists."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Refusal codes\n", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in section.splitlines():
        if heading := _HEADING.match(line):
            current = tables.setdefault(heading.group(1), set())
        elif (row := _ROW.match(line)) and current is not None:
            current.add(row.group(1))
    return tables


def _enum(dotted: str) -> type[StrEnum]:
    module, name = dotted.rsplit(".", 1)
    found = getattr(importlib.import_module(module), name)
    assert isinstance(found, type) and issubclass(found, StrEnum), dotted
    return found


def test_each_readme_table_lists_exactly_its_enums_codes() -> None:
    tables = _readme_tables()
    assert len(tables) >= 7
    for dotted, documented in tables.items():
        assert documented == {code.value for code in _enum(dotted)}, dotted


def _code_enums_in_the_package() -> set[str]:
    """Every StrEnum class named ...Code in the package's source (found without importing)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not node.name.endswith("Code"):
                continue
            if any(isinstance(base, ast.Name) and base.id == "StrEnum" for base in node.bases):
                found.add(f"{module}.{node.name}")
    return found


def test_every_code_enum_of_the_package_has_a_readme_table() -> None:
    assert _code_enums_in_the_package() == set(_readme_tables())


_REFUSAL_MAKERS = {"Refusal", "refusal", "_refusal", "error_result"}


def _refusal_classes(trees: list[ast.Module]) -> set[str]:
    """Refusal and every class the package derives from it, by name."""
    names = {"Refusal"}
    grew = True
    while grew:
        grew = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names:
                    bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
                    if bases & names:
                        names.add(node.name)
                        grew = True
    return names


def _bare_string_codes(tree: ast.Module, makers: set[str]) -> list[int]:
    """Lines where a refusal is made with its code as a string literal or an f-string."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", "")
        if name not in makers:
            continue
        code = node.args[0] if node.args else None
        code = next((k.value for k in node.keywords if k.arg == "code"), code)
        if isinstance(code, ast.JoinedStr) or (
            isinstance(code, ast.Constant) and isinstance(code.value, str)
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_refusal_in_the_package_is_made_with_a_bare_string_code() -> None:
    sources = {path: ast.parse(path.read_text(encoding="utf-8")) for path in PACKAGE.rglob("*.py")}
    makers = _refusal_classes(list(sources.values())) | _REFUSAL_MAKERS
    bare = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path, tree in sources.items()
        if (lines := _bare_string_codes(tree, makers))
    }
    assert bare == {}


def test_the_scan_finds_a_bare_string_code() -> None:
    tree = ast.parse(
        "class ToolError(Refusal): ...\n"
        "class SomeError(ToolError): ...\n"
        "raise SomeError('not_typed', 'a message')\n"
        "raise ToolError(f'invalid_{what}', 'a message')\n"
        "error_result(ToolCode.UNKNOWN_TOOL, 'typed, so fine')\n"
        "raise self._refusal(code='bare', message='m')\n"
    )
    makers = _refusal_classes([tree]) | _REFUSAL_MAKERS
    assert sorted(_bare_string_codes(tree, makers)) == [3, 4, 6]
