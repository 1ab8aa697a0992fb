"""The README's Spark option tables are the ones the option tables make."""

from __future__ import annotations

from pathlib import Path

from rocketspark.spark.option_docs import REFERENCES, with_references

README = Path(__file__).resolve().parents[2] / "README.md"
REGENERATE = (
    "README.md's Spark option tables differ from READER and WRITER in rocketspark/spark/options.py; "
    "regenerate them with `python -m rocketspark.spark.option_docs README.md` from the repository root"
)


def test_the_readme_documents_every_option_as_the_option_tables_say() -> None:
    text = README.read_text()
    for _table, heading in REFERENCES:
        assert f"| {heading} | default | meaning |" in text, f'README.md has lost its "| {heading} |" table'
    assert with_references(text) == text, REGENERATE
