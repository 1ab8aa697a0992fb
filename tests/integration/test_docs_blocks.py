"""Every ```bash and ```python block of the docs pages runs as written (tests/docrun.py says
how), page by page; the Spark pages run in tests/spark/test_docs_blocks.py, and the blocks
other tests run are marked with those tests' names (tests/docblocks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docblocks import runnable_pages
from tests.docrun import run_page

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("page", runnable_pages(spark=False))
def test_the_page_runs_as_written(page: str, tmp_path: Path) -> None:
    run_page(page, tmp_path / "checkout")
