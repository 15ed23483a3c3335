"""The SCRAM credential file, `<data dir>/scram-credentials.json`: what AlterUserScramCredentials
set, per user and mechanism — salt, iterations, StoredKey and ServerKey (base64), never a password —
or null where a deletion removed a credential `sasl.users` derives. Rewritten whole and atomically
(storage/files.atomic_write) before a change applies, so a torn write keeps the previous set."""

from __future__ import annotations

import base64
import json
import os

from .files import DataDirError, atomic_write

SCRAM_FILE = "scram-credentials.json"
KEYS = ("salt", "stored_key", "server_key")

# {user: {mechanism: {"salt": b64, "iterations": int, "stored_key": b64, "server_key": b64} | None}}
Entries = dict[str, dict[str, dict | None]]


class ScramFile:
    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, SCRAM_FILE)

    def load(self) -> Entries:
        if not os.path.exists(self.path):
            return {}
        try:
            with open(self.path, "rb") as f:
                return self.decode(f.read())
        except OSError as e:
            raise DataDirError(f"cannot read the SCRAM credential file {self.path}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSONDecodeError is a ValueError
            raise DataDirError(f"the SCRAM credential file {self.path} is damaged ({type(e).__name__}: {e}); "
                               "restore it from a backup (moving it away keeps only sasl.users)") from None

    def save(self, users: Entries) -> None:
        atomic_write(self.path, self.encode(users))

    @staticmethod
    def decode(data: bytes) -> Entries:
        """The entries of the file's bytes; ValueError (KeyError, TypeError, ...) when damaged."""
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
