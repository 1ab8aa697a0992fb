"""What ``rocketspark package-job`` installs rocketspark from, and what it adds for pyspark.

rocketspark is mostly run from a checkout (``make run`` installs it from the tree, not in
editable mode), at a version the package index may not have: asking the index for
``rocketspark==<version>`` then fails with pip's "No matching distribution found". So a
checkout is looked for first, in the order a person expects (the directory they run the
command in, the tree the running code comes from, the tree pip installed it from), and the
index is asked last, with an error that names ``--source .`` when it has no such version.
"""

from __future__ import annotations

import importlib.metadata
import json
import tomllib
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rocketspark.errors import ConfigError

DISTRIBUTION = "rocketspark"
# pyspark 4's pandas check (pyspark.sql.pandas.utils) warns "PySpark does not yet fully support
# pandas >= 3.0.0" on every worker that imports a newer one; its sql extra does not cap it.
PANDAS_CAP = "pandas<3"


@dataclass(frozen=True)
class Source:
    """What pip installs rocketspark from (a path or a requirement), and how it was chosen."""

    spec: str
    origin: str
    from_index: bool = False

    def installing(self) -> str:
        """The build step's name, and for the index what to do when it has no such version."""
        if self.from_index:
            return (
                f"installing {self.spec} from the package index (no rocketspark checkout found here, and "
                "rocketspark was not installed from one: run package-job in a rocketspark checkout, or give "
                "--source . (a checkout) or --source <a rocketspark wheel>)"
            )
        return f"installing rocketspark from {self.spec}"


def is_checkout(path: Path) -> bool:
    """A rocketspark source tree: a pyproject.toml that names the project rocketspark."""
    try:
        project = tomllib.loads((path / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return bool(project.get("project", {}).get("name") == DISTRIBUTION)


def installed_from() -> Path | None:
    """The local directory or wheel pip installed rocketspark from, as pip recorded it
    (PEP 610's direct_url.json); None for an install from an index or one since moved."""
    try:
        recorded = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not recorded:
        return None
    url = urllib.parse.urlparse(str(json.loads(recorded).get("url", "")))
    if url.scheme != "file":
        return None
    path = Path(urllib.request.url2pathname(url.path))
    if path.is_dir():
        return path if is_checkout(path) else None
    return path if path.is_file() else None


def project_source(given: str | None, cwd: Path | None = None) -> Source:
    """``--source`` (a wheel or a source tree); else the checkout the command runs in; else the
    checkout the running code is (an editable install or PYTHONPATH); else the directory or
    wheel pip installed rocketspark from; else the package index at this very version."""
    if given is not None:
        if not Path(given).exists():
            raise ConfigError(f"package-job: --source {given} does not exist: give a rocketspark wheel or source tree")
        return Source(given, "--source")
    here = (cwd or Path.cwd()).resolve()
    if is_checkout(here):
        return Source(str(here), "the checkout package-job runs in")
    code = Path(__file__).resolve().parents[2]
    if is_checkout(code):
        return Source(str(code), "the checkout this rocketspark runs from")
    installed = installed_from()
    if installed is not None:
        return Source(str(installed), "where pip installed this rocketspark from")
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            "package-job: rocketspark is not installed here and no checkout was found: run it in a rocketspark "
            "checkout, or give --source"
        ) from None
    return Source(f"{DISTRIBUTION}=={version}", "the package index", from_index=True)


def pyspark_sql_requirements() -> list[str]:
    """What pyspark's ``sql`` extra adds to pyspark itself (pandas, pyarrow, numpy), without its
    marker: the workers need pandas for Spark 4's Arrow-optimized Python UDFs (on by default,
    ``spark.sql.execution.pythonUDF.arrow.enabled``); without it every UDF falls back to pickled
    rows with a warning. pyspark itself is the cluster's; its extra is read from the installed
    pyspark, so the pins follow the pyspark the job is written for."""
    from packaging.requirements import Requirement

    try:
        specs = importlib.metadata.requires("pyspark") or []
    except importlib.metadata.PackageNotFoundError:
        return ["pandas>=2.2", PANDAS_CAP]  # what pyspark 4's sql extra asks for
    out = []
    for spec in specs:
        requirement = Requirement(spec)
        marker = requirement.marker
        if marker is not None and marker.evaluate({"extra": "sql"}) and not marker.evaluate({"extra": ""}):
            out.append(f"{requirement.name}{requirement.specifier}")
    return [*out, PANDAS_CAP]
