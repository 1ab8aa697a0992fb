"""How long an SQL92 filter expression may be: one bound, read by the package's ``compile``,
by the grammar's errors (which quote the expression) and by the request shapes that carry one.

Its own module so that none of them imports another for it: the package imports the grammar
(lazily, with sqlglot) and the grammar would otherwise import the package back.
"""

from __future__ import annotations

from typing import Final

MAX_EXPRESSION_CHARS: Final = 16_384  # longer is refused (a request field's bound, too)
