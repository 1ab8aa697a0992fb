"""The pages whose blocks start Spark (the README's walkthrough, the Spark connector's page)
run as written, as tests/docrun.py runs every page: each page's Python in an interpreter of its
own, so each starts one JVM of its own next to the suite's shared SparkSession."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docblocks import SPARK_PAGES
from tests.docrun import run_page

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


# What each page's query says it did: 1,000 messages sent by the CLI (and the README's one
# from Python) read back through Spark; the stateful page's first customer's closed session.
COPIED = {
    "README.md": "copied 1001 new messages",
    "docs/spark/index.md": "1000 rows copied",
    "docs/spark/stateful.md": "c-1: 3 payments, 1500 cents, total 1500",
}


@pytest.mark.parametrize("page", SPARK_PAGES)
def test_the_page_runs_as_written(page: str, tmp_path: Path) -> None:
    assert COPIED[page] in run_page(page, tmp_path / "checkout")
