"""The record classes storage/codegen.py writes out and the events made on first use
(storage/record_class.py) behave as the `@dataclasses.dataclass(frozen=True, slots=True)` classes
they stand for (unsafe_hash=True for the hashable ones): each is compared with the dataclass the
decorator makes of the same fields."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest

from groupd.coordinator import settings
from groupd.coordinator.core import events
from groupd.storage import codegen, generated_records, generated_streams_records, topic_config

MODULES = (generated_records, generated_streams_records)
HASHABLE = {name for out in codegen.OUTPUTS for name in out.hashable}
CLASSES = [cls for module in MODULES for cls in vars(module).values()
           if isinstance(cls, type) and cls.__module__ == module.__name__]


def reference(cls: type) -> type:
    """The dataclass the decorator makes of `cls`'s fields."""
    spec = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory, repr=f.repr,
                                               hash=f.hash, compare=f.compare)) for f in dataclasses.fields(cls)]
    frozen = cls.__name__ not in HASHABLE
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=frozen, unsafe_hash=not frozen, slots=True)


EVENTS = [cls for cls in vars(events).values() if isinstance(cls, type) and cls.__module__ == events.__name__]


def test_every_class_is_compared():
    for found, modules in ((CLASSES, MODULES), (EVENTS, (events,))):
        written = sum(open(module.__file__, encoding="utf-8").read().count("\nclass ") for module in modules)
        assert len(found) == written > 30


FIRST_USE = r"""
import dataclasses
from groupd.coordinator import settings
from groupd.coordinator.core import events
cls = events.MemberExpired
assert cls.__init__.__code__.co_name == "first"  # not made yet: the import compiled nothing
assert cls.__slots__ == cls.__match_args__ == tuple(f.name for f in dataclasses.fields(cls))
a = cls("g", "m", None, 3)
assert cls.__init__.__code__.co_name == "__init__" and cls.__eq__.__code__.co_name == "first"  # the decorator's init
assert not hasattr(a, "__dict__") and a == cls("g", "m", None, 3, "session-timeout") and a.reason == "session-timeout"
assert cls.__eq__.__code__.co_name == "__eq__" and cls.__hash__.__code__.co_name == "__hash__"
print(repr(a))
"""


def test_an_event_class_gets_the_decorators_methods_at_its_first_use():
    out = subprocess.run([sys.executable, "-c", FIRST_USE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "MemberExpired(group_id='g', member_id='m', instance_id=None, generation=3, " \
                                 "reason='session-timeout')"


HAND_WRITTEN = EVENTS + [settings.Key, settings.Settings, topic_config.Spec, topic_config.TopicConfig]


@pytest.mark.parametrize("cls", CLASSES + HAND_WRITTEN, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_a_record_class_behaves_as_its_dataclass(cls):
    ref = reference(cls)
    mine = [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only)
            for f in dataclasses.fields(cls)]
    theirs = [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.hash, f.compare, f.kw_only)
              for f in dataclasses.fields(ref)]
    assert mine == theirs
    assert dataclasses.is_dataclass(cls) and repr(cls.__dataclass_params__) == repr(ref.__dataclass_params__)
    assert cls.__match_args__ == ref.__match_args__
    assert cls.__slots__ == ref.__slots__

    names = [f.name for f in dataclasses.fields(cls)]
    values = {name: i + 1 for i, name in enumerate(names)}
    a, b = cls(**values), ref(**values)
    assert repr(a) == repr(b)
    assert a == cls(**values) and hash(a) == hash(b) == hash(cls(**values))
    assert a != b and (a == b) is False  # another class: NotImplemented both ways, as the dataclass's
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.astuple(a) == dataclasses.astuple(b)
    assert copy.copy(a) == a and copy.deepcopy(a) == a and pickle.loads(pickle.dumps(a)) == a
    if names:
        first = names[0]
        other = dataclasses.replace(a, **{first: -1})
        assert other != a and getattr(other, first) == -1 and repr(other) == repr(dataclasses.replace(b, **{first: -1}))
        assert hash(other) == hash(dataclasses.replace(b, **{first: -1}))
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if len(required) < len(names):  # the defaults apply as the dataclass's do
            assert repr(cls(**{n: values[n] for n in required})) == repr(ref(**{n: values[n] for n in required}))
    if cls.__name__ in HASHABLE:
        if names:
            setattr(a, names[0], 99)
            setattr(b, names[0], 99)
            assert repr(a) == repr(b)
        return
    for target, action in ((a, "assign"), (b, "assign"), (a, "delete"), (b, "delete")):
        with pytest.raises(dataclasses.FrozenInstanceError) as raised:
            if action == "assign":
                setattr(target, names[0] if names else "x", 0)
            else:
                delattr(target, names[0] if names else "x")
        if target is a:
            mine_error = str(raised.value)
        else:
            assert mine_error == str(raised.value)
    with pytest.raises(AttributeError):
        object.__setattr__(a, "not_a_field", 0)  # slots: no __dict__
