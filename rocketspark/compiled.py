"""Which modules run compiled, and whether a checkout's compiled modules still match their source.

``setup.py`` compiles the broker's request path with mypyc. A checkout builds it in place
(``make compiled``): each module's extension sits beside its ``.py`` and Python loads the
extension first. A build older than the source would run the old code, so the tests and
benchmarks refuse to start on one (:func:`refusal`) and say how to rebuild.
"""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGES: Final = ("rocketspark", "broker", "nameserver")
REBUILD: Final = "run `make compiled` (or `make uncompiled` to run the checkout as source)"


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
    """The sources changed since the checkout was compiled, as paths under ``root`` (none when
    nothing is compiled).

    Any module counts, not only the compiled ones: mypyc copies the value of another module's
    ``Final`` constant into the code that reads it. So does ``setup.py``, which says what is
    compiled. The build is as old as its shared library (``<hash>__mypyc`` at the top of the
    tree; ``make compiled`` dates it and every shim to the build's start), or as its shims
    without one."""
    built = extensions(root)
    if not built:
        return []
    shared = [path.stat().st_mtime for path in root.glob("*__mypyc*") if path.is_file()]
    built_at = max(shared) if shared else max(path.stat().st_mtime for path in built)
    sources = [root / "setup.py"] + [path for package in PACKAGES for path in (root / package).rglob("*.py")]
    return sorted(str(path.relative_to(root)) for path in sources if path.exists() and path.stat().st_mtime > built_at)


def refusal(root: Path = ROOT) -> str | None:
    """Why the tests or a benchmark must not run on this checkout's build, or None."""
    changed = stale(root)
    return f"changed since the checkout was compiled: {_some(changed)}; {REBUILD}" if changed else None


def require_fresh() -> None:
    """Stop a benchmark that would measure code older than its source."""
    why = refusal()
    if why is not None:
        raise SystemExit(why)


def summary() -> str:
    """One line for a benchmark's report: how the broker's send path runs here."""
    from rocketspark.remoting import server_connection

    if is_compiled(server_connection):
        return f"compiled with mypyc ({len(extensions())} modules in {ROOT})"
    return f"plain Python ({sys.implementation.name} {sys.version.split()[0]}): setup.py's modules are not compiled"


def _some(paths: list[str], shown: int = 5) -> str:
    """A few of ``paths``, for a message."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def _source_of(extension: Path, suffix: str) -> Path:
    return extension.with_name(extension.name[: -len(suffix)] + ".py")
