"""The tree's shape, kept so by CI: no import circle between the project's files (imports under
`TYPE_CHECKING` included), no source file over 400 lines, no function over 60.

A circle means a callee was handed its whole caller; a long file or function means two ideas
share one name. The check reads the sources with `ast` only: nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rocketspark", "broker", "nameserver")
GENERATED = ("rocketspark/grpcv2/stubs/",)  # made by `make protos`
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def source_files() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return [path for path in files if not any(str(path.relative_to(ROOT)).startswith(g) for g in GENERATED)]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports, wherever the import stands (a function, a
    TYPE_CHECKING block): `from a.b import c` names `a.b.c` when that is a module, else `a.b`."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {name for name in found if name in modules and name != own}


def import_circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    files = source_files()
    modules = {module_name(path) for path in files}
    graph = {module_name(path): sorted(imported_modules(path, modules)) for path in files}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def long_functions() -> Iterator[str]:
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - start + 1
                if length > MAX_FUNCTION_LINES:
                    yield f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"


def test_the_check_sees_every_package() -> None:
    assert {module_name(path).split(".")[0] for path in source_files()} == set(PACKAGES)


def test_no_import_circle_between_the_projects_files() -> None:
    circles = import_circles()
    assert not circles, "modules that import each other (a callee given its caller?):\n" + "\n".join(map(str, circles))


def test_no_source_file_over_400_lines() -> None:
    long_files = [
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in source_files()
        if (count := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not long_files, "files to split along their seams:\n" + "\n".join(long_files)


def test_no_function_over_60_lines() -> None:
    functions = list(long_functions())
    assert not functions, "functions to split:\n" + "\n".join(functions)
