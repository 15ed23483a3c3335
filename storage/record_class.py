"""What the record classes storage/codegen.py writes out share in place of `@dataclasses.dataclass`.

The generator writes each class's `__init__`, `__repr__`, `__eq__` and `__hash__` as source, the
same methods the decorator would make, because the decorator compiles them from text at every
import (up to six a class, ~0.6 ms: these 58 classes were a tenth of a server's import CPU); source is
compiled once into the .pyc. `describe` then gives a class the `__dataclass_fields__` and
`__dataclass_params__` the decorator would have, so `dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work on them as before (storage/inspect.py, the streams machine, the tests).
"""

from __future__ import annotations

import dataclasses


def _params(frozen: bool) -> object:
    """The decorator's record of its arguments, `frozen=True, slots=True` or `unsafe_hash=True,
    slots=True`. It has no public constructor: its arguments are its slots (six in Python 3.11, ten
    from 3.12), each as the decorator would set it (tests/storage/test_record_class.py compares)."""
    given = {"init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": not frozen, "frozen": frozen,
             "match_args": True, "kw_only": False, "slots": True, "weakref_slot": False}
    return dataclasses._DataclassParams(**{name: given[name] for name in dataclasses._DataclassParams.__slots__})


FROZEN_PARAMS, HASHABLE_PARAMS = _params(True), _params(False)
_FIELD = dataclasses._FIELD  # what marks a field (not a ClassVar or InitVar); fields() keeps only those


def describe(cls: type, params: object) -> type:
    """Give `cls` the dataclass description of its annotated fields: in order, their defaults
    those of its written-out `__init__` (the last ones)."""
    names = list(cls.__annotations__)
    defaults = cls.__init__.__defaults__ or ()
    first_default = len(names) - len(defaults)
    described = {}
    for i, name in enumerate(names):
        f = dataclasses.field(kw_only=False) if i < first_default else \
            dataclasses.field(default=defaults[i - first_default], kw_only=False)
        f.name, f.type, f._field_type = name, cls.__annotations__[name], _FIELD
        described[name] = f
    cls.__dataclass_fields__ = described
    cls.__dataclass_params__ = params
    return cls


# a frozen class's: as the decorator's for a class nothing subclasses


def frozen_setattr(self, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def frozen_delattr(self, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


# pickling and copy.copy of a frozen slots class: its fields in order, set past the frozen __setattr__


def frozen_getstate(self) -> list:
    return [getattr(self, name) for name in self.__slots__]


def frozen_setstate(self, state: list) -> None:
    for name, value in zip(self.__slots__, state):
        object.__setattr__(self, name, value)
