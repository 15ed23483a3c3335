"""The commands' client side without sockets (coordinator/tools/client_config.py): Kafka's client
properties as Java reads them, the JAAS line, which `--set` items are client properties, and the
SCRAM client against RFC 7677's example and groupd's own server side."""

import pytest

from groupd.coordinator.security.sasl import ScramMechanism, Users
from groupd.coordinator.settings import ConfigError
from groupd.coordinator.tools.client_config import (
    ClientConfig,
    SecurityError,
    load,
    parse_jaas,
    parse_properties,
    scram_client,
)


def test_java_properties_syntax():
    text = ("# comment\n! also a comment\n  security.protocol = SASL_SSL\nsasl.mechanism:SCRAM-SHA-512\n"
            "client.id groupd-ops\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
            "    required username=\"alice\" \\\n    password=\"p=w:d\";\nkey\\ with\\ space=a\\tb\\u0041\n")
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "client.id": "groupd-ops",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="p=w:d";',
        "key with space": "a\tbA"}


def test_jaas_options_quoted_and_bare():
    module, options = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 'username="al\\"ice" password="a b;c" debug=true;')
    assert module.endswith("PlainLoginModule") and options == {"username": 'al"ice', "password": "a b;c",
                                                               "debug": "true"}
    with pytest.raises(ConfigError, match="PlainLoginModule required"):
        parse_jaas('username="alice"')


def test_set_items_split_into_client_properties_and_groupd_settings(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=bob\nsasl.password=x\n")
    config, settings = load(str(path), ["sasl.username=alice", "listeners=PLAINTEXT://:9093", "sasl.users=a:b",
                                        "sasl.password=alice-secret"])
    assert settings == ["listeners=PLAINTEXT://:9093", "sasl.users=a:b"]  # --set beats the file
    assert config.credentials() == ("alice", "alice-secret") and config.sasl and not config.tls


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "SASL"}, "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.protocol": "SASL_SSL"}, "needs sasl.mechanism (Kafka's default, GSSAPI, is not supported)"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "commands speak PLAIN"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"}, "needs a username and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "sasl.oauthbearer.token.endpoint.url"),
])
def test_incomplete_properties_name_what_is_missing(props, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ClientConfig(props).check()


def test_scram_client_matches_rfc_7677_example():
    client = scram_client("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert next(client) == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.send(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    with pytest.raises(StopIteration):  # the server's signature verifies
        client.send(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    forged = scram_client("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    next(forged)
    forged.send(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SecurityError, match="signature does not verify"):
        forged.send(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_groupds_server_with_a_name_to_escape(mechanism):
    server = ScramMechanism(mechanism, Users({"a,b=c": "pw"}, [mechanism]))
    client = scram_client(mechanism, "a,b=c", "pw")
    server_first, _ = server.respond(next(client))
    server_final, done = server.respond(client.send(server_first))
    assert done and server.user == "a,b=c"
    with pytest.raises(StopIteration):
        client.send(server_final)
