"""SCRAM credentials managed through the admin APIs (KIP-554: DescribeUserScramCredentials,
AlterUserScramCredentials): Kafka's per-user validation, the data dir's credential file (written
off the event loop, one change at a time, before a change applies) and the live Users every SASL
listener authenticates against."""

from __future__ import annotations

import asyncio
import base64
import dataclasses

from groupd.protocol import ErrorCode
from groupd.storage.files import save_change
from groupd.storage.scram import Entries, ScramFile

from .sasl import Users
from .scram import ITERATIONS, MAX_ITERATIONS, MECHANISM_CODES, ScramCredential, from_salted_password

MECHANISMS = {code: name for name, code in MECHANISM_CODES.items()}
DUPLICATE = "A user credential cannot be altered twice in the same request"


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _row(credential: ScramCredential) -> dict:
    return {"salt": base64.b64encode(credential.salt).decode(), "iterations": credential.iterations,
            "stored_key": base64.b64encode(credential.stored_key).decode(),
            "server_key": base64.b64encode(credential.server_key).decode()}


def _credential(row: dict) -> ScramCredential:
    return ScramCredential(base64.b64decode(row["salt"]), base64.b64decode(row["stored_key"]),
                           base64.b64decode(row["server_key"]), int(row["iterations"]))


class ScramUsers:
    """The file's entries override what `sasl.users` derives: an upsertion replaces the credential,
    a deletion is kept as null so that a restart does not bring a sasl.users credential back."""

    def __init__(self, data_dir: str, users: Users, store=None) -> None:
        self.users = users
        # cluster mode: the credentials in etcd (coordinator/cluster/etcd/files.py)
        self._file = store or ScramFile(data_dir)
        self._writing = asyncio.Lock()  # one change at a time: each merges into the last one saved
        self.reload()

    def reload(self) -> None:
        """Read the credentials again: at start, and on a worker when the controller worker rewrote the file."""
        self.follow(self._file.load())

    def follow(self, entries: Entries) -> None:
        """The entries as stored now: at start, and in cluster mode when another node changed them."""
        self._entries = entries
        self._apply(entries)

    def _apply(self, entries: Entries) -> None:
        for user, mechanisms in entries.items():
            for mechanism, row in mechanisms.items():
                if mechanism in MECHANISM_CODES:
                    self.users.set_scram(mechanism, user, None if row is None else _credential(row))

    def describe(self, names: list[str] | None) -> list[tuple[Result, list[tuple[int, int]]]]:
        """Per user: its result and [(mechanism code, iterations)]. None or [] = every user."""
        held = self.users.scram_credentials()
        if not names:
            names = sorted(held)
        out, counts = [], {}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        for name in dict.fromkeys(names):
            if counts[name] > 1:
                out.append((Result(name, ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials for the "
                                   "same user twice in a single request"), []))
            elif name not in held:
                out.append((Result(name, ErrorCode.resource_not_found, "Attempt to describe a user credential "
                                   "that does not exist"), []))
            else:
                out.append((Result(name), [(MECHANISM_CODES[m], c.iterations) for m, c in sorted(held[name].items())]))
        return out

    async def alter(self, deletions, upsertions) -> list[Result]:
        """Kafka's ScramControlManager.alterCredentials: one change per user, deletions checked
        first; results are successful deletions, successful upsertions, then errors. Valid changes
        are written to the file (off the loop), then applied. OSError or DataDirError leaves
        everything as it was."""
        errors: dict[str, Result] = {}
        deletes: dict[str, int] = {}
        upserts: dict[str, object] = {}
        for d in deletions:
            if d.name in errors:
                continue
            if deletes.pop(d.name, None) is not None:
                errors[d.name] = Result(d.name, ErrorCode.duplicate_resource, DUPLICATE)
                continue
            error = self._invalid_deletion(d.name, d.mechanism)
            if error:
                errors[d.name] = error
            else:
                deletes[d.name] = d.mechanism
        for u in upsertions:
            if u.name in errors:
                continue
            if deletes.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
                errors[u.name] = Result(u.name, ErrorCode.duplicate_resource, DUPLICATE)
                continue
            error = _invalid_upsertion(u)
            if error:
                errors[u.name] = error
            else:
                upserts[u.name] = u
        changes: Entries = {}
        for name, code in deletes.items():
            changes.setdefault(name, {})[MECHANISMS[code]] = None
        for name, u in upserts.items():
            mechanism = MECHANISMS[u.mechanism]
            credential = from_salted_password(mechanism, u.salted_password, u.salt, u.iterations)
            changes.setdefault(name, {})[mechanism] = _row(credential)
        def entries() -> Entries | None:
            merged = {user: dict(mechanisms) for user, mechanisms in self._entries.items()}
            for user, mechanisms in changes.items():
                merged.setdefault(user, {}).update(mechanisms)
            return merged if changes else None
        async with self._writing:
            saved = await save_change(self._file.write, entries, self.follow)
            if saved is not None:
                self._entries = saved
                self._apply(changes)
        return [*(Result(n) for n in deletes), *(Result(n) for n in upserts), *errors.values()]

    def _invalid_deletion(self, name: str, code: int) -> Result | None:
        error = _invalid_name_or_mechanism(name, code)
        if error is None and self.users.scram(MECHANISMS[code], name) is None:
            return Result(name, ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        return error


def _invalid_name_or_mechanism(name: str, code: int) -> Result | None:
    if not name:
        return Result(name, ErrorCode.unacceptable_credential, "Username must not be empty")
    if code not in MECHANISMS:
        return Result(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _invalid_upsertion(u) -> Result | None:
    error = _invalid_name_or_mechanism(u.name, u.mechanism)
    if error is None and u.iterations < ITERATIONS:
        return Result(u.name, ErrorCode.unacceptable_credential, "Too few iterations")
    if error is None and u.iterations > MAX_ITERATIONS:
        return Result(u.name, ErrorCode.unacceptable_credential, "Too many iterations")
    return error
