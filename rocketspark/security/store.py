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
import threading
from pathlib import Path

from rocketspark.security.acl import AclTable
from rocketspark.security.private import FILE_MODE, write_private

log = logging.getLogger(__name__)


class AclStore:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.table = AclTable()
        self._lock = threading.Lock()  # a table offered by an admin and one fetched at registration

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
        with self._lock:
            if table.version <= self.table.version:
                return False
            self._save(table)
            self.table = table
        log.info("user table version %d adopted (%d users)", table.version, len(table.users))
        return True

    def _save(self, table: AclTable) -> None:
        if self.path is not None:
            write_private(self.path, json.dumps(table.to_wire()).encode())
