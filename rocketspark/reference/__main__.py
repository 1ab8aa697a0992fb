"""``python -m rocketspark.reference [ROOT]``: rewrite every generated reference page under
``ROOT/docs`` (default: the current directory, the repository root)."""

from __future__ import annotations

import sys
from pathlib import Path

from rocketspark.reference import cli, config
from rocketspark.spark import option_docs


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    (root / config.PAGE).write_text(config.page())
    (root / cli.PAGE).write_text(cli.page())
    options = root / option_docs.PAGE
    options.write_text(option_docs.with_references(options.read_text()))
    print(f"wrote {config.PAGE}, {cli.PAGE} and the tables of {option_docs.PAGE}")


if __name__ == "__main__":
    main()
