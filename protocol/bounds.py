"""Checks a request body against the bytes present before kio reads it, and drops tagged fields we
do not know (KIP-482: a receiver ignores them).

kio 0.6.5's native reader allocates `count × element size` for an array before it checks that the
elements exist, and a failed allocation aborts the process; it also raises on unknown tags and
returns None for a null array the schema forbids. So each (api, version) gets a skip plan, compiled
once from kio's schema classes, that walks the frame: every array count must fit in what remains
(each element takes at least one byte), every string/bytes length too, no null where the schema has
none. A request can then never make kio allocate more than a small multiple of its own size.

The plan is a tree of step functions; `body_checker` also compiles it into one Python function per
request version with the common case of every step inline (one-byte lengths, no tagged fields), each
step's own function still deciding every other case: the walk was a chain of closure calls per field
and cost more than kio's decode of the same body.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from functools import cache

_FIXED = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
          "int64": 8, "uint64": 8, "float64": 8, "uuid": 16, "error_code": 2, "timedelta_i32": 4,
          "timedelta_i64": 8, "datetime_i64": 8}


class BadBody(Exception):
    """The body does not fit its schema; `null` says it is a null the schema forbids."""

    def __init__(self, message: str, null: bool = False) -> None:
        super().__init__(message)
        self.null = null


# A step reads one field at `pos` of `buf` (never past `end`) and returns the position after it.
# `strips` collects (start, end, replacement) edits that remove unknown tagged fields.
Step = Callable[[bytes, int, int, list], int]


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise BadBody("bad unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def encode_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length(buf: bytes, pos: int, end: int, flexible: bool, width: int) -> tuple[int, int]:
    """A length or count: compact (uvarint n+1, 0 = null) or legacy (int16/int32, -1 = null).
    Returns (-1 for null, position after)."""
    if flexible:
        if pos < end and buf[pos] < 0x80:  # one byte: nearly every length and count
            return buf[pos] - 1, pos + 1
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    if pos + width > end:
        raise BadBody("length runs past the end of the frame")
    return int.from_bytes(buf[pos:pos + width], "big", signed=True), pos + width


def _fixed(size: int) -> Step:
    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        pos += size
        if pos > end:
            raise BadBody("field runs past the end of the frame")
        return pos
    step.inline = lambda source: [f"pos += {size}", "if pos > end:",
                                  f"    pos = {source.ref(step)}(buf, pos - {size}, end, strips)"]
    return step


def _sized(name: str, flexible: bool, width: int, nullable: bool) -> Step:
    """A string, bytes or records field."""
    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        if flexible and pos < end and 0 < buf[pos] < 0x80:  # a short, non-null compact string
            pos += buf[pos]
            if pos > end:
                raise BadBody(f"{name} runs past the end of the frame")
            return pos
        n, pos = _length(buf, pos, end, flexible, width)
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise BadBody(f"{name} is null", null=n == -1)
        pos += n
        if pos > end:
            raise BadBody(f"{name} of {n} bytes runs past the end of the frame")
        return pos
    if flexible:
        step.inline = lambda source: [
            "if pos < end and 0 < buf[pos] < 0x80 and pos + buf[pos] <= end:", "    pos += buf[pos]",
            "else:", f"    pos = {source.ref(step)}(buf, pos, end, strips)"]
    else:  # a non-negative length whose bytes are all there (its top byte < 0x80); the step decides the rest
        def inline(source: _Source) -> list[str]:
            n = source.var("n")
            length = " | ".join(f"buf[pos + {i}] << {8 * (width - 1 - i)}" for i in range(width))
            return [f"if pos + {width} <= end and buf[pos] < 0x80:", f"    {n} = pos + {width} + ({length})",
                    f"    if {n} <= end:", f"        pos = {n}", "    else:",
                    f"        pos = {source.ref(step)}(buf, pos, end, strips)",
                    "else:", f"    pos = {source.ref(step)}(buf, pos, end, strips)"]
        step.inline = inline
    return step


def _array(name: str, flexible: bool, nullable: bool, element: Step, min_size: int) -> Step:
    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        n, pos = _length(buf, pos, end, flexible, 4)
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise BadBody(f"array {name} is null", null=n == -1)
        if n * min_size > end - pos:
            raise BadBody(f"array {name} of {n} elements cannot fit in {end - pos} bytes")
        for _ in range(n):
            pos = element(buf, pos, end, strips)
        return pos

    def inline(source: _Source) -> list[str]:
        start, n = source.var("start"), source.var("n")
        if flexible:
            count = ["if pos < end and buf[pos] < 0x80:", f"    {n} = buf[pos] - 1", "    pos += 1",
                     "else:", f"    {n}, pos = _length(buf, pos, end, True, 4)"]
        else:
            count = [f"{n}, pos = _length(buf, pos, end, False, 4)"]
        return [f"{start} = pos", *count,
                f"if {n} < 0 or {n} * {min_size} > end - pos:",  # null, or more than fit: the step's verdict
                f"    pos = {source.ref(step)}(buf, {start}, end, strips)",
                "else:", f"    for _ in range({n}):", *("        " + line for line in source.inline(element))]
    step.inline = inline
    return step


def _optional_entity(name: str, entity: Step) -> Step:
    """A nullable struct: an int8 marker, -1 null or 1 present (KIP-893)."""
    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        if pos >= end:
            raise BadBody(f"{name} runs past the end of the frame")
        marker = buf[pos]
        if marker == 0xFF:
            return pos + 1
        if marker != 1:
            raise BadBody(f"{name} has presence marker {marker}")
        return entity(buf, pos + 1, end, strips)
    return step


def _field_step(field: dataclasses.Field, hint: typing.Any, flexible: bool,
                nullable: bool) -> tuple[Step, int]:
    """The step for one field and the fewest bytes it can take."""
    inner, array_nullable = hint, False
    origin = typing.get_origin(inner)
    if origin in (typing.Union, _UnionType):
        args = [a for a in typing.get_args(inner) if a is not type(None)]
        nullable, inner, origin = True, args[0], typing.get_origin(args[0])
    if origin is tuple:
        array_nullable, nullable = nullable, False
        element_type = typing.get_args(inner)[0]
        if dataclasses.is_dataclass(element_type):
            element, size = _entity_step(element_type)
        else:
            element, size = _primitive(field, flexible, False)
        return _array(field.name, flexible, array_nullable, element, max(size, 1)), 1 if flexible else 4
    if dataclasses.is_dataclass(inner):
        entity, size = _entity_step(inner)
        if nullable:
            return _optional_entity(field.name, entity), 1
        return entity, size
    return _primitive(field, flexible, nullable)


_UnionType = type(int | None)


def _primitive(field: dataclasses.Field, flexible: bool, nullable: bool) -> tuple[Step, int]:
    kind = field.metadata["kafka_type"]
    if kind in _FIXED:
        return _fixed(_FIXED[kind]), _FIXED[kind]
    if kind in ("string", "bytes", "records"):
        width = 2 if kind == "string" else 4
        return _sized(field.name, flexible, width, nullable), 1 if flexible else width
    raise TypeError(f"no skip step for kafka type {kind!r} of field {field.name}")


@cache
def _entity_step(cls: type) -> tuple[Step, int]:
    """The step for a whole struct: its fields in order, then (flexible versions) its tag buffer."""
    flexible = cls.__flexible__
    hints = typing.get_type_hints(cls)
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    min_size = 1 if flexible else 0
    fixed_run = 0  # consecutive fixed-size fields are skipped in one step
    for field in dataclasses.fields(cls):
        step, size = _field_step(field, hints[field.name], flexible, False)
        if "tag" in field.metadata:
            tagged[field.metadata["tag"]] = _field_step(field, hints[field.name], flexible, True)[0]
            continue
        min_size += size
        if field.metadata.get("kafka_type") in _FIXED and typing.get_origin(hints[field.name]) is not tuple:
            fixed_run += size
            continue
        if fixed_run:
            steps.append(_fixed(fixed_run))
            fixed_run = 0
        steps.append(step)
    if fixed_run:
        steps.append(_fixed(fixed_run))
    if flexible:
        steps.append(_tag_buffer(cls.__name__, tagged))
    if len(steps) == 1:
        return steps[0], min_size
    steps_t = tuple(steps)

    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        for s in steps_t:
            pos = s(buf, pos, end, strips)
        return pos
    step.inline = lambda source: [line for s in steps_t for line in source.inline(s)]
    return step, min_size


def _tag_buffer(name: str, known: dict[int, Step]) -> Step:
    def step(buf: bytes, pos: int, end: int, strips: list) -> int:
        if pos < end and buf[pos] == 0:  # no tagged fields: nearly always
            return pos + 1
        start = pos
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise BadBody(f"{name} claims {count} tagged fields")
        kept: list[tuple[int, int]] = []
        for _ in range(count):
            field_start = pos
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            field_end = pos + size
            if field_end > end:
                raise BadBody(f"tagged field {tag} of {name} runs past the end of the frame")
            value = known.get(tag)
            if value is not None:
                nested: list = []
                if value(buf, pos, field_end, nested) != field_end or nested:
                    raise BadBody(f"tagged field {tag} of {name} does not fill its {size} bytes")
                kept.append((field_start, field_end))
            pos = field_end
        if len(kept) != count:
            strips.append((start, pos, encode_uvarint(len(kept)) + b"".join(buf[a:b] for a, b in kept)))
        return pos
    step.inline = lambda source: ["if pos < end and buf[pos] == 0:", "    pos += 1",
                                  "else:", f"    pos = {source.ref(step)}(buf, pos, end, strips)"]
    return step


class _Source:
    """Compiles a step tree into one function: each step's `inline(source)` gives the lines that
    advance `pos` over its field; a step without one is called."""

    def __init__(self) -> None:
        self.namespace: dict = {"_length": _length}
        self._names = 0

    def var(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def ref(self, step: Step) -> str:
        name = self.var("step")
        self.namespace[name] = step
        return name

    def inline(self, step: Step) -> list[str]:
        inline = getattr(step, "inline", None)
        return inline(self) if inline is not None else [f"pos = {self.ref(step)}(buf, pos, end, strips)"]

    def compile(self, step: Step) -> Step:
        body = "\n".join("    " + line for line in self.inline(step))
        exec(f"def walk(buf, pos, end, strips):\n{body}\n    return pos\n", self.namespace)
        return self.namespace["walk"]


def _has_arrays(cls: type) -> bool:
    for field in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[field.name]
        for t in (hint, *typing.get_args(hint)):
            if typing.get_origin(t) is tuple or dataclasses.is_dataclass(t) and _has_arrays(t):
                return True
    return False


@cache
def body_checker(request_class: type) -> tuple[Callable[[bytes, int], bytes], bool]:
    """(check, up_front). check(frame, offset) → the frame to decode: the same object when it is
    sound, a copy without the unknown tagged fields when it had some; raises BadBody otherwise.
    up_front is False for bodies without arrays: kio bounds-checks strings itself, so such a body
    (Heartbeat, FindCoordinator: the hot path) is checked only if kio meets a tag it does not know."""
    walk = _Source().compile(_entity_step(request_class)[0])

    def check(frame: bytes, offset: int) -> bytes:
        strips: list = []
        walk(frame, offset, len(frame), strips)
        if not strips:
            return frame
        strips.sort()
        parts, pos = [], 0
        for start, end, replacement in strips:
            parts.append(frame[pos:start])
            parts.append(replacement)
            pos = end
        parts.append(frame[pos:])
        return b"".join(parts)
    return check, _has_arrays(request_class)
