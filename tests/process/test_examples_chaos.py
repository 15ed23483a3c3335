"""The example suite (examples/rebalance_app) that tests a consumer application's rebalance handling
with the pytest plugin's `groupd_server` fixture and its chaos helpers, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.process import ROOT


def test_the_example_suite_passes_with_the_plugin():
    # `-p no:groupd` then `-p groupd.coordinator.pytest_plugin`: the plugin by module whether or not the installed
    # package already registers it through its pytest11 entry point
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:groupd", "-p", "groupd.coordinator.pytest_plugin",
                        "-q", "-p", "no:cacheprovider", os.path.join("examples", "rebalance_app")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "4 passed" in r.stdout, r.stdout[-2000:]


def test_the_plugin_is_registered_and_its_fixtures_are_opt_in():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert 'groupd = "groupd.coordinator.pytest_plugin"' in f.read()
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:groupd", "-p", "groupd.coordinator.pytest_plugin",
                        "--fixtures", "-q", "-p", "no:cacheprovider", os.path.join("tests", "core", "test_clock.py")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for fixture in ("groupd_server ", "groupd_server_session", "groupd_settings"):
        assert fixture in r.stdout
