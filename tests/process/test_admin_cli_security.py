"""The operations commands (`groups`, `offsets`, `health`, `acls`, `chaos`) against secured
listeners of the real server, as the real CLI: Kafka's client properties in `--command-config FILE`
or through `--set` reach SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), SSL
(PEM and PKCS12 stores, a client certificate) and SASL_SSL; without them, or with wrong ones, one
line says what the listener wants."""

from __future__ import annotations

import base64
import subprocess
import urllib.parse

import pytest

from tests.support import certs as test_certs
from tests.support import oauth
from tests.support.process import GroupdProcess, free_port
from tests.support.process import groupd_cli as groupd

SIGNER = oauth.Signer("k1")
JAAS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM": "org.apache.kafka.common.security.scram.ScramLoginModule"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    c = test_certs.make(str(tmp_path_factory.mktemp("certs")))
    for args in (["-nokeys", "-in", c.ca, "-out", c.path("trust.p12")],  # Java's PKCS12 truststore, keytool-free
                 ["-in", c.client_cert, "-inkey", c.client_key, "-out", c.path("client.p12")]):
        subprocess.run(["openssl", "pkcs12", "-export", *args, "-passout", "pass:changeit"], check=True,
                       capture_output=True, timeout=60)
    return c


class Ports:
    def __init__(self) -> None:
        self.plain, self.sasl, self.tls, self.sasl_ssl, self.admin = (free_port() for _ in range(5))


@pytest.fixture(scope="module")
def ports():
    return Ports()


@pytest.fixture(scope="module")
def server(tmp_path_factory, certs, ports):
    data_dir = tmp_path_factory.mktemp("secured")
    jwks = oauth.write_jwks(str(data_dir / "jwks.json"), SIGNER)
    s = GroupdProcess(str(data_dir),
                      f"listeners=PLAIN://127.0.0.1:{ports.plain},SASL://127.0.0.1:{ports.sasl},"
                      f"TLS://127.0.0.1:{ports.tls},BOTH://127.0.0.1:{ports.sasl_ssl}",
                      "listener.security.protocol.map=PLAIN:PLAINTEXT,SASL:SASL_PLAINTEXT,TLS:SSL,BOTH:SASL_SSL",
                      "sasl.users=alice:alice-secret", *oauth.settings(jwks),
                      "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
                      f"ssl.keystore.location={certs.server_keystore}", f"ssl.truststore.location={certs.ca}",
                      "ssl.client.auth=requested", f"admin.listener=http://127.0.0.1:{ports.admin}",
                      "topics=t:2", "log.level=debug", port=ports.plain).start()
    yield s
    assert s.stop() == 0, s.log()


def properties(tmp_path, name: str, **props: str) -> str:
    """A client.properties file as Kafka's tools read it (dots for underscores in the names)."""
    path = tmp_path / name
    path.write_text("# for groupd's commands, as for kafka-consumer-groups.sh --command-config\n" + "".join(
        f"{k.replace('_', '.')}={v}\n" for k, v in props.items()))
    return str(path)


def jaas(module: str, user: str = "alice", password: str = "alice-secret") -> str:
    return f'{JAAS[module]} required username="{user}" password="{password}";'


def one_line(r: subprocess.CompletedProcess, code: int = 1) -> str:
    assert r.returncode == code and r.stdout == "" and "Traceback" not in r.stderr, r
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


# --- without properties: what the listener wants, in one line --------------------------------------

def test_without_properties_each_secured_listener_says_what_it_wants(server, ports):
    sasl = one_line(groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.sasl}"))
    assert "server closed the connection" not in sasl
    assert f"127.0.0.1:{ports.sasl} wants SASL authentication (mechanisms PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, " \
           "OAUTHBEARER) and none is configured: give --command-config FILE" in sasl
    assert "security.protocol=SASL_PLAINTEXT" in sasl and "sasl.jaas.config" in sasl
    tls = one_line(groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.tls}"))
    assert f"127.0.0.1:{ports.tls} speaks TLS" in tls and "security.protocol=SSL and ssl.truststore.location" in tls
    both = one_line(groupd("acls", "list", "--bootstrap", f"127.0.0.1:{ports.sasl_ssl}"))
    assert "speaks TLS and wants SASL authentication" in both and "security.protocol=SASL_SSL" in both
    ready = groupd("health", "--ready", "--bootstrap", f"127.0.0.1:{ports.sasl}")
    assert ready.returncode == 1 and "wants SASL authentication" in ready.stdout, ready


# --- SASL_PLAINTEXT ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_with_a_command_config_file(server, ports, tmp_path, mechanism):
    config = properties(tmp_path, "client.properties", security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                        sasl_jaas_config=jaas(mechanism.split("-")[0]))
    b = ["--bootstrap", f"127.0.0.1:{ports.sasl}", "--command-config", config]
    r = groupd("offsets", "reset", f"sec-{mechanism}", "--topic", "t", "--to-offset", "3", "--execute", *b)
    assert r.returncode == 0, r.stderr
    r = groupd("groups", "describe", f"sec-{mechanism}", *b)
    assert r.returncode == 0 and f"group sec-{mechanism}: Empty" in r.stdout, r.stderr
    assert groupd("health", "--ready", *b).returncode == 0
    assert f"listener=SASL mechanism={mechanism} principal=User:alice" in server.log()


def test_the_same_properties_through_set_and_librdkafkas_username_and_password(server, ports):
    r = groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.sasl}", "--set", "security.protocol=SASL_PLAINTEXT",
               "--set", "sasl.mechanism=SCRAM-SHA-512", "--set", "sasl.username=alice", "--set",
               "sasl.password=alice-secret")
    assert r.returncode == 0 and r.stdout.startswith("GROUP"), r.stderr


def test_without_bootstrap_the_listener_of_the_clients_protocol_is_found(server, ports):
    # the settings serve reads name both listeners: the command picks the one its properties speak
    seen = server.log().count("listener=SASL mechanism=PLAIN principal=User:alice")
    r = groupd("groups", "list", "--set", f"listeners=PLAIN://127.0.0.1:{ports.plain},SASL://127.0.0.1:{ports.sasl}",
               "--set", "listener.security.protocol.map=PLAIN:PLAINTEXT,SASL:SASL_PLAINTEXT",
               "--set", "security.protocol=SASL_PLAINTEXT", "--set", "sasl.mechanism=PLAIN",
               "--set", f"sasl.jaas.config={jaas('PLAIN')}")
    assert r.returncode == 0, r.stderr
    assert server.log().count("listener=SASL mechanism=PLAIN principal=User:alice") == seen + 1


def test_a_wrong_password_or_mechanism_or_protocol_is_one_line(server, ports, tmp_path):
    b = ["--bootstrap", f"127.0.0.1:{ports.sasl}", "--set", "security.protocol=SASL_PLAINTEXT"]
    wrong = one_line(groupd("groups", "list", *b, "--set", "sasl.mechanism=SCRAM-SHA-256", "--set",
                            f"sasl.jaas.config={jaas('SCRAM', password='guess')}"))
    assert "SASL SCRAM-SHA-256 authentication failed: Authentication failed" in wrong
    missing = one_line(groupd("groups", "list", *b), code=2)
    assert "security.protocol=SASL_PLAINTEXT needs sasl.mechanism" in missing
    no_password = one_line(groupd("groups", "list", *b, "--set", "sasl.mechanism=PLAIN"), code=2)
    assert "sasl.mechanism=PLAIN needs a username and password" in no_password
    plaintext = one_line(groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.plain}", "--set",
                                "security.protocol=SASL_PLAINTEXT", "--set", "sasl.mechanism=PLAIN",
                                "--set", f"sasl.jaas.config={jaas('PLAIN')}"))
    assert "does not authenticate with SASL" in plaintext and "security.protocol=PLAINTEXT" in plaintext


# --- OAUTHBEARER ---------------------------------------------------------------------------------------

def test_oauthbearer_with_a_token_file_and_with_a_token_endpoint(server, ports, tmp_path):
    token = tmp_path / "token"
    token.write_text(SIGNER.token(sub="svc-file") + "\n")
    b = ["--bootstrap", f"127.0.0.1:{ports.sasl}", "--set", "security.protocol=SASL_PLAINTEXT", "--set",
         "sasl.mechanism=OAUTHBEARER"]
    r = groupd("groups", "list", *b, "--set", f"sasl.oauthbearer.token.endpoint.url=file://{token}")
    assert r.returncode == 0, r.stderr
    assert "mechanism=OAUTHBEARER principal=User:svc-file" in server.log()
    asked = []

    def answer(method, headers, body):  # an OAuth token endpoint: client credentials grant
        asked.append((method, headers.get("Authorization"), urllib.parse.parse_qs(body.decode())))
        return 200, {"access_token": SIGNER.token(sub="svc-endpoint"), "token_type": "Bearer", "expires_in": 300}

    endpoint = oauth.JsonEndpoint(answer)
    try:
        config = properties(tmp_path, "oauth.properties", security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=endpoint.url + "/token",
                            sasl_jaas_config='org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                                             'required clientId="ops" clientSecret="s3cret" scope="kafka";')
        r = groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.sasl}", "--command-config", config)
        assert r.returncode == 0, r.stderr
    finally:
        endpoint.close()
    assert asked == [("POST", "Basic " + base64.b64encode(b"ops:s3cret").decode(),
                      {"grant_type": ["client_credentials"], "scope": ["kafka"]})]
    assert "mechanism=OAUTHBEARER principal=User:svc-endpoint" in server.log()


# --- SSL and SASL_SSL ----------------------------------------------------------------------------------

def test_ssl_with_pem_and_pkcs12_stores_and_a_client_certificate(server, ports, certs, tmp_path):
    b = ["--bootstrap", f"127.0.0.1:{ports.tls}"]
    pem = properties(tmp_path, "pem.properties", security_protocol="SSL", ssl_truststore_location=certs.ca,
                     ssl_truststore_type="PEM")
    assert groupd("groups", "list", *b, "--command-config", pem).returncode == 0
    r = groupd("groups", "list", *b, "--set", "security.protocol=SSL", "--set",
               f"ssl.truststore.location={certs.path('trust.p12')}", "--set", "ssl.truststore.type=PKCS12",
               "--set", "ssl.truststore.password=changeit", "--set",
               f"ssl.keystore.location={certs.path('client.p12')}", "--set", "ssl.keystore.type=PKCS12",
               "--set", "ssl.keystore.password=changeit")
    assert r.returncode == 0, r.stderr
    assert f"listener=TLS mechanism=TLS principal={test_certs.CLIENT_PRINCIPAL}" in server.log()
    r = groupd("groups", "list", *b, "--command-config", pem, "--set", f"ssl.keystore.location={certs.client_keystore}")
    assert r.returncode == 0, r.stderr  # Kafka's PEM keystore: key and certificate in one file


def test_ssl_failures_are_one_line(server, ports, certs, tmp_path):
    b = ["--bootstrap", f"127.0.0.1:{ports.tls}", "--set", "security.protocol=SSL"]
    untrusted = one_line(groupd("groups", "list", *b, "--set", f"ssl.truststore.location={certs.path('other-ca.pem')}"))
    assert "TLS certificate not trusted" in untrusted and "ssl.truststore.location" in untrusted
    store = one_line(groupd("groups", "list", *b, "--set", f"ssl.truststore.location={certs.path('trust.p12')}",
                            "--set", "ssl.truststore.password=wrong"), code=2)
    assert "cannot read the PKCS12 store" in store
    jks = tmp_path / "trust.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    assert "keytool -importkeystore" in one_line(groupd("groups", "list", *b, "--set",
                                                        f"ssl.truststore.location={jks}"), code=2)
    plaintext = one_line(groupd("groups", "list", "--bootstrap", f"127.0.0.1:{ports.plain}", "--set",
                                "security.protocol=SSL", "--set", f"ssl.truststore.location={certs.ca}"))
    assert "TLS handshake failed" in plaintext


def test_sasl_ssl_with_scram(server, ports, certs, tmp_path):
    config = properties(tmp_path, "sasl-ssl.properties", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                        sasl_jaas_config=jaas("SCRAM"), ssl_truststore_location=certs.ca,
                        ssl_endpoint_identification_algorithm="https")
    b = ["--bootstrap", f"127.0.0.1:{ports.sasl_ssl}", "--command-config", config]
    r = groupd("offsets", "reset", "over-tls", "--topic", "t:1", "--to-offset", "5", "--execute", *b)
    assert r.returncode == 0, r.stderr
    assert "t      1          5" in groupd("groups", "describe", "over-tls", *b).stdout
    assert "listener=BOTH mechanism=SCRAM-SHA-256 principal=User:alice" in server.log()


# --- chaos: the admin endpoint's HTTP Basic from the same properties -------------------------------------

def test_chaos_takes_the_credentials_of_the_command_config(server, ports, tmp_path):
    admin = ["--admin", f"http://127.0.0.1:{ports.admin}"]
    none = one_line(groupd("chaos", "list", *admin))
    assert "wants the credentials of a sasl.users user" in none and "--command-config" in none
    config = properties(tmp_path, "client.properties", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                        sasl_jaas_config=jaas("PLAIN"))
    r = groupd("chaos", "list", *admin, "--command-config", config)
    assert (r.returncode, r.stdout) == (0, "no faults armed\n"), r.stderr
    wrong = one_line(groupd("chaos", "list", *admin, "--set", "sasl.username=alice", "--set", "sasl.password=guess"))
    assert "refused the credentials of 'alice'" in wrong
