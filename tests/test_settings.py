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


@pytest.mark.parametrize("where", ["file", "env", "cli"])
def test_unknown_key_is_rejected_by_name(tmp_path, where):
    with pytest.raises(ConfigError, match="group.min.sesion.timeout.ms|GROUPD_GROUP_MIN_SESION"):
        if where == "file":
            load(tmp_path, {"group.min.sesion.timeout.ms": 1})
        elif where == "env":
            load(tmp_path, env={"GROUPD_GROUP_MIN_SESION_TIMEOUT_MS": "1"})
        else:
            load(tmp_path, overrides=["group.min.sesion.timeout.ms=1"])


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
    "advertised.listeners": "through Settings.advertised_for",
    "listener.security.protocol.map": "through Settings.security_protocol",
    "ssl.keystore.type": "validated here: PEM is the only type groupd reads",
    "ssl.truststore.type": "validated here: PEM is the only type groupd reads",
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


# -- listeners and security ----------------------------------------------------------------------


def test_each_listener_advertises_its_own_address(tmp_path):
    s = load(tmp_path, overrides=["listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9093",
                                  "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
                                  "advertised.listeners=INTERNAL://groupd:9092,EXTERNAL://localhost:19093",
                                  "ssl.keystore.location=/k.pem", "sasl.users=alice:secret:with:colons"])
    assert str(s.advertised_for("INTERNAL")) == "INTERNAL://groupd:9092"
    assert str(s.advertised_for("EXTERNAL")) == "EXTERNAL://localhost:19093"
    assert s.security_protocol("EXTERNAL") == "SASL_SSL"
    assert s.sasl_users == {"alice": "secret:with:colons"}


def test_protocol_names_map_to_themselves_by_default(tmp_path):
    s = load(tmp_path, overrides=["listeners=sasl_plaintext://127.0.0.1:9093", "sasl.users=a:b"])
    assert s.security_protocol("SASL_PLAINTEXT") == "SASL_PLAINTEXT"


def test_metrics_listener_defaults_to_the_first_listeners_host(tmp_path):
    assert load(tmp_path, overrides=["listeners=PLAINTEXT://10.1.2.3:9092"]).metrics_url == "http://10.1.2.3:9464/metrics"
    assert load(tmp_path).metrics_url == "http://127.0.0.1:9464/metrics"


@pytest.mark.parametrize("overrides, message", [
    (["listeners=SSL://127.0.0.1:9093"], "listener SSL uses TLS but ssl.keystore.location is not set"),
    (["listeners=SASL_SSL://127.0.0.1:9093", "sasl.users=a:b"], "ssl.keystore.location is not set"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:9093"], "sasl.users names no user"),
    (["listeners=SSL://127.0.0.1:9093", "ssl.keystore.location=/k.pem", "ssl.client.auth=required"],
     "needs ssl.truststore.location"),
    (["listeners=EXTERNAL://127.0.0.1:9093"], "listener EXTERNAL has no security protocol"),
    (["listeners=A://127.0.0.1:9093,B://127.0.0.1:9093", "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT"],
     "port 9093 twice"),
    (["advertised.listeners=OTHER://h:1"], "advertised.listeners names OTHER, which is not in listeners"),
    (["listeners=A://0.0.0.0:9092,B://127.0.0.1:9093", "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT"],
     "non-routable address 0.0.0.0 \\(listener A\\)"),
])
def test_bad_security_settings_stop_start_up(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, overrides=overrides)


@pytest.mark.parametrize("key, value, expected", [
    ("listener.security.protocol.map", "A:TLS", "security protocols among"),
    ("listener.security.protocol.map", "A", "NAME:PROTOCOL pairs"),
    ("sasl.enabled.mechanisms", "GSSAPI", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ("ssl.client.auth", "always", "none, requested, required"),
    ("ssl.enabled.protocols", "TLSv1.1", "TLSv1.2, TLSv1.3"),
    ("ssl.keystore.type", "JKS", "pem"),
    ("sasl.users", "alice", "user:password"),
])
def test_bad_security_values_name_what_is_allowed(tmp_path, key, value, expected):
    with pytest.raises(ConfigError, match=f"{key}=.*expected .*{expected}"):
        load(tmp_path, overrides=[f"{key}={value}"])


def test_a_keystore_that_does_not_load_is_a_one_line_start_up_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "coordinator", "serve", "--set", "listeners=SSL://127.0.0.1:0",
                          "--set", f"ssl.keystore.location={tmp_path / 'missing.pem'}",
                          "--set", f"data.dir={tmp_path / 'data'}", "--set", "metrics.listener="],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "ssl.keystore.location=" in out.stderr, out.stderr


def test_config_show_hides_passwords():
    out = subprocess.run([sys.executable, "-m", "coordinator", "config", "show", "--set", "sasl.users=alice:s3cret",
                          "--set", "ssl.key.password=k3y"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "s3cret" not in out.stdout and "k3y" not in out.stdout
    assert "alice" in out.stdout and "[hidden]" in out.stdout
