"""The ACL file in the data dir (storage/acls.py, coordinator/security/authorizer.py): every change is on disk
(written off the event loop) before it applies, a failed or torn write keeps the previous set, a
damaged file stops start-up."""

from __future__ import annotations

import os

import pytest

from groupd.coordinator.security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from groupd.coordinator.security.authorizer import Access
from groupd.coordinator.settings import Settings
from groupd.storage.acls import ACLS_FILE
from groupd.storage.files import DataDirError

HOST = "/127.0.0.1"


def settings(data_dir) -> Settings:
    return Settings.load(env={}, overrides=[f"data.dir={data_dir}", "authorizer.class.name=x"])


def read_group(name: str, principal: str = "User:alice") -> AclBinding:
    return AclBinding(ResourceType.GROUP, name, PatternType.LITERAL, principal, "*", AclOperation.READ,
                      AclPermission.ALLOW)


def allowed(access: Access, group: str) -> bool:
    return access.authorizer.authorize("User:alice", HOST, AclOperation.READ, ResourceType.GROUP, group)


async def test_created_and_deleted_acls_are_loaded_by_the_next_start(tmp_path):
    first = Access(settings(tmp_path))
    await first.create([read_group("a"), read_group("b"), read_group("a")])
    assert await first.delete([AclFilter(ResourceType.GROUP, "b")]) == [[read_group("b")]]
    again = Access(settings(tmp_path))
    assert list(again.authorizer) == [read_group("a")] and allowed(again, "a") and not allowed(again, "b")


async def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    access = Access(settings(tmp_path))
    await access.create([read_group("a")])

    def crash(*_):  # the rename never happens: the process died after writing the temporary file
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        await access.create([read_group("b")])
    with pytest.raises(OSError):
        await access.delete([AclFilter()])
    assert list(access.authorizer) == [read_group("a")] and not allowed(access, "b")
    monkeypatch.undo()
    assert list(Access(settings(tmp_path)).authorizer) == [read_group("a")]  # the torn .tmp is ignored


def test_a_damaged_file_stops_start_up_with_one_line(tmp_path):
    (tmp_path / ACLS_FILE).write_text('{"acls": [{"resource_type": "GROUP"')
    with pytest.raises(DataDirError, match="ACL file .* is damaged"):
        Access(settings(tmp_path))
    (tmp_path / ACLS_FILE).write_text('{"acls": [{"resource_type": "NOPE", "resource_name": "g", "pattern_type": '
                                      '"LITERAL", "principal": "User:a", "host": "*", "operation": "READ", '
                                      '"permission": "ALLOW"}]}')
    with pytest.raises(DataDirError, match="invalid ACL"):
        Access(settings(tmp_path))
