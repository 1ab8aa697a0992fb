"""Which modules run compiled, and whether a checkout's compiled modules still match their source.

``setup.py`` compiles the broker's request path with mypyc. A checkout builds it in place
(``make compiled``): each module's extension sits beside its ``.py`` and Python loads the
extension first. An extension older than its source would run the old code, so the tests and
benchmarks refuse to start on one (:func:`stale`) and say how to rebuild.
"""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGES: Final = ("rocketspark", "broker", "nameserver")
REBUILD: Final = "run `make compiled` (or delete the extensions to run the source as it is)"


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` was loaded from a C extension, not from its source."""
    path = getattr(module, "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def extensions(root: Path = ROOT) -> list[Path]:
    """The compiled modules of a source tree: every extension that has a ``.py`` beside it."""
    found: list[Path] = []
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for package in PACKAGES:
            found += [path for path in (root / package).rglob(f"*{suffix}") if _source_of(path, suffix).exists()]
    return sorted(set(found))


def stale(root: Path = ROOT) -> list[str]:
    """The source files changed since their extension was built, as paths under ``root``.

    A module's extension is a small shim; its code is in the build's one shared library
    (``<hash>__mypyc`` at the top of the tree), which a rebuild rewrites while it leaves an
    unchanged shim as it was. So a module is built as late as the newer of the two."""
    shared = [path.stat().st_mtime for path in root.glob("*__mypyc*") if path.is_file()]
    built_at = max(shared, default=0.0)
    out: list[str] = []
    for path in extensions(root):
        suffix = next(s for s in importlib.machinery.EXTENSION_SUFFIXES if path.name.endswith(s))
        source = _source_of(path, suffix)
        if source.stat().st_mtime > max(path.stat().st_mtime, built_at):
            out.append(str(source.relative_to(root)))
    return out


def require_fresh() -> None:
    """Stop a benchmark that would measure code older than its source."""
    changed = stale()
    if changed:
        raise SystemExit(f"changed since they were compiled: {', '.join(changed)}; {REBUILD}")


def summary() -> str:
    """One line for a benchmark's report: how the broker's send path runs here."""
    from rocketspark.remoting import server_connection

    if is_compiled(server_connection):
        return f"compiled with mypyc ({len(extensions())} modules in {ROOT})"
    return f"plain Python ({sys.implementation.name} {sys.version.split()[0]}): setup.py's modules are not compiled"


def _source_of(extension: Path, suffix: str) -> Path:
    return extension.with_name(extension.name[: -len(suffix)] + ".py")
