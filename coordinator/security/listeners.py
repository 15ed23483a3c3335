"""What each listener demands of its connections (listener.security.protocol.map): TLS, SASL, both
or neither, and the address its clients are told (advertised.listeners); plus the one place where
authentication outcomes become log lines and metrics."""

from __future__ import annotations

import dataclasses
import logging
import socket
import ssl
import time

from groupd.coordinator.observability import metrics
from groupd.coordinator.observability.log_limit import LimitedLog
from groupd.coordinator.settings import Listener, Settings

from .jwks import Jwks
from .oauthbearer import OAuthConfig
from .sasl import Users
from .tls import server_context

log = logging.getLogger("groupd.security")
failure_log = LimitedLog(log, "authentication-failed")  # a password guesser fails thousands of times


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    name: str  # the listener name: INTERNAL, EXTERNAL, ...
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    advertised: Listener  # what clients of this listener are told in Metadata and FindCoordinator
    ssl: ssl.SSLContext | None
    users: Users | None  # SASL listeners only
    oauth: OAuthConfig | None = None  # SASL listeners with OAUTHBEARER enabled

    @property
    def sasl(self) -> bool:
        return self.users is not None

    def bound(self, port: int) -> Endpoint:
        """An advertised port 0 becomes the port bound; an empty host the machine's host name."""
        adv = self.advertised
        if adv.port and adv.host:
            return self
        adv = Listener(adv.name, adv.host or socket.getfqdn(), adv.port or port)
        return dataclasses.replace(self, advertised=adv)


def endpoints(settings: Settings, jwks: Jwks | None = None) -> list[Endpoint]:
    """One Endpoint per listener, in listeners order. Raises ConfigError (keystore, truststore).
    `jwks`: the keys OAUTHBEARER tokens are checked with (oauth_jwks)."""
    users = oauth = None
    if any(settings.security_protocol(l.name).startswith("SASL_") for l in settings.listeners):
        users = Users(settings.sasl_users, settings.sasl_enabled_mechanisms)  # SCRAM derivation: once
        if jwks is not None:
            oauth = OAuthConfig(jwks.key, time.time, settings.sasl_oauthbearer_expected_audience,
                                settings.sasl_oauthbearer_expected_issuer, settings.sasl_oauthbearer_sub_claim_name,
                                settings.sasl_oauthbearer_scope_claim_name,
                                settings.sasl_oauthbearer_clock_skew_seconds)
    contexts: dict[str, ssl.SSLContext] = {}
    out = []
    for listener in settings.listeners:
        protocol = settings.security_protocol(listener.name)
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            context = contexts.get(protocol) or contexts.setdefault(protocol, server_context(settings, protocol))
        out.append(Endpoint(listener.name, protocol, settings.advertised_for(listener.name), context,
                            users if protocol.startswith("SASL_") else None,
                            oauth if protocol.startswith("SASL_") else None))
    return out


def oauth_jwks(settings: Settings) -> Jwks | None:
    """The JWKS when a SASL listener offers OAUTHBEARER (fetched now: ConfigError if it cannot be)."""
    if "OAUTHBEARER" in settings.sasl_enabled_mechanisms and any(
            settings.security_protocol(l.name).startswith("SASL_") for l in settings.listeners):
        return Jwks(settings)
    return None


def authenticated(endpoint: Endpoint, mechanism: str, peer: str, principal: str, reauthentication: bool) -> None:
    metrics.authentication(endpoint.name, mechanism, "reauthenticated" if reauthentication else "success")
    log.debug("authenticated peer=%s listener=%s mechanism=%s principal=%s", peer, endpoint.name, mechanism,
              principal)


def authentication_failed(endpoint: Endpoint, mechanism: str, peer: str, reason: str, detail: str) -> None:
    metrics.authentication(endpoint.name, mechanism, reason)
    failure_log.log(logging.INFO, "authentication failed peer=%s listener=%s mechanism=%s reason=%s: %s",
                    peer, endpoint.name, mechanism, reason, detail)
