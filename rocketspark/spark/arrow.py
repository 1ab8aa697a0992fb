"""The source's Arrow schema: what the record batches a reader yields must match exactly.

Batch records become Arrow columns in :mod:`rocketspark.codec.arrow`, with no per-row Python;
this module only says which columns Spark expects, and of which types.
"""

from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from rocketspark.codec.arrow import UTC
from rocketspark.spark.schema import source_schema


@functools.lru_cache(maxsize=2)
def arrow_schema(include_properties: bool) -> pa.Schema:
    """The source schema as Spark converts it to Arrow (UTC timestamps)."""
    return to_arrow_schema(source_schema(include_properties), timezone=UTC)
