"""How groupd's own commands (`groups`, `offsets`, `health`, `acls`, `chaos`) reach a secured listener:
Kafka's client properties, read as Kafka's tools read them (`--command-config FILE`, a Java properties
file, and the same keys through `--set key=value`), and the connection they describe: TCP, then TLS
(truststore and keystore as PEM or PKCS12; a JKS store is named with the keytool line that converts
it), then SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with a token from a file or an OAuth token
endpoint) over SaslHandshake v1 and SaslAuthenticate v2. A plaintext connection that a listener
closes is diagnosed (`diagnose`): whether it wants TLS, SASL and which mechanisms, in one line.
Blocking, standard library plus `cryptography` (PKCS12), for the commands' blocking client. About
500 lines: the properties, TLS and the SASL clients are the one translation of Kafka's client config."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import socket
import ssl
import struct
import tempfile
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupd.coordinator.security.scram import ScramClient, ScramError
from groupd.coordinator.settings import SASL_MECHANISMS, SECURITY_PROTOCOLS, ConfigError
from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import RequestHeader, build_request, decode_response, encode_request

# What the commands read; ALIASES: librdkafka's names for some of them.
KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
        "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
        "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.endpoint.identification.algorithm",
        "client.id")
ALIASES = {"ssl.ca.location": "ssl.truststore.location", "ssl.certificate.location": "ssl.keystore.location",
           "ssl.key.location": "ssl.keystore.key.location"}
# Kafka client properties that change nothing for a short blocking command: accepted without a word
# (a client.properties written for kafka-consumer-groups.sh has them)
QUIET = re.compile(r"(request|socket|connections|reconnect|retry|retries|metadata|default\.api|sasl\.login|"
                   r"sasl\.kerberos|sasl\.client|ssl\.protocol|ssl\.enabled\.protocols|ssl\.cipher\.suites|"
                   r"ssl\.keymanager|ssl\.trustmanager|ssl\.secure\.random|ssl\.engine|ssl\.provider|"
                   r"bootstrap\.servers|client\.dns|send\.buffer|receive\.buffer|security\.providers|"
                   r"sasl\.oauthbearer)[.a-z]*")

SASL_HANDSHAKE_V, SASL_AUTHENTICATE_V = 1, 2


def is_client_key(key: str) -> bool:
    """Whether `--set key=...` of a command is a client property rather than a groupd setting (an
    ssl.* name both have, such as ssl.truststore.location, is the client's: the command connects)."""
    return key in KEYS or key in ALIASES


# ---------------------------------------------------------------------------------------------
# Reading the properties


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file (java.util.Properties.load): `key=value`, `key: value` or `key value`,
    `#`/`!` comments, a trailing backslash continues the line, backslash escapes."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        line = line.lstrip()
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip()
        m = re.match(r"((?:\\.|[^\s=:\\])*)\s*[=:]?\s*(.*)", line, re.S)
        out[_unescape(m.group(1))] = _unescape(m.group(2))
    return out


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        c = m.group(1)
        if c[0] == "u":
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text, flags=re.S)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`sasl.jaas.config`: `<login module class> <flag> key="value" ...;` → (class, options)."""
    m = re.match(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", text, re.S)
    if m is None:
        raise ConfigError("sasl.jaas.config is not `<LoginModule> required key=\"value\" ...;` (e.g. "
                          "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
                          "password=\"...\";)")
    options = {}
    for key, quoted, bare in re.findall(r'([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))', m.group(3)):
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
    return m.group(1), options


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """The client properties a command connects with (the defaults: PLAINTEXT, nothing else)."""

    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)
    context: ssl.SSLContext | None = dataclasses.field(default=None, compare=False)  # made once by `load`

    def get(self, key: str, default: str = "") -> str:
        return self.properties.get(key, default)

    @property
    def protocol(self) -> str:
        return self.get("security.protocol", "PLAINTEXT").upper()

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def mechanism(self) -> str:
        return self.get("sasl.mechanism", "GSSAPI").upper()

    @property
    def jaas(self) -> tuple[str, dict[str, str]]:
        text = self.get("sasl.jaas.config")
        return parse_jaas(text) if text else ("", {})

    def credentials(self) -> tuple[str, str] | None:
        """(user, password) from sasl.jaas.config's options or sasl.username/sasl.password."""
        _, options = self.jaas
        user = options.get("username", self.get("sasl.username"))
        password = options.get("password", self.get("sasl.password"))
        return (user, password) if user else None

    def check(self) -> ClientConfig:
        """Every value usable, or a ConfigError naming what is wrong and what would do."""
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol={self.get('security.protocol')}: one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
        if not self.sasl:
            return self
        if "sasl.mechanism" not in self.properties:
            raise ConfigError(f"security.protocol={self.protocol} needs sasl.mechanism (Kafka's default, GSSAPI, is "
                              f"not supported): one of {', '.join(SASL_MECHANISMS)}")
        if self.mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"sasl.mechanism={self.get('sasl.mechanism')}: groupd's commands speak "
                              f"{', '.join(SASL_MECHANISMS)}")
        if self.mechanism == "OAUTHBEARER":
            if not self.get("sasl.oauthbearer.token.endpoint.url"):
                raise ConfigError("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url (an OAuth "
                                  "token endpoint, or file:///path of a file holding the token)")
        elif self.credentials() is None or not self.credentials()[1]:
            raise ConfigError(f"sasl.mechanism={self.mechanism} needs a username and password: sasl.jaas.config="
                              f"{_jaas_example(self.mechanism)} (or sasl.username and sasl.password)")
        return self


def _jaas_example(mechanism: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return f'org.apache.kafka.common.security.{module} required username="USER" password="PASSWORD";'


def load(command_config: str | None, sets: Iterable[str]) -> tuple[ClientConfig, list[str]]:
    """The client properties of `--command-config FILE` and of the `--set key=value` items that are
    client properties (the latter win), and the other `--set` items, which are groupd settings
    (where to find groupd). A TLS config has its context made here, so a store that does not load
    is a ConfigError before anything connects."""
    properties: dict[str, str] = {}
    if command_config:
        try:
            with open(command_config, encoding="utf-8") as f:
                properties.update(parse_properties(f.read()))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read --command-config {command_config}: "
                              f"{getattr(e, 'strerror', None) or e}") from None
    settings = []
    for item in sets:
        key, sep, value = item.partition("=")
        if sep and is_client_key(key.strip()):
            properties[key.strip()] = value
        else:
            settings.append(item)
    for alias, key in ALIASES.items():
        if alias in properties:
            properties.setdefault(key, properties.pop(alias))
    config = ClientConfig(properties).check()
    if config.tls:
        config = dataclasses.replace(config, context=ssl_context(config))
    return config, settings


def unused(config: ClientConfig) -> list[str]:
    """The given properties the commands neither use nor quietly accept (Kafka's tools warn of them too)."""
    return sorted(k for k in config.properties if k not in KEYS and k != "ssl.keystore.key.location"
                  and not QUIET.fullmatch(k))


# ---------------------------------------------------------------------------------------------
# TLS


def _store_type(path: str, given: str) -> str:
    """PEM, PKCS12 or JKS: as given, else what the file holds (Kafka's default, JKS, is rarely it)."""
    if given:
        return given.upper()
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    return "PEM" if b"-----BEGIN" in head or head.lstrip()[:5] == b"-----" else "PKCS12"


def _pkcs12(path: str, password: str):
    from cryptography.hazmat.primitives.serialization import pkcs12  # PyJWT[crypto] brings it

    with open(path, "rb") as f:
        data = f.read()
    try:
        return pkcs12.load_pkcs12(data, password.encode() or None)
    except ValueError as e:
        raise ConfigError(f"cannot read the PKCS12 store {path}: {e} (is its password right?)") from None


def _jks(path: str, what: str) -> ConfigError:
    return ConfigError(f"{what} {path} is a JKS store, which groupd's commands do not read: convert it with "
                       f"keytool -importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12 "
                       "and give the .p12 (or a PEM file)")


def ssl_context(config: ClientConfig) -> ssl.SSLContext:
    """The TLS context of `config`: its truststore (else the system's CAs), its keystore if any, and
    host name checks unless ssl.endpoint.identification.algorithm is empty (Kafka's default: https)."""
    from cryptography.hazmat.primitives.serialization import Encoding

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust, inline = config.get("ssl.truststore.location"), config.get("ssl.truststore.certificates")
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline)
        elif trust:
            kind = _store_type(trust, config.get("ssl.truststore.type"))
            if kind == "JKS":
                raise _jks(trust, "ssl.truststore.location")
            if kind == "PKCS12":
                store = _pkcs12(trust, config.get("ssl.truststore.password"))
                certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert
                                                                            else [])
                ctx.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certs))
            else:
                ctx.load_verify_locations(cafile=trust)
        else:
            ctx.load_default_certs()
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the truststore {trust or 'ssl.truststore.certificates'}: "
                          f"{getattr(e, 'strerror', None) or e}") from None
    _load_keystore(ctx, config)
    ctx.check_hostname = config.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    return ctx


def _load_keystore(ctx: ssl.SSLContext, config: ClientConfig) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    location, password = config.get("ssl.keystore.location"), config.get("ssl.key.password") or None
    chain, key = config.get("ssl.keystore.certificate.chain"), config.get("ssl.keystore.key")
    key_file = config.get("ssl.keystore.key.location")  # librdkafka's ssl.key.location
    if not (location or chain):
        return
    try:
        if chain:  # Kafka's PEM in the properties themselves
            _load_pem_chain(ctx, chain + "\n" + key, password)
        elif key_file:
            ctx.load_cert_chain(location, key_file, password)
        else:
            kind = _store_type(location, config.get("ssl.keystore.type"))
            if kind == "JKS":
                raise _jks(location, "ssl.keystore.location")
            if kind == "PKCS12":
                store = _pkcs12(location, config.get("ssl.keystore.password"))
                pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode() + "".join(
                    c.public_bytes(Encoding.PEM).decode() for c in [store.cert.certificate] +
                    [x.certificate for x in store.additional_certs])
                _load_pem_chain(ctx, pem, None)
            else:
                ctx.load_cert_chain(location, password=password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the keystore {location or 'ssl.keystore.certificate.chain'}: "
                          f"{getattr(e, 'strerror', None) or e} (ssl.key.password?)") from None


def _load_pem_chain(ctx: ssl.SSLContext, pem: str, password: str | None) -> None:
    """load_cert_chain reads files only: the PEM goes through a private temporary file."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def open_socket(host: str, port: int, timeout: float, config: ClientConfig) -> socket.socket:
    """A connected socket to host:port, TLS-wrapped (handshake done) when the protocol says so."""
    sock = socket.create_connection((host, port), timeout=timeout)
    if not config.tls:
        return sock
    ctx = config.context or ssl_context(config)
    try:
        return ctx.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        sock.close()
        hint = ("the certificate does not name this host: connect by a name it has, or set "
                "ssl.endpoint.identification.algorithm= to skip the check" if "mismatch" in str(e.verify_message)
                else "set ssl.truststore.location to the CA that signed the listener's certificate")
        raise SecurityError(f"{_address(host, port)}: TLS certificate not trusted "
                            f"({str(e.verify_message).rstrip('.')}): {hint}") from None
    except (ssl.SSLError, ConnectionError, TimeoutError) as e:
        sock.close()
        raise SecurityError(f"{_address(host, port)}: TLS handshake failed ({getattr(e, 'reason', None) or e}): is it "
                            f"a TLS listener? security.protocol={config.protocol} needs one") from None


class SecurityError(Exception):
    """The listener and the client properties do not agree; the message says what to change."""


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ---------------------------------------------------------------------------------------------
# SASL


def authenticate(request: Callable[[int, int, Mapping[str, Any]], Any], config: ClientConfig, where: str) -> None:
    """Run the SASL exchange of `config` with `request(api_key, version, values)` of a fresh connection."""
    mechanism = config.mechanism
    r = request(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_V, {"mechanism": mechanism})
    if r.error_code is ErrorCode.illegal_sasl_state:
        raise SecurityError(f"{where} does not authenticate with SASL (its listener is PLAINTEXT or SSL): set "
                            f"security.protocol={'SSL' if config.tls else 'PLAINTEXT'}")
    if r.error_code is ErrorCode.unsupported_sasl_mechanism:
        raise SecurityError(f"{where} does not enable sasl.mechanism={mechanism}: it offers "
                            f"{', '.join(r.mechanisms) or 'none'}")
    if r.error_code is not ErrorCode.none:
        raise SecurityError(f"{where}: SaslHandshake answered {r.error_code.name.upper()}")
    exchange = _exchange(config)
    token = next(exchange)
    while True:
        r = request(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_V, {"auth_bytes": token})
        if r.error_code is not ErrorCode.none:
            raise SecurityError(f"{where}: SASL {mechanism} authentication failed: "
                                f"{r.error_message or r.error_code.name.upper()}")
        try:
            token = exchange.send(r.auth_bytes)
        except StopIteration:
            return


def _exchange(config: ClientConfig):
    """A generator of the client's tokens: each `send` gives it the server's last answer."""
    if config.mechanism == "OAUTHBEARER":
        yield f"n,,\x01auth=Bearer {oauth_token(config)}\x01\x01".encode()
        return
    user, password = config.credentials() or ("", "")
    if config.mechanism == "PLAIN":
        yield f"\0{user}\0{password}".encode()
        return
    yield from scram_client(config.mechanism, user, password)


def scram_client(mechanism: str, user: str, password: str, nonce: str | None = None):
    """RFC 5802's client (coordinator/security/scram.py) as a generator: client-first, then (given
    server-first) client-final, then (given server-final) it checks the server's signature and stops."""
    client = ScramClient(mechanism, user, password, nonce)
    try:
        server_first = yield client.first()
        server_final = yield client.final(bytes(server_first))
        client.verify(bytes(server_final))
    except ScramError as e:
        raise SecurityError(f"SASL {mechanism}: {e}") from None


def oauth_token(config: ClientConfig) -> str:
    """The access token: sasl.oauthbearer.token.endpoint.url as Kafka's client reads it — file:///path
    holds the token itself; http(s):// is an OAuth token endpoint asked for client credentials
    (clientId, clientSecret and scope from sasl.jaas.config's OAuthBearerLoginModule options)."""
    url = config.get("sasl.oauthbearer.token.endpoint.url")
    if url.startswith("file:"):
        path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as e:
            raise ConfigError(f"cannot read the OAUTHBEARER token file {path}: {e.strerror}") from None
    from urllib import error as url_error  # only a token endpoint needs them
    from urllib import request as url_request

    _, options = config.jaas
    client_id = options.get("clientId", config.get("sasl.oauthbearer.client.id"))
    secret = options.get("clientSecret", config.get("sasl.oauthbearer.client.secret"))
    if not client_id:
        raise ConfigError("OAUTHBEARER with a token endpoint needs clientId and clientSecret in sasl.jaas.config "
                          "(org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                          'clientId="..." clientSecret="...";)')
    body = {"grant_type": "client_credentials"}
    scope = options.get("scope", config.get("sasl.oauthbearer.scope"))
    if scope:
        body["scope"] = scope
    basic = base64.b64encode(f"{urllib.parse.quote(client_id)}:{urllib.parse.quote(secret)}".encode()).decode()
    req = url_request.Request(url, data=urllib.parse.urlencode(body).encode(), method="POST", headers={
        "Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json"})
    try:
        with url_request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())["access_token"]
    except (url_error.URLError, OSError, ValueError, KeyError) as e:
        raise SecurityError(f"no OAUTHBEARER token from {url}: {getattr(e, 'reason', None) or e!r}") from None


# ---------------------------------------------------------------------------------------------
# What a listener wants, when a plaintext connection was closed


def diagnose(host: str, port: int, timeout: float) -> str | None:
    """Why a listener closed a plaintext client's connection, as what to configure: it wants SASL
    (and which mechanisms) or TLS (and then maybe SASL too); None when it is neither."""
    where = _address(host, port)
    mechanisms = _sasl_mechanisms(host, port, timeout, None)
    if mechanisms is not None:
        return (f"{where} wants SASL authentication (mechanisms {', '.join(mechanisms) or 'none'}) and none is "
                f"configured: give --command-config FILE (or --set) with security.protocol=SASL_PLAINTEXT, "
                f"sasl.mechanism and sasl.jaas.config (or sasl.username and sasl.password)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # only to learn that it speaks TLS
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, ctx.wrap_socket(raw) as tls:
            tls.do_handshake()
    except (OSError, ssl.SSLError):
        return None
    mechanisms = _sasl_mechanisms(host, port, timeout, ctx)
    if mechanisms is not None:
        return (f"{where} speaks TLS and wants SASL authentication (mechanisms {', '.join(mechanisms) or 'none'}), "
                f"and neither is configured: give --command-config FILE (or --set) with security.protocol=SASL_SSL, "
                f"ssl.truststore.location, sasl.mechanism and sasl.jaas.config (or sasl.username and sasl.password)")
    return (f"{where} speaks TLS and this client does not: give --command-config FILE (or --set) with "
            f"security.protocol=SSL and ssl.truststore.location (the CA of its certificate)")


def _sasl_mechanisms(host: str, port: int, timeout: float, ctx: ssl.SSLContext | None) -> list[str] | None:
    """The mechanisms a SASL listener names in its SaslHandshake answer; None if it is not one."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            sock = ctx.wrap_socket(raw) if ctx is not None else raw
            header = RequestHeader(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_V, 1, "groupd-admin")
            sock.sendall(encode_request(header, build_request(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_V,
                                                              {"mechanism": "PLAIN"})))
            size = struct.unpack(">i", _read(sock, 4))[0]
            if not 0 < size < 1 << 16:
                return None
            _, r = decode_response(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_V, _read(sock, size))
    except Exception:  # closed, reset, not Kafka: not a SASL listener
        return None
    if r.error_code in (ErrorCode.none, ErrorCode.unsupported_sasl_mechanism):
        return list(r.mechanisms)
    return None


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
