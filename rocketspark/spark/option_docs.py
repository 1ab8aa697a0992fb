"""The Spark option reference of the docs, made from the tables in :mod:`rocketspark.spark.options`.

``python -m rocketspark.spark.option_docs [docs/spark/options.md]`` (or ``python -m
rocketspark.reference``, which rewrites every generated page) rewrites the Markdown file's tables
headed ``| source option |`` and ``| sink option |``; ``tests/unit/test_spark_option_docs.py``
fails while the page's tables differ from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from rocketspark.spark.option_table import with_reference
from rocketspark.spark.options import READER, WRITER

# The page that holds both tables, from the repository root.
PAGE: Final = "docs/spark/options.md"

# Each table, with the heading of its first column on that page.
REFERENCES: Final = ((READER, "source option"), (WRITER, "sink option"))


def with_references(markdown: str) -> str:
    """``markdown`` with both option tables as the option tables make them."""
    for table, heading in REFERENCES:
        markdown = with_reference(markdown, table, heading)
    return markdown


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else PAGE)
    path.write_text(with_references(path.read_text()))


if __name__ == "__main__":
    main()
