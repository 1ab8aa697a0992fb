"""The wheel lists its packages by hand (pyproject.toml): a package directory left out installs
a rocketspark that fails its first import, which only an installed copy shows (the tests import
the source tree)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = {setuptools["package-dir"].get(name, name.replace(".", "/")) for name in setuptools["packages"]}
    found = {
        str(init.parent.relative_to(ROOT))
        for top in ("rocketspark", "broker", "nameserver")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
