"""``python -m rocketspark.cli``."""

import sys

from rocketspark.cli import main

sys.exit(main())
