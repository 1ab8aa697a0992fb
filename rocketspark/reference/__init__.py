"""Reference pages of the docs made from the code, so that they cannot drift from it.

``python -m rocketspark.reference`` (from the repository root) rewrites them:
``docs/reference/configuration.md`` from the config dataclasses (:mod:`.config`),
``docs/reference/cli.md`` from the argument parsers (:mod:`.cli`) and the option tables of
``docs/spark/options.md`` from the Spark connector's (:mod:`rocketspark.spark.option_docs`).
``tests/unit/test_reference_docs.py`` fails while a committed page differs from what this makes.
"""
