"""The compiled build (setup.py, rocketspark.compiled): what is compiled, and stale extensions."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

from rocketspark import compiled

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _setup() -> ModuleType:
    """setup.py as a module (it calls setup() only when run as a script)."""
    spec = importlib.util.spec_from_file_location("rocketspark_setup", compiled.ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup()


def _setup_list() -> list[str]:
    return list(SETUP.COMPILED)


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _tree(root: Path, sources: dict[str, float], built: dict[str, float]) -> None:
    """Files under ``root``: sources and extensions, each with its modification time."""
    for name, when in {**sources, **built}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        os.utime(path, (when, when))


def test_a_source_newer_than_the_build_is_stale_whether_compiled_or_not(tmp_path: Path) -> None:
    """mypyc copies another module's Final constants into the code that reads them: a change to
    any module (or to setup.py's list) leaves the build behind."""
    _tree(
        tmp_path,
        {"rocketspark/a.py": 100.0, "broker/store/b.py": 100.0, "rocketspark/plain.py": 100.0, "setup.py": 100.0},
        {f"rocketspark/a{SUFFIX}": 150.0, f"broker/store/b{SUFFIX}": 150.0, f"0123abcd__mypyc{SUFFIX}": 150.0},
    )
    assert compiled.stale(tmp_path) == [] and compiled.refusal(tmp_path) is None
    for name in ("rocketspark/plain.py", "setup.py"):
        os.utime(tmp_path / name, (200.0, 200.0))
    assert compiled.stale(tmp_path) == ["rocketspark/plain.py", "setup.py"]
    assert "make compiled" in str(compiled.refusal(tmp_path))
    os.utime(tmp_path / f"0123abcd__mypyc{SUFFIX}", (300.0, 300.0))  # rebuilt: the shims' own dates do not matter
    assert compiled.stale(tmp_path) == []


def test_a_tree_with_nothing_compiled_is_never_stale(tmp_path: Path) -> None:
    _tree(tmp_path, {"rocketspark/a.py": 200.0}, {f"rocketspark/orphan{SUFFIX}": 1.0})  # no .py beside it
    assert compiled.extensions(tmp_path) == [] and compiled.stale(tmp_path) == []


def test_every_listed_module_exists_and_is_typed_source() -> None:
    listed = _setup_list()
    assert len(listed) == len(set(listed))
    for path in listed:
        assert (compiled.ROOT / path).is_file(), f"setup.py compiles {path}, which does not exist"
        assert path.startswith(compiled.PACKAGES), path


@pytest.mark.skipif(SETUP.why_plain() is not None, reason=f"built as plain Python here: {SETUP.why_plain()}")
def test_the_checkout_runs_every_listed_module_compiled() -> None:
    """make test builds in place: a module left as source here would make the benchmarks'
    figures (and these tests) describe another build than the one users install."""
    plain = [
        name for name in map(_module_name, _setup_list()) if not compiled.is_compiled(importlib.import_module(name))
    ]
    assert plain == [], f"not compiled: {plain}; run `make compiled`"
    assert compiled.summary().startswith("compiled with mypyc")


def test_no_compiled_function_reuses_an_exception_name_for_another_type() -> None:
    """mypyc gives a local one type: ``except A as exc`` then ``except B as exc`` in one
    function made the second clause raise TypeError when compiled (a malformed batch was answered
    with an internal error instead of its refusal)."""
    found = []
    for path in _setup_list():
        for function in ast.walk(ast.parse((compiled.ROOT / path).read_text())):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kinds: dict[str, set[str]] = {}
                for handler in ast.walk(function):
                    if isinstance(handler, ast.ExceptHandler) and handler.name and handler.type is not None:
                        kinds.setdefault(handler.name, set()).add(ast.unparse(handler.type))
                found += [f"{path}: {function.name}: {name}" for name, types in kinds.items() if len(types) > 1]
    assert found == []


# GCC's keywords spelled with two leading underscores: an attribute "_x" is the C field "__x".
_GCC_KEYWORDS = {"asm", "inline", "const", "signed", "volatile", "restrict", "typeof", "real", "imag", "alignof"}
_GCC_KEYWORDS |= {"thread", "attribute", "complex", "auto_type", "label__", "extension__"}


def test_no_compiled_module_names_an_attribute_after_a_c_keyword() -> None:
    """mypyc names an attribute's C field after it: ``_thread`` became ``__thread``, a keyword
    of GCC's, and the whole build failed to compile."""
    named = [
        f"{path}:{node.lineno}: {node.attr}"
        for path in _setup_list()
        for node in ast.walk(ast.parse((compiled.ROOT / path).read_text()))
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr[1:] in _GCC_KEYWORDS
    ]
    assert named == []


_PURE = {"int", "len", "min", "max", "abs"}  # calls a slice's bound may make: nothing happens twice


def test_no_compiled_slice_bound_calls_anything_that_acts() -> None:
    """mypyc computes a slice's bounds twice when it slices an object it does not know (a
    memoryview): ``memoryview(data)[take_commands(data, dispatch):]`` handed every pushed
    request to its listener twice. A bound may call only what is pure (``_PURE``)."""
    found = []
    for path in _setup_list():
        for node in ast.walk(ast.parse((compiled.ROOT / path).read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
                bounds = [b for b in (node.slice.lower, node.slice.upper, node.slice.step) if b is not None]
                calls = [n for b in bounds for n in ast.walk(b) if isinstance(n, ast.Call)]
                if any(not (isinstance(c.func, ast.Name) and c.func.id in _PURE) for c in calls):
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
