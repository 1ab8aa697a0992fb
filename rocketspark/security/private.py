"""Writing a file only its owner may read: user tables, server configs with secrets, keys.

One rule for all of them: the file is written whole under a temporary name created afresh
with mode 0600 (never under an older file's wider mode, never half-written under its real
name), made durable, then renamed into place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

FILE_MODE: Final = 0o600


def write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # a leftover keeps its mode through O_CREAT: start afresh
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
