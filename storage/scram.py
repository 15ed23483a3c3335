"""The SCRAM credential file, `<data dir>/scram-credentials.json`: what AlterUserScramCredentials
set, per user and mechanism — salt, iterations, StoredKey and ServerKey (base64), never a password —
or null where a deletion removed a credential `sasl.users` derives. Rewritten whole and atomically
(storage/files.atomic_write) before a change applies, so a torn write keeps the previous set."""

from __future__ import annotations

import base64
import json

from .files import JsonFile

SCRAM_FILE = "scram-credentials.json"
KEYS = ("salt", "stored_key", "server_key")

# {user: {mechanism: {"salt": b64, "iterations": int, "stored_key": b64, "server_key": b64} | None}}
Entries = dict[str, dict[str, dict | None]]


class ScramFile(JsonFile):
    name = SCRAM_FILE
    what = "the SCRAM credential file"
    remedy = "restore it from a backup (moving it away keeps only sasl.users)"

    @staticmethod
    def empty() -> Entries:
        return {}

    @staticmethod
    def decode(data: bytes) -> Entries:
        users = json.loads(data)["users"]
        for mechanisms in users.values():
            for entry in mechanisms.values():
                if entry is not None:
                    int(entry["iterations"])
                    for key in KEYS:
                        base64.b64decode(entry[key], validate=True)
        return users

    @staticmethod
    def encode(users: Entries) -> bytes:
        return json.dumps({"users": users}, indent=1, sort_keys=True).encode()
