"""The transaction coordinator's broker-to-broker connection (coordinator/cluster/broker_channel.py):
which listener it uses and whom it logs in as."""

import pytest

from groupd.coordinator.cluster.broker_channel import broker_user, inter_broker_listener
from groupd.coordinator.settings import ConfigError, Settings


def settings(*overrides: str) -> Settings:
    return Settings.load(None, env={}, overrides=[
        "listeners=EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9192",
        "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT", *overrides])


def test_the_named_listener_else_the_first_plaintext_one_else_the_first():
    assert inter_broker_listener(settings("inter.broker.listener.name=INTERNAL")) == "INTERNAL"
    assert inter_broker_listener(settings()) == "EXTERNAL"
    assert inter_broker_listener(settings("listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,"
                                          "INTERNAL:PLAINTEXT", "sasl.users=a:b")) == "INTERNAL"
    assert inter_broker_listener(settings("listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,"
                                          "INTERNAL:SASL_PLAINTEXT", "sasl.users=a:b")) == "EXTERNAL"


def test_a_listener_that_does_not_exist_is_refused():
    with pytest.raises(ConfigError, match="inter.broker.listener.name names REPLICATION"):
        settings("inter.broker.listener.name=REPLICATION")


def test_brokers_log_in_as_the_first_super_user_with_a_password():
    assert broker_user(settings("sasl.users=alice:a,admin:secret", "super.users=User:ops;User:admin")) == \
        ("admin", "secret")
    assert broker_user(settings("sasl.users=alice:a", "super.users=User:ops")) is None


def test_the_inter_broker_mechanism_must_be_offered_where_brokers_talk_over_sasl():
    sasl = ("listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT", "sasl.users=a:b",
            "sasl.enabled.mechanisms=SCRAM-SHA-512")
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol=PLAIN must be in"):
        settings(*sasl, "workers=2", "listeners=EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9192")
    assert settings(*sasl).sasl_mechanism_inter_broker_protocol == "PLAIN"  # a lone node talks to no broker
    chosen = settings(*sasl, "workers=2", "sasl.mechanism.inter.broker.protocol=scram-sha-512")
    assert chosen.sasl_mechanism_inter_broker_protocol == "SCRAM-SHA-512"
    with pytest.raises(ConfigError, match="GSSAPI"):
        settings("sasl.mechanism.inter.broker.protocol=GSSAPI")
