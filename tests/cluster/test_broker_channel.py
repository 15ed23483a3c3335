"""The broker-to-broker connection (coordinator/cluster/broker_channel.py) of the transaction and share-group
coordinators: which listener it uses, whom it logs in as, one connection per broker."""

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


def test_requests_at_once_to_a_broker_share_one_connection():
    """Share-state round trips to several leaders run side by side: two requests to a broker not yet
    connected open one connection (the second waits for it), and each gets its own answer."""
    import asyncio
    import struct
    import types
    import uuid

    from groupd.coordinator.cluster.broker_channel import BrokerChannel
    from groupd.coordinator.cluster.view import Broker
    from groupd.protocol import ErrorCode
    from groupd.protocol.apis import ApiKey
    from groupd.protocol.codec import build_response, encode_response

    tid = uuid.UUID(int=5)

    async def run():
        connections = []

        async def serve(reader, writer):
            connections.append(writer)
            while True:
                try:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    return
                _key, _version, cid = struct.unpack_from(">hhi", frame)
                answer = build_response(ApiKey.DELETE_SHARE_GROUP_STATE, 0, {"results": [
                    {"topic_id": tid, "partitions": [{"partition": cid, "error_code": ErrorCode.none, "error_message": None}]}]})
                writer.write(encode_response(ApiKey.DELETE_SHARE_GROUP_STATE, cid, answer))
                await writer.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        view = types.SimpleNamespace(brokers=lambda: [Broker(2, {"EXTERNAL": ("127.0.0.1", port)})])
        channel = BrokerChannel(settings(), view)
        try:
            first, second = await asyncio.gather(*(
                channel.share_state(2, ApiKey.DELETE_SHARE_GROUP_STATE, "g", {(tid, p): {}}) for p in (1, 2)))
        finally:
            channel.close()
            server.close()
        return len(connections), first, second

    opened, first, second = asyncio.run(run())
    assert opened == 1
    # the fake broker answers the partition its correlation id names: each request got its own answer
    assert {k for k, v in first.items() if v is not None} == {(tid, 1)}
    assert {k for k, v in second.items() if v is not None} == {(tid, 2)}
