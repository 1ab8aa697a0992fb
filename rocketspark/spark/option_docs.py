"""The README's Spark option reference, made from the tables in :mod:`rocketspark.spark.options`.

``python -m rocketspark.spark.option_docs [README.md]`` rewrites the Markdown file's tables
headed ``| source option |`` and ``| sink option |``; ``tests/unit/test_spark_option_docs.py``
fails while the README's differ from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

from rocketspark.spark.option_table import with_reference
from rocketspark.spark.options import READER, WRITER

# Each table, with the heading of its first column in the README.
REFERENCES: Final = ((READER, "source option"), (WRITER, "sink option"))


def with_references(markdown: str) -> str:
    """``markdown`` with both option tables as the option tables make them."""
    for table, heading in REFERENCES:
        markdown = with_reference(markdown, table, heading)
    return markdown


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    path.write_text(with_references(path.read_text()))


if __name__ == "__main__":
    main()
