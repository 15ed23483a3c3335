"""Generate the record codecs of the coordinator logs from Kafka's own JSON record schemas.

    python -m groupd.storage.codegen            # rewrite every generated module from storage/schemas/
    python -m groupd.storage.codegen --check    # exit 1 and name the modules that differ (tests run this)

Each row of OUTPUTS is one generated module: its records (a `<Name>Key.json` and `<Name>Value.json`
pair each, from storage/schemas/) become frozen slots classes written out as the dataclasses they
stand for (storage/record_class.py), a reader and a writer per struct and version, and the tables
the hand-written layers dispatch on (storage/records.py, storage/consumer_records.py):

    KEY_TYPES       key class -> the int16 record type it is written with (the highest it has)
    KEY_READERS     record type -> read(reader) -> key                 (past the type; wire.key_reader)
    KEY_WRITERS     key class -> write(key) -> bytes                   (with the type; wire.key_writer)
    VALUE_CLASSES   key class -> its value class
    VALUE_VERSIONS  value class -> the range of its versions
    VALUE_READERS   key class -> read(reader, version) -> value        (past the version)
    VALUE_WRITERS   value class -> write(value, version) -> bytes      (with the version)

Which version to write stays with the hand-written layer (OffsetCommitValue v3 or v1, ...).

What the schema language means here, as Kafka's own generator reads it: a key's schema in the old
form ("type": "data") names its record types in validVersions, in the new form ("type":
"coordinator-key") in apiKey; flexibleVersions switch strings, bytes and arrays to uvarint lengths
and end every struct with a tagged-field section; a tagged field is written only when it is not its
default; a nullable struct is preceded by an int8 (-1 null, 1 present); a field outside a version
takes its default when read.

Over 500 lines because it is one translation, schema to Python, whose readers, writers and classes
share the field model; what it writes is checked in and tested for staleness.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = os.path.join(HERE, "schemas")


@dataclasses.dataclass(frozen=True)
class Output:
    module: str  # under storage/
    log: str
    records: tuple[str, ...]
    # struct type (or "Record.StructType", for one record's struct only) -> class name
    renames: dict[str, str] = dataclasses.field(default_factory=dict)
    classes: dict[str, str] = dataclasses.field(default_factory=dict)  # class -> module that writes it by hand
    hashable: tuple[str, ...] = ()  # classes that are hashable but not frozen (else frozen)
    notes: dict[str, str] = dataclasses.field(default_factory=dict)  # "Class.field" -> a comment on it


OUTPUTS = [
    Output(
        "generated_records.py", "__consumer_offsets",
        ("OffsetCommit", "GroupMetadata",
         "ConsumerGroupMetadata", "ConsumerGroupPartitionMetadata", "ConsumerGroupMemberMetadata",
         "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
         "ConsumerGroupCurrentMemberAssignment", "ConsumerGroupRegularExpression",
         "ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupTargetAssignmentMetadata",
         "ShareGroupTargetAssignmentMember", "ShareGroupCurrentMemberAssignment", "ShareGroupStatePartitionMetadata"),
        # Kafka repeats one struct under two names; the records share one class
        renames={"TopicPartition": "TopicPartitions"},
        # one bytes object per committed offset (memory); built and read here through its fields
        classes={"OffsetCommitValue": ".offset_value"},
        # not frozen: a frozen class sets each field through object.__setattr__, a fifth of a load
        hashable=("OffsetCommitKey",),
        notes={
            "GroupMetadataValue.protocol_type": '"" = none',
            "GroupMetadataValue.current_state_timestamp": "-1 = unknown",
            "ConsumerGroupMetadataValue.metadata_hash": "tagged (Kafka 4.1, KIP-1101); 0 = not written",
            "TopicMetadata.partition_metadata": "Kafka 4.0 writes it empty",
            "ClassicMemberMetadata.session_timeout_ms": "only for classic-protocol members in a consumer group",
            "ConsumerGroupMemberMetadataValue.classic_member_metadata": "tagged field 0",
            "ConsumerGroupCurrentMemberAssignmentValue.state": "MemberState's int8 value (coordinator.consumer)",
            "ConsumerGroupRegularExpressionValue.version": "the metadata version the regex was resolved against",
            "ConsumerGroupRegularExpressionValue.timestamp": "when it was resolved, ms",
        },
    ),
    Output(
        "generated_streams_records.py", "__consumer_offsets (streams groups, KIP-1071)",
        ("StreamsGroupMetadata", "StreamsGroupTopology", "StreamsGroupMemberMetadata",
         "StreamsGroupTargetAssignmentMetadata", "StreamsGroupTargetAssignmentMember",
         "StreamsGroupCurrentMemberAssignment"),
        # the current assignment's tasks carry tagged assignment epochs, the target's do not;
        # Kafka's Endpoint/KeyValue/TopicInfo names are the share and consumer records' too
        renames={"StreamsGroupCurrentMemberAssignmentValue.TaskIds": "CurrentTaskIds",
                 "TopicInfo": "StreamsTopicInfo", "Endpoint": "StreamsEndpoint", "KeyValue": "StreamsKeyValue"},
        notes={
            "StreamsGroupMetadataValue.validated_topology_epoch": "tagged; -1 = none validated",
            "StreamsGroupCurrentMemberAssignmentValue.state": "the member state's int8 (core/streams/group.py)",
            "CurrentTaskIds.assignment_epochs": "tagged; only in the current assignment's active tasks",
        },
    ),
    # A row away (copy the schemas into storage/schemas/, then add the names or a row):
    #   __share_group_state: share-coordinator/src/main/resources/common/message/
    #     Share{Snapshot,Update}{Key,Value}.json -> Output("generated_share_records.py", ...)
    #   __transaction_state: transaction-coordinator/src/main/resources/common/message/
    #     TransactionLog{Key,Value}.json -> Output("generated_transaction_records.py", ...)
]

HEADER = '''"""GENERATED by storage/codegen.py from Kafka's record schemas in storage/schemas/: do not edit.

The records of {log}:
{names}.
Regenerate with `python -m groupd.storage.codegen`.
"""

# flake8: noqa
from __future__ import annotations

import struct
import uuid

from . import record_class, wire
from .wire import CorruptRecord, not_null_count
'''

FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d", "bool": "?"}
KEY_LAYOUT = {"string": "s", "int32": "i"}  # keys are flat: classic strings and int32s, read by a table
NULL_COMPACT, NULL_ARRAY32 = repr(b"\x00"), repr(b"\xff" * 4)  # a null array's count
PY_TYPES = {"int8": "int", "int16": "int", "uint16": "int", "int32": "int", "int64": "int", "float64": "float",
            "bool": "bool", "string": "str", "bytes": "bytes", "uuid": "uuid.UUID"}


# ---------------------------------------------------------------------------------------------
# The schema language


class Versions:
    """"0+", "1-4", "3", "none"."""

    def __init__(self, spec: str | None) -> None:
        spec = spec or "none"
        if spec == "none":
            self.low, self.high = 0, -1
        elif spec.endswith("+"):
            self.low, self.high = int(spec[:-1]), 1 << 15
        elif "-" in spec:
            low, high = spec.split("-")
            self.low, self.high = int(low), int(high)
        else:
            self.low = self.high = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def each(self) -> range:
        return range(self.low, self.high + 1)


def load_schema(name: str) -> dict:
    """A schema file: JSON with // comments on lines of their own."""
    with open(os.path.join(SCHEMAS, name + ".json"), encoding="utf-8") as f:
        lines = [line for line in f if not line.lstrip().startswith("//")]
    return json.loads("".join(lines))


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclasses.dataclass
class Field:
    name: str  # python: snake_case
    type: str  # "int32", "string", "[]int32", "[]Foo", "Foo"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object  # a python literal's text, or None for "no explicit default"

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def is_struct(self) -> bool:
        return self.element not in PY_TYPES


@dataclasses.dataclass
class Struct:
    name: str  # the python class
    fields: list[Field]


class Schema:
    """The structs of one record: nested ones collected by (renamed) name."""

    def __init__(self, raw: dict, renames: dict[str, str]) -> None:
        self.raw, self.renames, self.structs = raw, renames, {}
        common = {s["name"]: s for s in raw.get("commonStructs", [])}
        self.top = self._struct(raw["name"], raw["fields"], common)

    def _struct(self, name: str, fields: list[dict], common: dict) -> Struct:
        name = self.renames.get(name, name)
        out = Struct(name, [])
        for f in fields:
            ftype = f["type"]
            element = ftype[2:] if ftype.startswith("[]") else ftype
            if element in common or "fields" in f:
                element = self.renames.get(f"{self.raw['name']}.{element}", self.renames.get(element, element))
                ftype = ("[]" if ftype.startswith("[]") else "") + element
                inner = f.get("fields") or common[f["type"].lstrip("[]")]["fields"]
                self._struct(element, inner, common)
            # a tagged-only field may leave out "versions" (Kafka's generator takes taggedVersions)
            versions = f.get("versions", f.get("taggedVersions"))
            out.fields.append(Field(snake(f["name"]), ftype, Versions(versions),
                                    Versions(f.get("nullableVersions")), Versions(f.get("taggedVersions")),
                                    f.get("tag"), f.get("default")))
        known = self.structs.get(name)
        if known is not None and [_shape(x) for x in known.fields] != [_shape(x) for x in out.fields]:
            raise SystemExit(f"struct {name} is defined twice, differently")
        self.structs[name] = out
        return out


def _shape(f: Field) -> tuple:
    return f.name, f.type, f.versions.low, f.versions.high, f.nullable.low, f.tagged.low, f.tag


def default_literal(f: Field) -> str:
    """The value a field takes where a version lacks it (or as a tagged field, when not written)."""
    nullable = f.nullable.high >= f.nullable.low
    if f.default is not None:
        if f.default == "null" and nullable:
            return "None"
        if f.is_array or f.is_struct:
            raise SystemExit(f"{f.name}: a default other than null for an array or struct")
        return repr(f.default) if f.type == "string" else str(f.default)
    if f.is_array:
        return "()"
    if f.is_struct:
        return "None"
    if f.type == "string":
        return '""' if not nullable else "None"
    if f.type == "bytes":
        return 'b""'
    if f.type == "uuid":
        return "uuid.UUID(int=0)"
    if f.type == "bool":
        return "False"
    return "0.0" if f.type == "float64" else "0"


# ---------------------------------------------------------------------------------------------
# Code


class Module:
    """One generated module: a reader and a writer per struct, each taking the version where a field,
    a nullability or the flexible style depends on it (and only there)."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.packs: set[str] = set()
        self.classes: dict[str, Struct] = {}
        self.versions: dict[str, set[int]] = {}  # struct -> the versions it is read and written in
        self.flexible: dict[str, object] = {}  # struct -> True, False, or the first flexible version
        self.funcs: list[str] = []
        self.values: set[str] = set()  # the records' value structs

    def pack(self, fmt: str) -> str:
        self.packs.add(fmt)
        return "_S_" + fmt.replace("?", "o")

    # -- which versions, which style -------------------------------------------------------

    def use(self, s: Struct, versions: set[int], flexible: Versions) -> None:
        """Record that `s` is read and written in `versions` (and its nested structs where present)."""
        self.versions.setdefault(s.name, set()).update(versions)
        for f in s.fields:
            present = {v for v in versions if v in f.versions}
            if f.is_struct and present:
                self.use(self.classes[f.element], present, flexible)
        flex = {v in flexible for v in self.versions[s.name]}
        self.flexible[s.name] = flex.pop() if len(flex) == 1 else flexible.low

    def present(self, s: Struct, f: Field) -> tuple[set[int], str | None]:
        """The versions of `s` that have `f`, and the test for them (None: all of them)."""
        every = self.versions[s.name]
        have = {v for v in every if v in f.versions}
        if have == every or not have:
            return have, None
        low, high = min(have), max(have)
        if set(range(low, high + 1)) & every != have:
            raise SystemExit(f"{s.name}.{f.name}: versions with gaps")
        if low == high:
            return have, f"version == {low}"
        if high == max(every):
            return have, f"version >= {low}"
        return have, f"version <= {high}" if low == min(every) else f"{low} <= version <= {high}"

    def kinds(self, s: Struct, f: Field, have: set[int]) -> tuple[bool, bool]:
        """(nullable, tagged) of a field where present: the same in each of those versions."""
        nullable = {v in f.nullable for v in have}
        tagged = {v in f.tagged for v in have}
        if len(nullable) > 1 or len(tagged) > 1 or (True in tagged and self.flexible[s.name] is not True):
            raise SystemExit(f"{s.name}.{f.name}: nullable or tagged in some versions only")
        return nullable.pop(), tagged.pop()

    def versioned(self, s: Struct) -> bool:
        """Whether its code depends on the version (else its functions take none); a record's value
        takes the version always, as the tables call it."""
        return s.name in self.values or not isinstance(self.flexible[s.name], bool) or any(
            self.present(s, f)[1] for f in s.fields) or any(
            f.is_struct and self.versioned(self.classes[f.element]) for f in s.fields if self.present(s, f)[0])

    def style(self, s: Struct, compact: str, classic: str) -> str:
        flexible = self.flexible[s.name]
        if isinstance(flexible, bool):
            return compact if flexible else classic
        return f"({compact} if flexible else {classic})"

    def prologue(self, s: Struct) -> list[str]:
        """Where the style depends on the version: which it is."""
        flexible = self.flexible[s.name]
        return [] if isinstance(flexible, bool) else [f"    flexible = version >= {flexible}"]

    def call(self, prefix: str, s: Struct, arg: str) -> str:
        return f"{prefix}_{s.name}({arg}, version)" if self.versioned(s) else f"{prefix}_{s.name}({arg})"

    # -- writers ---------------------------------------------------------------------------

    def writer(self, s: Struct, head: str = "") -> str:
        """`head`: the bytes before the struct (a record's type or version), as code."""
        versioned = self.versioned(s)
        parts: list[tuple[str | None, object]] = [(None, head)] if head else []  # (test, code or fixed fields)
        tags = []
        for f in s.fields:
            have, test = self.present(s, f)
            if not have:
                continue
            nullable, tagged = self.kinds(s, f, have)
            if tagged:
                tags.append(f)
            elif f.type in FIXED and parts and isinstance(parts[-1][1], list) and parts[-1][0] == test:
                parts[-1][1].append(f)  # a run of fixed-width fields: one pack
            else:
                parts.append((test, [f] if f.type in FIXED else self.write_field(s, f, f"o.{f.name}", nullable)))
        parts = [(test, code if isinstance(code, str) else f"{self.pack(''.join(FIXED[f.type] for f in code))}.pack("
                  f"{', '.join('o.' + f.name for f in code)})") for test, code in parts]
        body = self.prologue(s)
        if tags:
            body.append("    tags = []")
            for f in sorted(tags, key=lambda f: f.tag):
                default = default_literal(f)
                test = f"o.{f.name} is not None" if default == "None" else f"o.{f.name} != {default}"
                data = self.write_field(s, f, f"o.{f.name}", False)
                if f.is_struct and not f.is_array:  # present: the int8 1, then the struct
                    data = f"b'\\x01' + {self.call('_w', self.classes[f.element], 'o.' + f.name)}"
                body += [f"    if {test}:", f"        tags.append(({f.tag}, {data}))"]
            parts.append((None, "wire.tagged(tags)"))
        elif self.flexible[s.name] is True:
            parts.append((None, "b'\\x00'"))
        elif self.flexible[s.name] is not False:
            parts.append(("flexible", "b'\\x00'"))
        signature = f"def _w_{s.name}(o, version: int) -> bytes:" if versioned else f"def _w_{s.name}(o) -> bytes:"
        # one join of a tuple, a part a version lacks as b'' (faster than appending to a list)
        parts = [part if test is None else f"{part} if {test} else b''" for test, part in parts]
        code = [f"    return b''.join(({wrap(parts, 8, 4, trailing=',')}))"]
        self.funcs.append("\n".join([signature, *body, *code]))
        return f"_w_{s.name}"

    def write_field(self, s: Struct, f: Field, x: str, nullable: bool) -> str:
        if f.is_array:
            if f.element == "int32":
                code = self.style(s, f"wire.cint32s({x})", f"wire.int32s({x})")
            else:
                count = self.style(s, f"wire.uvarint(len({x}) + 1)", f"wire.I32.pack(len({x}))")
                inner = self.classes.get(f.element)
                if inner is not None and self.versioned(inner):
                    code = f"{count} + b''.join([_w_{inner.name}(e, version) for e in {x}])"
                else:
                    code = f"{count} + b''.join(map({self.element_writer(s, f)}, {x}))"
            if nullable:
                code = f"({self.style(s, NULL_COMPACT, NULL_ARRAY32)} if {x} is None else {code})"
            return code
        if f.is_struct:
            write = self.call("_w", self.classes[f.element], x)
            return f"(b'\\xff' if {x} is None else b'\\x01' + {write})" if nullable else write
        if f.type in FIXED:
            return f"{self.pack(FIXED[f.type])}.pack({x})"
        if f.type == "uuid":
            return f"{x}.bytes"
        return self.scalar(s, f.type, nullable, "wire.{}(" + x + ")")

    def element_writer(self, s: Struct, f: Field) -> str:
        if f.is_struct:
            inner = self.classes[f.element]
            return f"_w_{inner.name}"
        if f.element in FIXED:
            return f"{self.pack(FIXED[f.element])}.pack"
        return "wire.uuid_bytes" if f.element == "uuid" else self.scalar(s, f.element, False, "wire.{}")

    def scalar(self, s: Struct, ftype: str, nullable: bool, template: str) -> str:
        classic, compact = {"string": ("str16", "cstr"), "bytes": ("bytes32", "cbytes")}[ftype]
        n = "n" if nullable else ""
        return self.style(s, template.format(n + compact), template.format(n + classic))

    # -- readers ---------------------------------------------------------------------------

    def reader(self, s: Struct) -> str:
        versioned = self.versioned(s)
        body = self.prologue(s)
        tags = []
        run: list[Field] = []  # fixed-width fields in a row, present in the same versions: one unpack
        run_test: list[str | None] = [None]

        def flush() -> None:
            if len(run) > 1:
                names, fmt = ", ".join(local(f) for f in run), "".join(FIXED[f.type] for f in run)
                self.read_under(body, run_test[0], [f"    {names} = r.unpack({self.pack(fmt)})"],
                                f"{names} = ({', '.join(default_literal(f) for f in run)})")
            elif run:
                self.read_under(body, run_test[0], self.read_field(s, run[0], "r", False),
                                f"{local(run[0])} = {default_literal(run[0])}")
            run.clear()

        for f in s.fields:
            have, test = self.present(s, f)
            if not have:
                body.append(f"    {local(f)} = {default_literal(f)}")
                continue
            nullable, tagged = self.kinds(s, f, have)
            if tagged:
                tags.append(f)
                continue
            if f.type in FIXED:
                if run and run_test[0] != test:
                    flush()
                run.append(f)
                run_test[0] = test
                continue
            flush()
            self.read_under(body, test, self.read_field(s, f, "r", nullable), f"{local(f)} = {default_literal(f)}")
        flush()
        if tags:
            body += [f"    {local(f)} = {default_literal(f)}" for f in tags]
            body.append("    for tag, t in r.tags():")
            for i, f in enumerate(sorted(tags, key=lambda f: f.tag)):
                body.append(f"        {'el' if i else ''}if tag == {f.tag}:")
                body += ["        " + line for line in self.read_field(s, f, "t", f.is_struct and not f.is_array)]
        elif self.flexible[s.name] is True:
            body.append("    r.skip_tags()")
        elif self.flexible[s.name] is not False:
            body += ["    if flexible:", "        r.skip_tags()"]
        body.append(f"    return {s.name}({wrap([local(f) for f in s.fields], 8, 4)})")
        version = ", version: int" if versioned else ""
        self.funcs.append("\n".join([f"def _r_{s.name}(r: wire.Reader{version}) -> {s.name}:", *body]))
        return f"_r_{s.name}"

    @staticmethod
    def read_under(body: list[str], test: str | None, lines: list[str], otherwise: str) -> None:
        """Reading lines, under a version test (with the defaults where it fails) when there is one."""
        if test is None:
            body += lines
        elif len(lines) == 1:
            body.append(f"{lines[0]} if {test} else {otherwise.split(' = ', 1)[1]}")
        else:
            body += [f"    if {test}:", *("    " + line for line in lines), "    else:", f"        {otherwise}"]

    def read_field(self, s: Struct, f: Field, r: str, nullable: bool) -> list[str]:
        if f.is_array:
            count = self.style(s, f"{r}.ccount()", f"{r}.count32()")
            element = self.element_reader(s, f, r)
            items = f"{r}.int32s(n)" if f.element == "int32" else f"tuple([{element} for _ in range(n)])"
            if nullable:
                return [f"    n = {count}", f"    {local(f)} = None if n < 0 else {items}"]
            return [f"    n = not_null_count({count})", f"    {local(f)} = {items}"]
        if f.is_struct:
            read = self.call("_r", self.classes[f.element], r)
            return [f"    {local(f)} = None if {r}.i8() < 0 else {read}" if nullable else f"    {local(f)} = {read}"]
        return [f"    {local(f)} = {self.scalar_reader(s, f.type, r, nullable)}"]

    def element_reader(self, s: Struct, f: Field, r: str) -> str:
        if f.is_struct:
            return self.call("_r", self.classes[f.element], r)
        return self.scalar_reader(s, f.element, r, False)

    def scalar_reader(self, s: Struct, ftype: str, r: str, nullable: bool) -> str:
        if ftype in ("int8", "int16", "int32", "int64"):
            return f"{r}.{ftype.replace('int', 'i')}()"
        if ftype in FIXED:
            return f"{r}.unpack({self.pack(FIXED[ftype])})[0]"
        if ftype == "uuid":
            return f"{r}.uuid()"
        return self.scalar(s, ftype, nullable, r + ".{}()")

    # -- classes ---------------------------------------------------------------------------

    def record_class(self, s: Struct) -> str:
        """The class `@dataclasses.dataclass(frozen=True, slots=True)` would make (unsafe_hash=True
        instead of frozen=True for the hashable ones), written out: the same methods, doing the same."""
        frozen = s.name not in self.out.hashable
        fields, defaults = [], True
        for f in reversed(s.fields):
            nullable = f.nullable.high >= f.nullable.low
            py = PY_TYPES.get(f.element, f.element)
            annotation = f"tuple[{py}, ...]" if f.is_array else py
            default = default_literal(f) if (f.default is not None or f.is_array or nullable
                                            or f.tagged.high >= f.tagged.low) else None
            if default == "None" or nullable:
                annotation += " | None"
            defaults = defaults and default is not None
            fields.append((f.name, annotation, default if defaults else None, self.out.notes.get(f"{s.name}.{f.name}")))
        fields.reverse()
        names = [name for name, *_ in fields]
        comma = "," if len(names) == 1 else ""
        mine, theirs = (fill([f"{who}.{n}" for n in names], 21) + comma for who in ("self", "other"))
        params = ["self"] + [f"{n}: {a}" + (f" = {d}" if d is not None else "") for n, a, d, _ in fields]
        setter = "_set(self, {0!r}, {0})" if frozen else "self.{0} = {0}"
        shown = [f"{n}={{self.{n}!r}}" for n in names] or [""]
        shown[0] = "{self.__class__.__qualname__}(" + shown[0]
        shown[-1] += ")"
        lines = [f"class {s.name}:",
                 f"    __slots__ = ({fill([repr(n) for n in names], 17)}{comma})",
                 "    __match_args__ = __slots__",
                 *(f"    {n}: {a}" + (f"  # {note}" if note else "") for n, a, _, note in fields),
                 "",
                 f"    def __init__({wrap(params, 12, 4)}) -> None:",
                 *([f"        {setter.format(n)}" for n in names] or ["        pass"]),
                 "",
                 "    def __repr__(self) -> str:",
                 f"        return ({fill(shown, 16, quoted=True)})",
                 "",
                 "    def __eq__(self, other: object) -> bool:",
                 "        if other.__class__ is self.__class__:",
                 f"            return (({mine}) ==",
                 f"                    ({theirs}))",
                 "        return NotImplemented",
                 "",
                 "    def __hash__(self) -> int:",
                 f"        return hash(({mine}))"]
        if frozen:
            lines += ["",
                      "    __setattr__, __delattr__ = record_class.frozen_setattr, record_class.frozen_delattr",
                      "    __getstate__, __setstate__ = record_class.frozen_getstate, record_class.frozen_setstate"]
        params_name = "FROZEN_PARAMS" if frozen else "HASHABLE_PARAMS"
        lines += ["", "", f"record_class.describe({s.name}, record_class.{params_name})"]
        return "\n".join(lines)

    # -- the module ------------------------------------------------------------------------

    def build(self) -> str:
        records = []
        for name in self.out.records:
            key = Schema(load_schema(name + "Key"), self.out.renames)
            value = Schema(load_schema(name + "Value"), self.out.renames)
            for schema in (key, value):
                self.classes.update((s.name, s) for s in schema.structs.values())
            if key.raw["type"] == "coordinator-key":  # Kafka 4.x: the record type in apiKey, key version 0
                types, key_versions = [key.raw["apiKey"]], {0}
            else:  # the record types are the key's versions
                types = list(Versions(key.raw["validVersions"]).each())
                key_versions = set(types)
            self.use(key.top, key_versions, Versions("none"))
            self.use(value.top, set(Versions(value.raw["validVersions"]).each()),
                     Versions(value.raw["flexibleVersions"]))
            records.append((key.top, value.top, types))
            self.values.add(value.top.name)
        rows, keys = [], {key.name for key, _, _ in records}
        for key, value, types in records:
            if self.versioned(key):
                raise SystemExit(f"{key.name}: a key whose layout depends on its version")
            versions = sorted(self.versions[value.name])
            head = repr(versions[0].to_bytes(2, "big")) if len(versions) == 1 else "wire.I16.pack(version)"
            layout = "".join(KEY_LAYOUT.get(f.type, "?") for f in key.fields)
            if "?" in layout:
                raise SystemExit(f"{key.name}: a key field that is not a string or an int32")
            rows.append((key.name, value.name, types, versions,
                         f"wire.key_reader({key.name}, {layout!r})",
                         f"wire.key_writer({types[-1]}, {layout!r}, {[f.name for f in key.fields]!r})",
                         self.reader(value), self.writer(value, head)))
        nested = [s for s in self.classes.values() if s.name not in {n for row in rows for n in row[:2]}
                  and s.name not in keys]
        for s in nested:
            self.reader(s)
            self.writer(s)
        names = textwrap.fill(", ".join(key[:-3] for key, *_ in rows), 100)
        out = [HEADER.format(log=self.out.log, names=names)]
        for module in sorted(set(self.out.classes.values())):
            out.append(f"from {module} import {', '.join(c for c, m in self.out.classes.items() if m == module)}")
        out += ["", "_set = object.__setattr__  # how a frozen class's __init__ sets its fields (past its __setattr__)"]
        out += [f"{self.pack(fmt)} = struct.Struct('>{fmt}')" for fmt in sorted(self.packs)]
        for s in self.classes.values():
            if s.name not in self.out.classes:
                out += ["", "", self.record_class(s)]
        for code in self.funcs:
            out += ["", "", code]
        out += ["", "", "KEY_TYPES = {"] + [f"    {k}: {t[-1]}," for k, _, t, *_ in rows] + ["}"]
        out += ["KEY_READERS = {"] + [f"    {t}: {row[4]}," for row in rows for t in row[2]] + ["}"]
        out += ["KEY_WRITERS = {"] + [f"    {row[0]}: {row[5]}," for row in rows] + ["}"]
        out += ["VALUE_CLASSES = {"] + [f"    {row[0]}: {row[1]}," for row in rows] + ["}"]
        out += ["VALUE_VERSIONS = {"] + [f"    {row[1]}: range({row[3][0]}, {row[3][-1] + 1})," for row in rows] + ["}"]
        out += ["VALUE_READERS = {"] + [f"    {row[0]}: {row[6]}," for row in rows] + ["}"]
        out += ["VALUE_WRITERS = {"] + [f"    {row[1]}: {row[7]}," for row in rows] + ["}"]
        return "\n".join(out) + "\n"


RESERVED = {"r", "t", "n", "o", "tag", "tags", "out", "version", "flexible", "wire", "struct", "uuid", "record_class",
            "not_null_count", "CorruptRecord", "_set"}  # the generated code's own names


def local(f: Field) -> str:
    """The variable a reader reads a field into: its name, unless the generated code uses that."""
    return f.name + "_" if f.name in RESERVED else f.name


def wrap(items: list[str], indent: int, close: int, width: int = 100, trailing: str = "") -> str:
    """Arguments on one line, or one a line when that line would be long."""
    one = ", ".join(items) + trailing
    if len(one) + indent <= width:
        return one
    pad = " " * indent
    return "\n" + "".join(f"{pad}{item},\n" for item in items) + " " * close


def fill(items: list[str], indent: int, quoted: bool = False, width: int = 100) -> str:
    """Items joined by ", ", broken onto lines `indent` deep (inside brackets) before `width`; quoted:
    each line one f-string, the ", " inside the string."""
    lines, line = [], ""
    for item in items:
        if line and indent + len(line) + len(item) + 6 > width:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    if quoted:
        lines = [f"f'{text[:-1]}, '" for text in lines[:-1]] + [f"f'{lines[-1]}'"]
    return ("\n" + " " * indent).join(lines)


def generate(out: Output) -> str:
    return Module(out).build()


def path_of(out: Output) -> str:
    return os.path.join(HERE, out.module)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a module is stale")
    args = ap.parse_args(argv)
    stale = []
    for out in OUTPUTS:
        text = generate(out)
        path = path_of(out)
        try:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + os.path.relpath(path))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
