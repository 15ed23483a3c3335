"""Configuration: Kafka names and defaults, precedence file < env < --set, clear rejections."""

import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from coordinator.settings import KEYS, ConfigError, Settings, attribute, env_var
from tests.support import ROOT


def load(tmp_path, file_values=None, env=None, overrides=()):
    path = None
    if file_values is not None:
        path = tmp_path / "groupd.yaml"
        path.write_text(yaml.safe_dump(file_values))
    return Settings.load(str(path) if path else None, env=env or {}, overrides=list(overrides))


def test_defaults_are_kafkas():
    s = Settings.load(None, env={})
    assert s.group_min_session_timeout_ms == 6000
    assert s.group_max_session_timeout_ms == 1800000
    assert s.group_initial_rebalance_delay_ms == 3000
    assert s.offsets_topic_num_partitions == 50
    assert s.offsets_retention_minutes == 10080
    assert s.offset_metadata_max_bytes == 4096
    assert s.num_partitions == 1
    assert s.auto_create_topics_enable is True
    assert s.log_retention_check_interval_ms == 300000
    assert s.records_plane == "memory"  # messages flow by default; none is the pure coordinator
    assert all(origin == "default" for origin in s.origins.values())


def test_file_then_env_then_cli(tmp_path):
    s = load(tmp_path, {"node.id": 7, "num.partitions": 2, "offsets.retention.minutes": 5},
             env={"GROUPD_NUM_PARTITIONS": "3", "GROUPD_OFFSETS_RETENTION_MINUTES": "6"},
             overrides=["offsets.retention.minutes=9"])
    assert (s.node_id, s.num_partitions, s.offsets_retention_minutes) == (7, 3, 9)
    assert s.origins["node.id"].startswith("file ")
    assert s.origins["num.partitions"] == "env GROUPD_NUM_PARTITIONS"
    assert s.origins["offsets.retention.minutes"] == "--set"


def test_env_names_are_upper_case_with_underscores():
    assert env_var("group.min.session.timeout.ms") == "GROUPD_GROUP_MIN_SESSION_TIMEOUT_MS"


@pytest.mark.parametrize("where", ["file", "cli"])
def test_unknown_key_is_rejected_by_name(tmp_path, where):
    with pytest.raises(ConfigError, match="group.min.sesion.timeout.ms"):
        if where == "file":
            load(tmp_path, {"group.min.sesion.timeout.ms": 1})
        else:
            load(tmp_path, overrides=["group.min.sesion.timeout.ms=1"])


def test_unknown_groupd_variable_is_a_warning_naming_it(tmp_path):
    # Kubernetes injects GROUPD_PORT=tcp://... for a Service named groupd
    s = load(tmp_path, env={"GROUPD_PORT": "tcp://10.0.0.7:9092", "GROUPD_NUM_PARTITIONS": "3"})
    assert s.num_partitions == 3
    assert len(s.warnings) == 1 and "GROUPD_PORT" in s.warnings[0]
    assert load(tmp_path, env={"GROUPD_NUM_PARTITIONS": "3"}).warnings == ()


def test_server_starts_with_an_unknown_groupd_variable_and_logs_it_once(tmp_path):
    out = subprocess.run([sys.executable, "-m", "coordinator", "config", "show"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30, env={**os.environ, "GROUPD_SERVICE_PORT": "9092"})
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("GROUPD_SERVICE_PORT") == 1 and "warning" in out.stderr


@pytest.mark.parametrize("key, value, expected", [
    ("node.id", "abc", "an integer"),
    ("group.max.size", "0", r"\[1, inf\]"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("listeners", "127.0.0.1:9092", "NAME://host:port"),
    ("group.coordinator.rebalance.protocols", "consumer", "includes classic"),
    ("topics", "a:0", r"\[1, 1000000\]"),
])
def test_bad_value_names_key_and_what_is_allowed(tmp_path, key, value, expected):
    with pytest.raises(ConfigError, match=f"{key}=.*expected .*{expected}"):
        load(tmp_path, overrides=[f"{key}={value}"])


def test_topics_from_yaml_map_and_from_string(tmp_path):
    assert load(tmp_path, {"topics": {"a": 3, "b": 1}}).topics == {"a": 3, "b": 1}
    assert load(tmp_path, overrides=["topics=a:3,b:1"]).topics == {"a": 3, "b": 1}


def test_advertised_defaults_to_listener_and_refuses_wildcard(tmp_path):
    s = load(tmp_path, overrides=["listeners=PLAINTEXT://127.0.0.1:9999"])
    assert (s.advertised.host, s.advertised.port) == ("127.0.0.1", 9999)
    with pytest.raises(ConfigError, match="advertised.listeners"):
        load(tmp_path, overrides=["listeners=PLAINTEXT://0.0.0.0:9092"])
    s = load(tmp_path, overrides=["listeners=PLAINTEXT://0.0.0.0:9092",
                                  "advertised.listeners=PLAINTEXT://groupd:9092"])
    assert str(s.advertised) == "PLAINTEXT://groupd:9092"


def test_default_yaml_documents_every_key_with_its_default():
    path = os.path.join(ROOT, "config", "groupd.yaml")
    with open(path) as f:
        documented = yaml.safe_load(f)
    assert list(documented) == [k.name for k in KEYS] or set(documented) == {k.name for k in KEYS}
    for key in KEYS:
        assert documented[key.name] == key.default, key.name
    assert Settings.load(path, env={}) == Settings.load(None, env={})


def test_cli_exits_2_with_the_message(tmp_path):
    out = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--set", "node.id=-5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "node.id='-5'" in out.stderr and "expected an integer" in out.stderr


def test_config_show_prints_values_and_origins(tmp_path):
    out = subprocess.run([sys.executable, "-m", "coordinator", "config", "show", "--set", "node.id=4"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30,
                         env={**os.environ, "GROUPD_NUM_PARTITIONS": "2"})
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert "4" in lines["node.id"] and "--set" in lines["node.id"]
    assert "env GROUPD_NUM_PARTITIONS" in lines["num.partitions"]
    assert "default" in lines["group.max.size"]


# Keys read other than as `settings.<attribute>`, and why.
READ_ELSEWHERE = {
    "advertised.listeners": "through Settings.advertised",
    "group.coordinator.rebalance.protocols": "validated here (classic must be one); the consumer protocol reads it",
    "group.consumer.min.heartbeat.interval.ms": "validated here: bounds group.consumer.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms": "validated here: bounds group.consumer.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms": "validated here: bounds group.consumer.session.timeout.ms",
    "group.consumer.max.session.timeout.ms": "validated here: bounds group.consumer.session.timeout.ms",
    "group.consumer.regex.refresh.interval.ms": "Kafka's key, accepted: groupd re-resolves regexes on every topic "
                                                "change, so there is nothing for a timer to refresh",
}


def test_every_setting_is_read_somewhere():
    """A key that is accepted but never read misleads whoever sets it (issue 11 item 7)."""
    sources = ""
    for package in ("coordinator", "storage", "protocol", "analytics"):
        for path in sorted(pathlib.Path(ROOT, package).rglob("*.py")):
            if path.name != "settings.py":
                sources += path.read_text()
    unread = [k.name for k in KEYS if k.name not in READ_ELSEWHERE and f".{attribute(k.name)}" not in sources]
    assert unread == []


def test_consumer_group_timeouts_must_lie_within_their_bounds():
    with pytest.raises(ConfigError, match="group.consumer.session.timeout.ms=30000 must lie within"):
        Settings.load(env={}, overrides=["group.consumer.session.timeout.ms=30000"])
    with pytest.raises(ConfigError, match="must be less than group.consumer.session.timeout.ms"):
        Settings.load(env={}, overrides=["group.consumer.session.timeout.ms=1000",
                                         "group.consumer.min.session.timeout.ms=1000",
                                         "group.consumer.heartbeat.interval.ms=1000",
                                         "group.consumer.min.heartbeat.interval.ms=1000"])
    with pytest.raises(ConfigError, match="group.consumer.assignors"):
        Settings.load(env={}, overrides=["group.consumer.assignors=sticky"])
    s = Settings.load(env={}, overrides=["group.consumer.assignors=range,uniform"])
    assert s.group_consumer_assignors == ("range", "uniform")
