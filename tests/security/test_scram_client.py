"""The SCRAM client brokers authenticate to each other with (coordinator/security/scram.py
ScramClient), without sockets: RFC 7677's example byte for byte, an exchange with groupd's own server
for both mechanisms and a name that needs escaping, and the servers it refuses to trust."""

import base64

import pytest

from groupd.coordinator.security.scram import ScramClient, ScramError, ScramServer, derive

RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"


def test_rfc_7677_example():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(RFC_SERVER_FIRST) == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                              b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_exchange_with_groupds_server(mechanism):
    users = {"broker,a=b": derive(mechanism, "secret")}
    server = ScramServer(mechanism, users.get)
    client = ScramClient(mechanism, "broker,a=b", "secret")
    server_first, _ = server.respond(client.first())
    server_final, done = server.respond(client.final(server_first))
    assert done and server.user == "broker,a=b"
    client.verify(server_final)


@pytest.mark.parametrize("server_first, why", [
    (b"r=someone-elses,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),  # not extended
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024", "iterations"),
    # a count that would hold the event loop in pbkdf2 for minutes
    (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000000000", "iterations"),
    (b"r=rOprNGfwEbeRWgbNEkqOx,i=4096", "salt"),
])
def test_a_server_it_cannot_trust_is_refused(server_first, why):
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    client.first()
    with pytest.raises(ScramError, match=why):
        client.final(server_first)
