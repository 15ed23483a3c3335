"""Message versions newer than kio 0.6.5's, built from Kafka's own JSON schemas (protocol/schemas/).

kio's classes are frozen dataclasses whose fields carry their wire type; its reader and writer (and
bounds.py) work from those alone. A version kio lacks is therefore built the same way: each struct's
fields at that version, in the schema's order, reusing kio's field of the latest version it has
wherever the schema field existed there (so kio's names, timedelta fields and tags stay as they
are) and building the fields that are new. Only the messages listed in NEWER are built; the schemas
are Kafka 4.4.0's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from .apis import ApiKey

SCHEMAS = os.path.join(os.path.dirname(__file__), "schemas")
# (api key, version) → the schema's message name without Request/Response, and the kio version to reuse
NEWER: dict[tuple[int, int], tuple[str, int]] = {
    (ApiKey.STREAMS_GROUP_HEARTBEAT, 1): ("StreamsGroupHeartbeat", 0),  # KIP-1331, Kafka 4.4
    (ApiKey.STREAMS_GROUP_DESCRIBE, 1): ("StreamsGroupDescribe", 0),
}
_PRIMITIVES: dict[str, tuple[type, str]] = {"int8": (i8, "int8"), "int16": (i16, "int16"), "int32": (i32, "int32"),
                                            "int64": (i64, "int64"), "bool": (bool, "bool"), "string": (str, "string")}
_ZERO = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "string": ""}


def request_class(api_key: int, version: int) -> type:
    return _message(api_key, version, "Request")


def response_class(api_key: int, version: int) -> type:
    return _message(api_key, version, "Response")


@cache
def _message(api_key: int, version: int, kind: str) -> type:
    name, base_version = NEWER[(api_key, version)]
    schema = _load(f"{name}{kind}.json")
    base = (load_request_schema if kind == "Request" else load_response_schema)(api_key, base_version)
    structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}
    known = _kio_classes(base)
    return _Builder(version, api_key, structs, known, base, base_version).struct(schema["name"], schema["fields"],
                                                                                 top=True)


def _load(filename: str) -> dict:
    with open(os.path.join(SCHEMAS, filename)) as f:
        text = re.sub(r"^\s*//.*$", "", f.read(), flags=re.MULTILINE)  # Kafka's schemas carry comments
    return json.loads(text)


def _kio_classes(base: type) -> dict[str, type]:
    """Every entity class of kio's module for the base version, by name."""
    module = sys.modules[base.__module__]
    return {k: v for k, v in vars(module).items() if isinstance(v, type) and dataclasses.is_dataclass(v)}


def _in(versions: str | None, version: int) -> bool:
    if not versions or versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class _Builder:
    def __init__(self, version: int, api_key: int, structs: dict, known: dict[str, type], base: type,
                 base_version: int) -> None:
        self.version, self.api_key, self.structs, self.known, self.base = version, api_key, structs, known, base
        self.base_version = base_version  # the kio version whose classes `known` and `base` are
        self.built: dict[str, type] = {}

    def struct(self, name: str, fields: list[dict], top: bool = False) -> type:
        if name in self.built:
            return self.built[name]
        old = self.known.get(name)
        old_fields = {f.name: f for f in dataclasses.fields(old)} if old is not None else {}
        spec = []
        for f in fields:
            if not _in(f.get("versions"), self.version):
                continue
            spec.append(self.field(f, old_fields))
        namespace: dict[str, Any] = {
            "__type__": self.base.__type__ if top else EntityType.nested, "__version__": i16(self.version),
            "__flexible__": True, "__api_key__": i16(self.api_key), "__header_schema__": self.base.__header_schema__}
        cls = dataclasses.make_dataclass(name, spec, namespace=namespace, frozen=True, slots=True, kw_only=True)
        cls.__module__ = __name__
        self.built[name] = cls
        return cls

    def field(self, f: dict, old_fields: dict[str, dataclasses.Field]) -> tuple:
        snake = _snake(f["name"])
        if _in(f.get("versions"), self.base_version):  # kio has it: its name, type and metadata
            old = old_fields.get(snake) or old_fields.get(snake.removesuffix("_ms"))
            if old is None:
                raise LookupError(f"kio has no field for {f['name']}")
            kind = f["type"].removeprefix("[]")
            if kind in self.structs or "fields" in f:  # a struct: rebuilt at this version
                nested = self.struct(kind, f.get("fields") or self.structs[kind])
                typ = tuple[nested, ...] if f["type"].startswith("[]") else nested
                if _in(f.get("nullableVersions"), self.version):
                    typ = typ | None
            else:
                typ = old.type
            return old.name, typ, _copy(old)
        return snake, *self.new_field(f)

    def new_field(self, f: dict) -> tuple[Any, dataclasses.Field]:
        nullable = _in(f.get("nullableVersions"), self.version)
        kind = f["type"].removeprefix("[]")
        array = f["type"].startswith("[]")
        if kind in _PRIMITIVES:
            py, kafka = _PRIMITIVES[kind]
            meta = {"kafka_type": kafka}
            if array:
                return (tuple[py, ...] | None if nullable else tuple[py, ...]), dataclasses.field(
                    metadata=meta, default=None if nullable else ())
            default = f.get("default")
            if default == "null" or (default is None and nullable):
                return py | None, dataclasses.field(metadata=meta, default=None)
            value = _ZERO[kind] if default is None else (default == "true" if kind == "bool" else
                                                         default if kind == "string" else int(default))
            return py, dataclasses.field(metadata=meta, default=py(value))
        nested = self.struct(kind, f.get("fields") or self.structs[kind])
        if array:
            return ((tuple[nested, ...] | None, dataclasses.field(default=None)) if nullable
                    else (tuple[nested, ...], dataclasses.field(default=())))
        return (nested | None, dataclasses.field(default=None)) if nullable else (nested, dataclasses.field())


def _copy(old: dataclasses.Field) -> dataclasses.Field:
    if old.default is not dataclasses.MISSING:
        return dataclasses.field(metadata=old.metadata, default=old.default)
    if old.default_factory is not dataclasses.MISSING:
        return dataclasses.field(metadata=old.metadata, default_factory=old.default_factory)
    return dataclasses.field(metadata=old.metadata)
