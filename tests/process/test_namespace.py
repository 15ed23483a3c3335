"""Installed, groupd claims only the import name `groupd`: a user's project with packages of its own
named `coordinator`, `storage`, `protocol` and `analytics` imports them, and its suite uses the
`groupd_server` fixture of the installed plugin. groupd is installed from a wheel into a fresh venv;
the dependencies come from this venv's site-packages (a filtered copy of the path: no groupd)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import textwrap
import venv

from tests.support.process import ROOT

USER_TEST = textwrap.dedent('''
    import sys

    import analytics
    import coordinator
    import protocol
    import storage
    from storage import files


    def test_the_plugin_imports_nothing_of_groupd_until_a_fixture_is_used():
        assert [coordinator.OWNER, storage.OWNER, protocol.OWNER, analytics.OWNER, files.OWNER] == ["user"] * 5
        loaded = sorted(m for m in sys.modules if m.startswith("groupd."))
        assert loaded == ["groupd.coordinator", "groupd.coordinator.pytest_plugin"], loaded


    def test_groupd_server_serves_beside_the_users_packages(groupd_server):
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": groupd_server.bootstrap_servers}).list_topics(timeout=30)
        assert metadata.brokers and coordinator.OWNER == "user"
        assert groupd_server.chaos.ready()
''')


def _deps_without_groupd(where: str) -> str:
    """A directory of links to this venv's site-packages entries, less groupd's own (its editable
    finder would put the checkout back on the path)."""
    os.makedirs(where)
    source = site.getsitepackages()[0]
    for name in os.listdir(source):
        if "groupd" not in name.lower():
            os.symlink(os.path.join(source, name), os.path.join(where, name))
    return where


def test_a_user_project_with_packages_named_like_groupds_folders(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "deps.pth"), "w") as f:
        f.write(_deps_without_groupd(str(tmp_path / "deps")) + "\n")
    wheel = next(wheels.glob("groupd-*.whl"))
    installed = subprocess.run([python, "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]

    project = tmp_path / "project"
    for package in ("coordinator", "storage", "protocol", "analytics"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text('OWNER = "user"\n')
    (project / "storage" / "files.py").write_text('OWNER = "user"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_app.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout, run.stdout[-2000:]
    # the installed copy, not the checkout
    where = subprocess.run([python, "-c", "import groupd.coordinator; print(groupd.coordinator.__file__)"],
                           cwd=project, env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(purelib), where
