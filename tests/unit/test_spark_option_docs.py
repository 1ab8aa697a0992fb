"""The docs' Spark option tables are the ones the option tables make."""

from __future__ import annotations

from rocketspark.spark.option_docs import PAGE, REFERENCES, with_references
from tests.helpers import docs_text

REGENERATE = (
    f"{PAGE}'s Spark option tables differ from READER and WRITER in rocketspark/spark/options.py; "
    "regenerate them with `python -m rocketspark.reference` from the repository root"
)


def test_the_docs_document_every_option_as_the_option_tables_say() -> None:
    text = docs_text(PAGE.removeprefix("docs/"))
    for _table, heading in REFERENCES:
        assert f"| {heading} | default | meaning |" in text, f'{PAGE} has lost its "| {heading} |" table'
    assert with_references(text) == text, REGENERATE
