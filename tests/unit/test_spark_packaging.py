"""A packaged job's checks: the driver's check of spark-submit's settings, and what an
executor without rocketspark is told."""

from __future__ import annotations

import argparse
import pickle
import re
import sys
import types
from pathlib import Path

import pytest

from rocketspark.cli import package_job
from rocketspark.cli.pack_source import Source, installed_from, project_source
from rocketspark.errors import ConfigError
from rocketspark.spark.datasource import check_packaged
from rocketspark.spark.executor_imports import Guarded, MissingOnExecutor


def test_a_shipped_interpreter_needs_an_archive_unpacked_under_its_directory() -> None:
    check_packaged({})  # the workers' own Python
    check_packaged({"spark.pyspark.python": "/opt/python/bin/python3"})
    check_packaged(
        {"spark.pyspark.python": "./environment/bin/python", "spark.archives": "/jobs/env.tar.gz#environment"}
    )
    check_packaged({"spark.pyspark.python": "./env/bin/python", "spark.yarn.dist.archives": "hdfs:///e.tgz#env"})
    with pytest.raises(ConfigError, match=r"no archive is unpacked as 'environment' \(spark.archives: none\)"):
        check_packaged({"spark.pyspark.python": "./environment/bin/python"})
    with pytest.raises(ConfigError, match=r"--archives job-env\.tar\.gz#environment"):
        check_packaged({"spark.pyspark.python": "./environment/bin/python", "spark.archives": "/jobs/env.tar.gz#other"})


class Shipped(Guarded):
    def __init__(self, value: int) -> None:
        self.value = value


def test_guarded_objects_travel_and_come_back() -> None:
    back = pickle.loads(pickle.dumps(Shipped(7)))
    assert isinstance(back, Shipped) and back.value == 7


def shipped_from(module_name: str) -> bytes:
    """A Guarded object pickled on a driver whose ``module_name`` the executor lacks."""
    ghost = types.ModuleType(module_name)
    exec("from rocketspark.spark.executor_imports import Guarded\nclass Reader(Guarded):\n    pass\n", ghost.__dict__)
    ghost.Reader.__module__ = module_name
    sys.modules[module_name] = ghost
    try:
        return pickle.dumps(ghost.Reader())
    finally:
        del sys.modules[module_name]  # the executor's Python has no such module


def test_an_executor_without_the_classes_gets_told_how_to_ship_them() -> None:
    with pytest.raises(MissingOnExecutor, match="rocketspark is not installed in the Python this Spark executor") as e:
        pickle.loads(shipped_from("rocketspark.ghost_reader"))
    assert "--archives job-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_an_executor_missing_a_dependency_is_told_which() -> None:
    with pytest.raises(MissingOnExecutor, match=r"rocketspark is installed .* but its dependency 'fastwire' is not"):
        pickle.loads(shipped_from("fastwire"))


def package_args(tmp_path: Path, **given: object) -> argparse.Namespace:
    job = tmp_path / "job.py"
    job.write_text("print('job')\n")
    defaults: dict[str, object] = {"job": str(job), "python": sys.executable, "requirement": [], "source": None}
    return argparse.Namespace(**(defaults | given))


def test_package_job_names_each_bad_argument_before_building(tmp_path: Path) -> None:
    package_job.check_arguments(package_args(tmp_path))
    with pytest.raises(ConfigError, match="no job file"):
        package_job.check_arguments(package_args(tmp_path, job=str(tmp_path / "nope.py")))
    with pytest.raises(ConfigError, match="--python /opt/no/python3 is not a Python found here"):
        package_job.check_arguments(package_args(tmp_path, python="/opt/no/python3"))
    with pytest.raises(ConfigError, match=r"no requirements file .*reqs.txt \(-r\)"):
        package_job.check_arguments(package_args(tmp_path, requirement=[str(tmp_path / "reqs.txt")]))
    with pytest.raises(ConfigError, match=r"--source .* does not exist"):
        project_source(str(tmp_path / "rocketspark.whl"))


def test_package_job_packs_rocketspark_s_requirements_but_not_pyspark_or_extras() -> None:
    wanted = package_job.requirements()
    names = {re.split(r"[<>=!~; \[]", spec, maxsplit=1)[0].lower() for spec in wanted}
    assert {"pyarrow", "grpcio", "numpy", "msgpack", "protobuf"} <= names
    assert "pyspark" not in names  # the cluster's own
    assert not names & {"pytest", "venv-pack", "grpcio-tools"}  # extras


def test_package_job_packs_pandas_for_spark_s_arrow_udfs() -> None:
    """Spark 4 runs Python UDFs through Arrow by default, which needs pandas on the workers."""
    names = {re.split(r"[<>=!~; \[]", spec, maxsplit=1)[0].lower() for spec in package_job.requirements()}
    assert "pandas" in names
    assert "pandas<3" in package_job.requirements()  # pyspark 4 warns on pandas 3


def test_package_job_uses_the_checkout_it_runs_in(tmp_path: Path) -> None:
    checkout = tmp_path / "rocketspark-checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text('[project]\nname = "rocketspark"\nversion = "0.1.0"\n')
    assert project_source(None, cwd=checkout) == Source(str(checkout), "the checkout package-job runs in")
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    assert project_source(None, cwd=other).spec != str(other)


def test_package_job_outside_a_checkout_uses_the_tree_pip_installed_rocketspark_from(tmp_path: Path) -> None:
    """The suite runs rocketspark installed (not editable) from this checkout, as `make` does:
    pip's direct_url.json leads back to it, not to the package index."""
    root = Path(__file__).resolve().parents[2]
    installed = installed_from()
    if installed is None:  # an editable install or PYTHONPATH run: the running code is the checkout
        assert project_source(None, cwd=tmp_path).spec == str(root)
        return
    assert installed == root
    assert project_source(None, cwd=tmp_path) == Source(str(root), "where pip installed this rocketspark from")


def test_the_package_index_source_names_source_dot_as_the_fix() -> None:
    said = Source("rocketspark==0.1.0", "the package index", from_index=True).installing()
    assert said.startswith("installing rocketspark==0.1.0 from the package index")
    assert "--source ." in said


def test_the_printed_lines_are_complete(tmp_path: Path) -> None:
    lines = package_job.submit_lines(Path("job-env.tar.gz"), "job.py", "local[2]", ["--nameserver", "ns:9876"])
    assert lines[-2] == "mkdir -p environment && tar -xzf job-env.tar.gz -C environment"
    assert lines[-1] == (
        "spark-submit --master 'local[2]' --archives 'job-env.tar.gz#environment' "
        "--conf spark.pyspark.python=./environment/bin/python job.py --nameserver ns:9876"
    )


def test_spark_submit_is_told_to_run_in_the_activated_venv(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark's spark-submit finds SPARK_HOME with the python3 on PATH: a shell whose python3 is
    not this venv's is told to activate it first."""
    bin_dir = Path(sys.executable).parent
    if sys.prefix == sys.base_prefix or not (bin_dir / "spark-submit").exists():
        pytest.skip("the suite runs in a venv with pyspark (make test's .venv)")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert package_job.activation() == bin_dir / "activate"
    assert package_job.submit_lines(Path("a.tgz"), "job.py", "yarn", [])[0] == f"source {bin_dir / 'activate'}"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert package_job.activation() is None


def test_the_job_s_arguments_follow_a_double_dash() -> None:
    words = ["package-job", "job.py", "-o", "x.tgz", "--", "--nameserver", "ns:1", "--", "y"]
    assert package_job.split_job_arguments(words) == (
        ["package-job", "job.py", "-o", "x.tgz"],
        ["--nameserver", "ns:1", "--", "y"],
    )
    assert package_job.split_job_arguments(["admin", "send", "--", "t"]) == (["admin", "send", "--", "t"], [])
