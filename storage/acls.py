"""The ACL file, `<data dir>/acls.json`: every ACL binding the authorizer holds, rewritten whole and
atomically on each change (storage/files.atomic_write), so a crash mid-write leaves the previous set."""

from __future__ import annotations

import json

from .files import JsonFile

ACLS_FILE = "acls.json"
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


class AclFile(JsonFile):
    """Bindings as rows of FIELDS: enum names (`"GROUP"`, `"LITERAL"`, `"READ"`, `"ALLOW"`) and strings."""

    name = ACLS_FILE
    what = "the ACL file"
    remedy = "restore it from a backup (moving it away starts with no ACLs)"

    @staticmethod
    def empty() -> list[dict[str, str]]:
        return []

    @staticmethod
    def decode(data: bytes) -> list[dict[str, str]]:
        rows = json.loads(data)["acls"]
        if not isinstance(rows, list) or not all(
                isinstance(r, dict) and all(isinstance(r.get(k), str) for k in FIELDS) for r in rows):
            raise ValueError("every entry needs the string fields " + ", ".join(FIELDS))
        return rows

    @staticmethod
    def encode(rows: list[dict[str, str]]) -> bytes:
        return json.dumps({"acls": rows}, indent=1).encode()
