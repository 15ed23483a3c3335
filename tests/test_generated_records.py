"""The record codecs generated from Kafka's schemas (storage/codegen.py -> storage/generated_records.py):
the checked-in module is what the generator makes of the checked-in schemas."""

from __future__ import annotations

import json
import shutil
import sys
import types

import pytest

from storage import codegen
from storage.records import GroupMetadataKey, GroupMetadataValue, encode_key, encode_value


@pytest.mark.parametrize("out", codegen.OUTPUTS, ids=lambda out: out.module)
def test_the_generated_modules_are_what_the_generator_makes_of_the_schemas(out):
    with open(codegen.path_of(out), encoding="utf-8") as f:
        assert f.read() == codegen.generate(out), "run `python -m storage.codegen` and commit the result"


def test_the_check_mode_finds_nothing_stale(capsys):
    assert codegen.main(["--check"]) == 0
    assert capsys.readouterr().out == ""


def test_a_key_schema_in_kafka_4s_form_generates_the_same_codec(tmp_path, monkeypatch):
    # Kafka 4.x: "coordinator-key", the record type in apiKey, key version 0 (the old form: validVersions "2")
    shutil.copy(f"{codegen.SCHEMAS}/GroupMetadataValue.json", tmp_path)
    (tmp_path / "GroupMetadataKey.json").write_text("// a comment line, as Kafka's files start\n" + json.dumps({
        "apiKey": 2, "type": "coordinator-key", "name": "GroupMetadataKey", "validVersions": "0",
        "flexibleVersions": "none", "fields": [{"name": "group", "type": "string", "versions": "0"}]}))
    monkeypatch.setattr(codegen, "SCHEMAS", str(tmp_path))
    module = types.ModuleType("storage._generated_for_a_test")
    module.__package__ = "storage"
    monkeypatch.setitem(sys.modules, module.__name__, module)  # where dataclasses look the annotations up
    exec(compile(codegen.generate(codegen.Output("x.py", "a test", ("GroupMetadata",))), "x.py", "exec"), module.__dict__)
    key, value = module.GroupMetadataKey("grp"), module.GroupMetadataValue("", 0, None, None, -1, ())
    assert module.KEY_TYPES == {module.GroupMetadataKey: 2}
    assert module.KEY_WRITERS[module.GroupMetadataKey](key) == encode_key(GroupMetadataKey("grp"))
    assert module.VALUE_WRITERS[module.GroupMetadataValue](value, 3) == encode_value(GroupMetadataValue("", 0, None, None, -1, ()))
