"""Test certificates made with the openssl CLI: a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate the CA signed, and a client certificate of a CA groupd does not trust."""

from __future__ import annotations

import dataclasses
import os
import subprocess

CLIENT_SUBJECT = "/C=US/O=Example Corp/OU=Payments/CN=alice"
CLIENT_PRINCIPAL = "User:CN=alice,OU=Payments,O=Example Corp,C=US"  # Kafka's RFC 2253 rendering


@dataclasses.dataclass(frozen=True)
class Certificates:
    dir: str

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    ca = property(lambda self: self.path("ca.pem"))  # the CA certificate (clients' and groupd's truststore)
    server_keystore = property(lambda self: self.path("server-keystore.pem"))  # key + chain
    client_cert = property(lambda self: self.path("client.pem"))
    client_key = property(lambda self: self.path("client-key.pem"))
    client_keystore = property(lambda self: self.path("client-keystore.pem"))  # key + cert (Java PEM keystore)
    untrusted_cert = property(lambda self: self.path("untrusted.pem"))
    untrusted_key = property(lambda self: self.path("untrusted-key.pem"))


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _signed(cwd: str, name: str, subject: str, ca: str, extensions: str) -> None:
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem", "-subj", subject,
             "-out", f"{name}.csr", cwd=cwd)
    with open(os.path.join(cwd, f"{name}.ext"), "w") as f:
        f.write(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}-key.pem",
             "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=cwd)


def make(directory: str) -> Certificates:
    os.makedirs(directory, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}-key.pem", "-out", f"{ca}.pem",
                 "-days", "2", "-subj", f"/CN=groupd test {ca}", cwd=directory)
    _signed(directory, "server", "/CN=localhost", "ca",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "client", CLIENT_SUBJECT, "ca", "extendedKeyUsage=clientAuth\n")
    _signed(directory, "untrusted", "/CN=mallory", "other-ca", "extendedKeyUsage=clientAuth\n")
    certs = Certificates(directory)
    for keystore, key, cert in ((certs.server_keystore, "server-key.pem", "server.pem"),
                                (certs.client_keystore, "client-key.pem", "client.pem")):
        with open(keystore, "w") as out:
            for part in (key, cert):  # openssl req writes PKCS#8 keys, as Kafka's PEM keystore wants
                with open(os.path.join(directory, part)) as f:
                    out.write(f.read())
    return certs
