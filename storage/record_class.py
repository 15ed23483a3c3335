"""What the record classes storage/codegen.py writes out share in place of `@dataclasses.dataclass`.

The generator writes each class's `__init__`, `__repr__`, `__eq__` and `__hash__` as source, the
same methods the decorator would make, because the decorator compiles them from text at every
import (up to six a class, ~0.6 ms: these 58 classes were a tenth of a server's import CPU); source is
compiled once into the .pyc. `describe` then gives a class the `__dataclass_fields__` and
`__dataclass_params__` the decorator would have, so `dataclasses.fields`, `replace`, `asdict` and
`is_dataclass` work on them as before (storage/inspect.py, the streams machine, the tests).
`frozen_on_first_use` does the same for hand-written classes by deferring the decorator's methods.
"""

from __future__ import annotations

import copy
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
    cls.__dataclass_fields__ = _fields(cls, {name: defaults[i - first_default] for i, name in enumerate(names)
                                             if i >= first_default})
    cls.__dataclass_params__ = params
    return cls


def _fields(cls: type, defaults: dict[str, object]) -> dict[str, dataclasses.Field]:
    """The decorator's description of each annotated field of `cls`, in order: a default that is a
    `dataclasses.field(...)` is that field's description."""
    described = {}
    for name, annotation in cls.__annotations__.items():
        default = defaults.get(name, dataclasses.MISSING)
        f = copy.copy(default) if isinstance(default, dataclasses.Field) else dataclasses.field(default=default)
        if f.kw_only is dataclasses.MISSING:
            f.kw_only = False
        f.name, f.type, f._field_type = name, annotation, _FIELD
        described[name] = f
    return described


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


# Hand-written classes: the decorator, each of its methods made at its first call

# the decorator's arguments that make each method (and nothing costlier beside it); __init__ sets the
# fields past the frozen __setattr__ as the frozen class's own does; __hash__ is made with __eq__
_MADE_BY = {"__init__": {"frozen": True, "repr": False, "eq": False},
            "__repr__": {"init": False, "eq": False},
            "__eq__": {"init": False, "repr": False, "unsafe_hash": True},
            "__hash__": {"init": False, "repr": False, "unsafe_hash": True}}


def frozen_on_first_use(cls: type) -> type:
    """`@dataclasses.dataclass(frozen=True, slots=True)`, the decorator's `__init__`, `__repr__`,
    `__eq__` and `__hash__` each made when first called: for classes of which a process builds few
    or none (coordinator/core/events.py: 34 classes, ~20 ms of start-up) or whose other methods it
    never calls (Settings: 144 fields, one instance). The slots class, its fields, its frozenness and
    its dataclass description are made now; a method costs its compile (~0.1-5 ms) once."""
    names = tuple(cls.__annotations__)
    if any(kind in str(annotation) for annotation in cls.__annotations__.values() for kind in ("ClassVar", "InitVar")):
        raise TypeError(f"{cls.__name__}: a ClassVar or InitVar, which frozen_on_first_use does not take")
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    namespace = {k: v for k, v in cls.__dict__.items() if k not in defaults and k not in ("__dict__", "__weakref__")}
    namespace.update(__slots__=names, __match_args__=names, __setattr__=frozen_setattr, __delattr__=frozen_delattr,
                     __getstate__=frozen_getstate, __setstate__=frozen_setstate)
    made = type(cls)(cls.__name__, cls.__bases__, namespace)

    def make(method: str) -> None:
        # a model of the same fields (and __post_init__, which __init__ calls): its method is the decorator's
        model = type(cls.__name__, (), {
            "__annotations__": cls.__annotations__, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": "-",  # else the decorator formats a signature for it
            **({"__post_init__": cls.__post_init__} if hasattr(cls, "__post_init__") else {}),
            **{name: copy.copy(value) if isinstance(value, dataclasses.Field) else value  # the decorator names it
               for name, value in defaults.items()}})
        model = dataclasses.dataclass(**_MADE_BY[method])(model)
        for made_too in ("__eq__", "__hash__") if method in ("__eq__", "__hash__") else (method,):
            setattr(made, made_too, model.__dict__[made_too])

    def on_first_use(method: str):
        def first(self, *args, **kwargs):
            make(method)
            return getattr(made, method)(self, *args, **kwargs)
        first.__name__ = first.__qualname__ = method
        return first

    for method in _MADE_BY:
        setattr(made, method, on_first_use(method))
    made.__dataclass_fields__, made.__dataclass_params__ = _fields(cls, defaults), FROZEN_PARAMS
    return made
