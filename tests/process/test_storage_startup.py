"""Start-up against the data directory and the network, through the real `python -m groupd.coordinator
serve` process: one server per data directory (Kafka's `<data dir>/.lock`), and every start-up
failure a user can cause (a damaged `topics.json` or `meta.properties`, a data dir that is a file or
not writable, a port in use) ends in one line naming the file or port and what to do, a non-zero
exit and no traceback. Also: the log CLI stops quietly when its reader goes away (`| head`)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from groupd.storage.log import PartitionLog
from groupd.storage.records import OffsetCommitKey, OffsetCommitValue, Record
from tests.support.process import ROOT, GroupdProcess, free_port


def serve(data_dir: str, port: int | None = None) -> subprocess.CompletedProcess:
    """`groupd serve` expected to fail at start-up (the timeout catches one that serves instead)."""
    args = [sys.executable, "-m", "groupd.coordinator", "serve", "--set", f"data.dir={data_dir}",
            "--set", f"listeners=PLAINTEXT://127.0.0.1:{port or free_port()}", "--set", "metrics.listener="]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)


def assert_one_line(out: subprocess.CompletedProcess, *needles: str) -> str:
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle.lower() in lines[0].lower(), lines[0]
    return lines[0]


# -- one server per data directory -------------------------------------------------------------

def test_a_second_server_on_the_same_data_dir_is_refused_naming_the_holder(tmp_path):
    first = GroupdProcess(str(tmp_path / "data")).start()
    try:
        line = assert_one_line(serve(str(tmp_path / "data")), os.path.join(str(tmp_path / "data"), ".lock"),
                               f"pid {first.proc.pid}")
        assert "in use" in line
        assert first.alive()
    finally:
        assert first.stop() == 0, first.log()
    # released at exit: the next server starts
    second = GroupdProcess(str(tmp_path / "data")).start()
    assert second.stop() == 0


def test_the_lock_of_a_crashed_server_is_released_by_the_os(tmp_path):
    first = GroupdProcess(str(tmp_path / "data")).start()
    first.stop(signal.SIGKILL)
    again = GroupdProcess(str(tmp_path / "data")).start()
    assert again.stop() == 0, again.log()


# -- start-up failures: one line, non-zero, no traceback -------------------------------------------

def test_a_damaged_topic_catalog_is_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "topics.json").write_text('{"topics": [{"name": "t", "partit')
    assert_one_line(serve(str(data)), str(data / "topics.json"), "damaged", "backup")


def test_a_damaged_meta_properties_is_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_bytes(b"\x00\xff garbage\n")
    assert_one_line(serve(str(data)), str(data / "meta.properties"), "cluster.id")


def test_a_cluster_data_dir_of_before_meta_properties_recorded_it_is_refused_by_a_lone_node(tmp_path):
    """Cluster mode's stamped segments (`<base>-<stamp>.log`) and no meta.properties: a dir a cluster
    used before its data dirs recorded their cluster; a lone node would serve it without offsets."""
    data = tmp_path / "data"
    (data / "__consumer_offsets-3").mkdir(parents=True)
    (data / "__consumer_offsets-3" / "00000000000000000000-17.log").write_bytes(b"")
    assert_one_line(serve(str(data)), "holds a cluster's segments", "cluster.etcd.endpoints")
    assert not (data / "meta.properties").exists()


def test_a_data_dir_that_is_a_file_is_named(tmp_path):
    (tmp_path / "data").write_text("not a directory")
    assert_one_line(serve(str(tmp_path / "data")), str(tmp_path / "data"), "is a file")


@pytest.fixture
def unwritable_dir():
    """A directory this user may not write in: read-only permission bits, or, for root (whom
    permission bits do not stop), sysfs."""
    if os.getuid() == 0:
        yield "/sys"
        return
    parent = tempfile.mkdtemp(prefix="groupd-readonly-")
    os.chmod(parent, 0o555)
    yield parent
    os.chmod(parent, 0o755)
    os.rmdir(parent)


def test_a_data_dir_this_user_cannot_write_is_named(unwritable_dir):
    assert_one_line(serve(unwritable_dir), f"data.dir {unwritable_dir} is not writable")
    inside = os.path.join(unwritable_dir, "groupd-data")
    assert_one_line(serve(inside), f"cannot create data.dir {inside}")


def test_a_port_in_use_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = assert_one_line(serve(str(tmp_path / "data"), port=port), f"127.0.0.1:{port} (listeners)",
                               "address already in use")
    assert "metrics.listener" not in line


def test_an_address_not_on_this_host_is_said_so_not_a_port_to_free(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is no host's address: EADDRNOTAVAIL, "Cannot assign requested address"
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", f"data.dir={tmp_path}", "--set",
                          "listeners=PLAINTEXT://192.0.2.1:9092", "--set", "metrics.listener="],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = assert_one_line(out, "192.0.2.1:9092 (listeners)", "192.0.2.1 is not an address of this host",
                           "advertised.listeners")
    assert "stop" not in line and "holds" not in line


def test_a_busy_metrics_port_names_metrics_listener_alone(tmp_path):
    # a second local groupd meets the first one's metrics port (9464 by default)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", f"data.dir={tmp_path}", "--set",
                              f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "--set",
                              f"metrics.listener=http://:{port}/metrics"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = assert_one_line(out, f"127.0.0.1:{port} (metrics.listener)", "address already in use",
                           f"--set metrics.listener=http://:{port + 1}/metrics")
    assert "`listeners`" not in line and "(listeners)" not in line


def test_a_second_local_groupd_serves_without_the_default_metrics_port_of_the_first(tmp_path):
    # metrics.listener left at its default (http://:9464/metrics, the first listener's host): a port
    # another groupd holds is a warning naming metrics.listener, and this one serves without metrics
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 9464))
            taken.listen()
        except OSError:
            pass  # something holds it already: the same case
        log = tmp_path / "groupd.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "groupd.coordinator", "serve", "--set",
                                     f"data.dir={tmp_path / 'd'}", "--set",
                                     f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"],
                                    cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while "offsets log loaded" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            text = log.read_text()
            assert proc.poll() is None and "offsets log loaded" in text, text
        finally:
            proc.terminate()
            assert proc.wait(30) == 0
    warning = next(line for line in text.splitlines() if " WARNING " in line)
    assert "metrics.listener is its default and port 9464 is in use" in warning, text
    assert "--set metrics.listener=http://:9465/metrics" in warning and "metrics=off" in text


# -- the log CLI and a closed stdout ---------------------------------------------------------------

def test_log_dump_into_head_ends_quietly(tmp_path):
    log = PartitionLog(str(tmp_path), 0, 1 << 20)
    log.load(lambda r: None)
    for i in range(200):  # far more than a pipe buffer of JSON lines
        log.append([Record(OffsetCommitKey("g", f"topic-{j}", i), OffsetCommitValue(i, -1, "m" * 50, 1)) for j in range(20)],
                   fsync=False)
    log.close()
    out = subprocess.run(f"{sys.executable} -m groupd.coordinator log dump --data-dir {tmp_path} | head -n 2", shell=True,
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert len(out.stdout.splitlines()) == 2
    assert out.stderr == "", out.stderr


def test_log_commands_read_the_data_dir_from_the_settings_serve_reads(tmp_path):
    data = tmp_path / "data"
    log = PartitionLog(str(data), 3, 1 << 20)
    log.load(lambda r: None)
    log.append([Record(OffsetCommitKey("g", "orders", 0), OffsetCommitValue(42, -1, "", 1))], fsync=False)
    log.close()
    (tmp_path / "groupd.yaml").write_text(f"data.dir: {data}\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_")}
    for args, env in ((["--config", str(tmp_path / "groupd.yaml")], {}), (["--set", f"data.dir={data}"], {}),
                      ([], {"GROUPD_DATA_DIR": str(data)})):
        for command in ("dump", "verify"):
            out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", command, *args], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60, env={**clean, **env})
            assert out.returncode == 0 and out.stderr == "", (args, env, out.stderr)
            assert ('"offset": 42' if command == "dump" else "3: OK segments=1") in out.stdout, out.stdout
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", "dump", "--set", f"data.dir={tmp_path / 'no'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, env=clean)
    assert out.returncode == 1 and out.stderr.startswith(f"groupd: data.dir {tmp_path / 'no'} is not a directory")


@pytest.mark.parametrize("command", ["dump", "verify", "repair"])
def test_log_commands_name_a_missing_data_dir(tmp_path, command):
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "log", command, "--data-dir", str(tmp_path / "nope")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert re.fullmatch(rf"groupd: --data-dir {re.escape(str(tmp_path / 'nope'))} is not a directory\n", out.stderr)
    assert out.returncode == 1


def test_serve_does_not_import_what_only_oauthbearer_a_config_file_or_the_tests_need():
    # what `python -m groupd.coordinator serve` imports before it serves: PyJWT (with cryptography) only
    # when an OAUTHBEARER listener fetches its JWKS, PyYAML only for a config file, hypothesis never
    # (kio registers strategies with it)
    code = ("import runpy, sys\nsys.argv = ['groupd', '--version']\n"
            "try:\n    runpy.run_module('groupd.coordinator', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "import groupd.coordinator.server.server\n"
            "print(sorted(m for m in ('jwt', 'yaml', 'hypothesis') if sys.modules.get(m) is not None))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_cluster_mode_without_the_etcd_client_says_how_to_install_it_from_the_clone(tmp_path):
    # groupd is not on PyPI: `pip install 'groupd[cluster]'` fails from a plain shell (or installs a
    # stranger's package); the line names the command that works, for the Python that runs groupd
    blocked = tmp_path / "blocked" / "aetcd"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed')\n")
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", "cluster.etcd.endpoints=127.0.0.1:1",
                          "--set", f"data.dir={tmp_path / 'data'}", "--set", "listeners=PLAINTEXT://127.0.0.1:0",
                          "--set", "metrics.listener="], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(blocked.parent)})
    line = assert_one_line(out, "etcd client (aetcd) is missing")
    assert "pip install 'groupd[cluster]'" not in line
    assert f"{sys.executable} -m pip install -e '{ROOT}[cluster]'" in line
    assert f"{os.path.join(ROOT, '.ci', 'install-python')} cluster" in line
