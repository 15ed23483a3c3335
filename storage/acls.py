"""The ACL file, `<data dir>/acls.json`: every ACL binding the authorizer holds, rewritten whole and
atomically on each change (storage/files.atomic_write), so a crash mid-write leaves the previous set."""

from __future__ import annotations

import json
import os

from .files import DataDirError, atomic_write

ACLS_FILE = "acls.json"
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


class AclFile:
    """Bindings as rows of FIELDS: enum names (`"GROUP"`, `"LITERAL"`, `"READ"`, `"ALLOW"`) and strings."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, ACLS_FILE)

    def load(self) -> list[dict[str, str]]:
        if not os.path.exists(self.path):
            return []
        try:
            with open(self.path, "rb") as f:
                return self.decode(f.read())
        except OSError as e:
            raise DataDirError(f"cannot read the ACL file {self.path}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
            raise DataDirError(f"the ACL file {self.path} is damaged ({type(e).__name__}: {e}); restore it from "
                               "a backup (moving it away starts with no ACLs)") from None

    def save(self, rows: list[dict[str, str]]) -> None:
        atomic_write(self.path, self.encode(rows))

    @staticmethod
    def decode(data: bytes) -> list[dict[str, str]]:
        """The rows of the file's bytes; ValueError (KeyError, TypeError) when they are damaged."""
        rows = json.loads(data)["acls"]
        if not isinstance(rows, list) or not all(
                isinstance(r, dict) and all(isinstance(r.get(k), str) for k in FIELDS) for r in rows):
            raise ValueError("every entry needs the string fields " + ", ".join(FIELDS))
        return rows

    @staticmethod
    def encode(rows: list[dict[str, str]]) -> bytes:
        return json.dumps({"acls": rows}, indent=1).encode()
