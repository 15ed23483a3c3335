"""TLS for SSL and SASL_SSL listeners: the server's SSLContext from the ssl.* settings, and the
principal of a client certificate as Kafka's default principal builder writes it."""

from __future__ import annotations

import ssl

from groupd.coordinator.settings import ConfigError, Settings

ANONYMOUS = "User:ANONYMOUS"

# Java's X500Principal.getName(RFC2253) keywords; other attributes keep OpenSSL's name
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(settings: Settings, protocol: str) -> ssl.SSLContext:
    """The context of an SSL (`protocol` "SSL") or SASL_SSL listener. On SASL_SSL the client
    certificate is not asked for: Kafka applies an unprefixed ssl.client.auth to SSL listeners only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(settings.ssl_enabled_protocols)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2 if versions[0] == "TLSv1.2" else ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3 if versions[-1] == "TLSv1.3" else ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    try:
        ctx.load_cert_chain(settings.ssl_keystore_location, password=settings.ssl_key_password or None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"ssl.keystore.location={settings.ssl_keystore_location!r} cannot be loaded (a PEM file "
                          f"with the private key and the certificate chain; ssl.key.password if encrypted): "
                          f"{getattr(e, 'strerror', None) or e}") from None
    if settings.ssl_cipher_suites:
        try:
            ctx.set_ciphers(settings.ssl_cipher_suites)
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites={settings.ssl_cipher_suites!r} names no usable cipher") from None
    if settings.ssl_truststore_location:
        try:
            ctx.load_verify_locations(cafile=settings.ssl_truststore_location)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"ssl.truststore.location={settings.ssl_truststore_location!r} cannot be loaded "
                              f"(a PEM CA bundle): {getattr(e, 'strerror', None) or e}") from None
    ctx.verify_mode = _VERIFY[settings.ssl_client_auth] if protocol == "SSL" else ssl.CERT_NONE
    return ctx


def _escape(value: str) -> str:
    """RFC 2253 §2.4."""
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def certificate_principal(peercert: dict | None) -> str:
    """`User:` + the subject in RFC 2253 order (most specific RDN first), or User:ANONYMOUS
    without a certificate."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    rdns = ["+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(peercert["subject"])]
    return "User:" + ",".join(rdns)
