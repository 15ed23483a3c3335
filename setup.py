"""The C extension of groupd (the rest of the build is pyproject.toml's): the steady classic
Heartbeat's native path, coordinator/server/_native.c (coordinator/server/fast_heartbeat.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("groupd.coordinator.server._native", ["coordinator/server/_native.c"],
                             extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"])])
