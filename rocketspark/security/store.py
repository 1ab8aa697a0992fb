"""The user table a server enforces, in a file only the server's user can read.

The file holds secret keys (a server needs them to check signatures), so it is created with
mode 0600 (never written under a wider mode first), and one found readable by others is
narrowed back to 0600 with a warning. A server takes a table only when it is newer than its
own (``adopt``): ``Admin.create_user`` and kin offer each change to every server; a server
that was down then keeps its older table until a later change reaches it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

from rocketspark.security.acl import AclTable

log = logging.getLogger(__name__)

FILE_MODE = 0o600


class AclStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.table = AclTable()

    def load(self) -> AclStore:
        """Read the table saved last, if any (a missing file is an empty table)."""
        if self.path is None or not self.path.exists():
            return self
        mode = stat.S_IMODE(self.path.stat().st_mode)
        if mode & 0o077:
            log.warning("%s was readable by other users (mode %o): narrowed to 0600", self.path, mode)
            os.chmod(self.path, FILE_MODE)
        self.table = AclTable.from_wire(json.loads(self.path.read_text()))
        return self

    def adopt(self, table: AclTable) -> bool:
        """Keep ``table`` if it is newer than this one (saved first); whether it was kept."""
        if table.version <= self.table.version:
            return False
        self._save(table)
        self.table = table
        log.info("user table version %d adopted (%d users)", table.version, len(table.users))
        return True

    def _save(self, table: AclTable) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.unlink(missing_ok=True)  # a leftover keeps its mode through O_CREAT: start afresh
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "w") as out:
            json.dump(table.to_wire(), out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
