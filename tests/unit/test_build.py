"""The build's own checks: what pyproject.toml lists is what the tree has, so a
non-editable install (``make``, a wheel, ``package-job``'s archive) carries every module."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_in_the_tree_is_listed_for_the_build() -> None:
    """setuptools installs only the listed packages: one left out installs nothing, and only a
    stale build/ of an earlier install would hide it (rocketspark.errors once went missing so)."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert len(setuptools["packages"]) == len(set(setuptools["packages"])), "a package listed twice"
    listed = set(setuptools["packages"])
    mapped = {str(Path(d)).replace("/", ".") for d in setuptools["package-dir"].values()}
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("rocketspark", "broker", "nameserver")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - mapped - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    data_only = set(setuptools["package-data"])
    assert listed - found - data_only - set(setuptools["package-dir"]) == set(), "listed but not in the tree"


def test_the_license_is_an_spdx_expression() -> None:
    """setuptools deprecates the table form (``{ text = ... }``) and warns on every build."""
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
