"""``python -m rocketspark.cli``."""

from rocketspark.cli import run

run()
