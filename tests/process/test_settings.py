"""Configuration: Kafka names and defaults, precedence file < env < --set, clear rejections."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from groupd.coordinator.core.topic_configs import SETTINGS as TOPIC_DEFAULTS
from groupd.coordinator.settings import KEYS, ConfigError, Settings, attribute, env_var
from tests.support.process import ROOT


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
    assert s.records_plane == "disk"  # messages flow and survive restarts by default; none is the pure coordinator
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


def test_unknown_groupd_variable_is_a_warning_naming_it(tmp_path):
    # Kubernetes injects GROUPD_PORT=tcp://... for a Service named groupd
    s = load(tmp_path, env={"GROUPD_PORT": "tcp://10.0.0.7:9092", "GROUPD_NUM_PARTITIONS": "3"})
    assert s.num_partitions == 3
    assert len(s.warnings) == 1 and "GROUPD_PORT" in s.warnings[0]
    assert load(tmp_path, env={"GROUPD_NUM_PARTITIONS": "3"}).warnings == ()
    misspelt = load(tmp_path, env={"GROUPD_GROUP_MIN_SESION_TIMEOUT_MS": "1"}).warnings
    assert "(did you mean GROUPD_GROUP_MIN_SESSION_TIMEOUT_MS?)" in misspelt[0]


def test_server_starts_with_an_unknown_groupd_variable_and_logs_it_once(tmp_path):
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "config", "show"], cwd=ROOT, capture_output=True,
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
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", "node.id=-5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "node.id='-5'" in out.stderr and "expected an integer" in out.stderr


def config_show(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUPD_")}
    return subprocess.run([sys.executable, "-m", "groupd.coordinator", "config", "show", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=30, env={**clean, **(env or {})})


def test_config_show_prints_yaml_with_each_value_and_its_source(tmp_path):
    path = tmp_path / "groupd.yaml"
    path.write_text("node.id: 3\ntopics: {orders: 6}\n")
    out = config_show("--config", str(path), "--set", "node.id=4", env={"GROUPD_NUM_PARTITIONS": "2"})
    assert out.returncode == 0, out.stderr
    header, *lines = out.stdout.splitlines()
    # each source once, in precedence order
    assert header == (f"# groupd's effective settings; sources, lowest to highest: defaults, file {path}, "
                      "env GROUPD_NUM_PARTITIONS, --set node.id")
    assert out.stdout.count(str(path)) == 1
    sources = dict(line.rsplit("  # ", 1) for line in lines)
    assert sources["node.id: 4"] == "--set" and sources["num.partitions: 2"] == "env"
    assert sources["topics: {orders: 6}"] == "file" and sources["group.max.size: 2147483647"] == "default"
    # the YAML is a config file: read back, it gives the same settings
    again = tmp_path / "again.yaml"
    again.write_text(out.stdout)
    assert Settings.load(str(again), env={}) == load(tmp_path, {"node.id": 4, "num.partitions": 2, "topics": {"orders": 6}})


def test_config_show_json_names_the_source_of_every_value():
    out = config_show("--json", "--set", "log.dirs=/var/lib/groupd", env={"GROUPD_NODE_ID": "7"})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["sources"] == {"file": None, "env": ["GROUPD_NODE_ID"], "set": ["data.dir"]}
    assert doc["settings"]["node.id"] == {"value": 7, "source": "env"}
    assert doc["settings"]["data.dir"] == {"value": "/var/lib/groupd", "source": "--set (log.dirs)"}
    assert doc["settings"]["listeners"] == {"value": "PLAINTEXT://127.0.0.1:9092", "source": "default"}
    assert set(doc["settings"]) == {k.name for k in KEYS}


@pytest.mark.parametrize("where, message", [
    ("file", "unknown setting 'group.min.sesion.timeout.ms' in .* \\(did you mean group.min.session.timeout.ms\\?\\)"),
    ("cli", "unknown setting 'group.min.sesion.timeout.ms' given to --set \\(did you mean group.min.session.timeout.ms\\?\\)"),
])
def test_a_misspelt_key_gets_a_did_you_mean(tmp_path, where, message):
    with pytest.raises(ConfigError, match=message):
        if where == "file":
            load(tmp_path, {"group.min.sesion.timeout.ms": 1})
        else:
            load(tmp_path, overrides=["group.min.sesion.timeout.ms=1"])


def test_kafkas_log_dirs_is_data_dir_in_the_file_the_environment_and_set(tmp_path):
    assert load(tmp_path, {"log.dirs": "/srv/a"}).data_dir == "/srv/a"
    assert load(tmp_path, {"log.dirs": ["/srv/b"]}).data_dir == "/srv/b"
    s = load(tmp_path, env={"GROUPD_LOG_DIRS": "/srv/c"})
    assert (s.data_dir, s.origins["data.dir"]) == ("/srv/c", "env GROUPD_LOG_DIRS (log.dirs)")
    assert load(tmp_path, {"data.dir": "/srv/file"}, overrides=["log.dirs=/srv/d"]).data_dir == "/srv/d"
    assert load(tmp_path, {"log.dirs": "/srv/file"}, overrides=["data.dir=/srv/e"]).data_dir == "/srv/e"


def test_log_dirs_with_several_directories_is_one_line_error(tmp_path):
    with pytest.raises(ConfigError, match="log.dirs='/a,/b' names 2 directories; groupd keeps its log in one"):
        load(tmp_path, overrides=["log.dirs=/a,/b"])
    with pytest.raises(ConfigError, match="log.dirs and data.dir are both set"):
        load(tmp_path, {"log.dirs": "/a", "data.dir": "/b"})
    out = config_show("--set", "log.dirs=/a,/b")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("groupd: configuration error: log.dirs='/a,/b' names 2 directories; groupd keeps its "
                          "log in one directory (data.dir)\n")


# Keys read other than as `settings.<attribute>`, and why.
READ_ELSEWHERE = {
    "advertised.listeners": "through Settings.advertised_for",
    "listener.security.protocol.map": "through Settings.security_protocol",
    "inter.broker.listener.name": "through Settings.inter_broker_listener",
    "ssl.keystore.type": "validated here: PEM is the only type groupd reads",
    "ssl.truststore.type": "validated here: PEM is the only type groupd reads",
    "group.coordinator.rebalance.protocols": "validated here (classic must be one); the consumer protocol reads it",
    "group.consumer.min.heartbeat.interval.ms": "validated here: bounds group.consumer.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms": "validated here: bounds group.consumer.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms": "validated here: bounds group.consumer.session.timeout.ms",
    "group.consumer.max.session.timeout.ms": "validated here: bounds group.consumer.session.timeout.ms",
    "group.share.min.heartbeat.interval.ms": "validated here: bounds group.share.heartbeat.interval.ms",
    "group.share.max.heartbeat.interval.ms": "validated here: bounds group.share.heartbeat.interval.ms",
    "group.share.min.session.timeout.ms": "validated here: bounds group.share.session.timeout.ms",
    "group.share.max.session.timeout.ms": "validated here: bounds group.share.session.timeout.ms",
    **{f"group.streams.{b}.{n}": f"validated here and in group_config: bounds group.streams.{n}"
       for b in ("min", "max") for n in ("heartbeat.interval.ms", "session.timeout.ms", "assignment.interval.ms")},
    "group.streams.assignor.offload.enable": "accepted for Kafka's name: Kafka 4.3.1 defines it and reads it nowhere",
    **{name: "read by name: the topics' config defaults (coordinator/core/topic_configs.py SETTINGS)"
       for name in TOPIC_DEFAULTS},
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


def test_share_group_settings_must_lie_within_their_bounds():
    with pytest.raises(ConfigError, match="group.share.session.timeout.ms=30000 must lie within"):
        Settings.load(env={}, overrides=["group.share.session.timeout.ms=30000"])
    with pytest.raises(ConfigError, match="group.share.heartbeat.interval.ms=20000 must lie within"):
        Settings.load(env={}, overrides=["group.share.heartbeat.interval.ms=20000"])
    with pytest.raises(ConfigError, match="group.share.max.size=1001 must lie within 1 and 1000"):
        Settings.load(env={}, overrides=["group.share.max.size=1001"])
    s = Settings.load(env={})
    assert (s.group_share_session_timeout_ms, s.group_share_heartbeat_interval_ms, s.group_share_max_size) == (
        45000, 5000, 200)


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
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--set", "listeners=SSL://127.0.0.1:0",
                          "--set", f"ssl.keystore.location={tmp_path / 'missing.pem'}",
                          "--set", f"data.dir={tmp_path / 'data'}", "--set", "metrics.listener="],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "ssl.keystore.location=" in out.stderr, out.stderr


def test_config_show_hides_passwords():
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "config", "show", "--set", "sasl.users=alice:s3cret",
                          "--set", "ssl.key.password=k3y"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "s3cret" not in out.stdout and "k3y" not in out.stdout
    assert "alice" in out.stdout and "[hidden]" in out.stdout


@pytest.mark.parametrize("listeners", ["PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:65535"])
def test_workers_need_a_port_per_worker_on_every_listener(listeners):
    with pytest.raises(ConfigError, match="workers=2 needs PLAINTEXT://127.0.0.1:.* a fixed port at most 65534"):
        Settings.load(None, env={}, overrides=[f"listeners={listeners}", "workers=2"])


def test_workers_and_cluster_mode_are_not_combined():
    with pytest.raises(ConfigError, match="workers > 1 and cluster.etcd.endpoints cannot be combined"):
        Settings.load(None, env={}, overrides=["listeners=PLAINTEXT://127.0.0.1:9092", "workers=2",
                                               "cluster.etcd.endpoints=127.0.0.1:2379"])


def test_a_kafka_server_properties_file_is_told_groupd_reads_yaml(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# Kafka's broker settings\nbroker.id=0\nlisteners=PLAINTEXT://:9092\nlog.dirs=/tmp/kafka-logs\n")
    out = subprocess.run([sys.executable, "-m", "groupd.coordinator", "serve", "--config", str(props)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"config file {props} is a Java properties file" in out.stderr and "groupd reads YAML" in out.stderr
    assert "`key: value`" in out.stderr
    # a YAML file that is broken stays "not valid YAML", on one line, naming the file
    broken = tmp_path / "broken.yaml"
    broken.write_text("listeners: [PLAINTEXT://:9092\n")
    out = config_show("--config", str(broken))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert f"config file {broken} is not valid YAML" in out.stderr and f'"{broken}", line 2' in out.stderr


def test_etcd_endpoints_take_urls_as_etcd_writes_them_and_host_port():
    def endpoints(value: str) -> tuple[str, ...]:
        return Settings.load(None, env={}, overrides=[f"cluster.etcd.endpoints={value}"]).cluster_etcd_endpoints

    assert endpoints("http://etcd:2379,https://etcd-2:2379/") == ("http://etcd:2379", "https://etcd-2:2379")
    assert endpoints("etcd:2379, [::1]:23790,https://etcd-3") == (
        "http://etcd:2379", "http://[::1]:23790", "https://etcd-3:2379")
    for bad in ("unix:///run/etcd.sock", "http://etcd:2379/v3", "etcd:port"):
        with pytest.raises(ConfigError, match="cluster.etcd.endpoints=.*http://host:port, https://host:port or host:port"):
            endpoints(bad)
    with pytest.raises(ConfigError, match="certfile and cluster.etcd.ssl.keyfile go together"):
        Settings.load(None, env={}, overrides=["cluster.etcd.endpoints=https://etcd:2379",
                                               "cluster.etcd.ssl.certfile=client.pem"])
    with pytest.raises(ConfigError, match="cluster.etcd.ssl.cafile is set but no cluster.etcd.endpoints is https://"):
        Settings.load(None, env={}, overrides=["cluster.etcd.endpoints=etcd:2379", "cluster.etcd.ssl.cafile=ca.pem"])
    assert Settings.load(None, env={}, overrides=["cluster.etcd.prefix=/a/b/"]).cluster_etcd_prefix == "/a/b"
    with pytest.raises(ConfigError, match="cluster.etcd.prefix"):
        Settings.load(None, env={}, overrides=["cluster.etcd.prefix=groupd"])
