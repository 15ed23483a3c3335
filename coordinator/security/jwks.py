"""The JWKS of `sasl.oauthbearer.jwks.endpoint.url` (file:, https: or http:): fetched once at
start-up (a failure stops it, one line), then again every `sasl.oauthbearer.jwks.endpoint.refresh.ms`
and when a token names a kid it does not hold — always on a worker thread, never on the event loop;
a failed refresh keeps the keys it has, as Kafka's RefreshingHttpsJwks does."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jwt

from groupd.coordinator.settings import ConfigError, Settings

log = logging.getLogger("groupd.security")
FETCH_TIMEOUT_S = 10
MIN_ON_DEMAND_S = 10.0  # an unknown kid asks for a refresh at most this often (a guesser must not drive fetches)


def fetch(url: str) -> dict[str, jwt.PyJWK]:
    """kid → key of the JWKS at `url`. Raises OSError or ValueError (one line)."""
    import urllib.request  # here, as PyJWT: only a server with an OAUTHBEARER listener needs them

    import jwt

    if urllib.parse.urlsplit(url).scheme not in ("file", "http", "https"):
        raise ValueError(f"{url} is not a file:, http: or https: URL")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:
        document = json.loads(response.read())
    try:
        keys = jwt.PyJWKSet.from_dict(document).keys
    except jwt.PyJWTError as e:
        raise ValueError(f"no usable key: {e}") from None
    return {key.key_id or "": key for key in keys}


class Jwks:
    def __init__(self, settings: Settings) -> None:
        self.url = settings.sasl_oauthbearer_jwks_endpoint_url
        self._refresh_s = settings.sasl_oauthbearer_jwks_endpoint_refresh_ms / 1000
        try:
            self._keys = fetch(self.url)
        except (OSError, ValueError) as e:
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: cannot load the JWKS {self.url}: {e}") from None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._fetching = False
        self._last_fetch = time.monotonic()

    def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key named `kid`; without a kid, the JWKS's only key. An unknown kid asks for a refresh."""
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        found = self._keys.get(kid)
        if found is None and time.monotonic() - self._last_fetch >= MIN_ON_DEMAND_S:
            self._refresh()
        return found

    def start(self) -> None:
        """Refresh periodically from now on (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self._refresh_s, self._periodic)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _periodic(self) -> None:
        self._refresh()
        self._timer = self._loop.call_later(self._refresh_s, self._periodic)

    def _refresh(self) -> None:
        if self._loop is None or self._fetching:
            return
        self._fetching = True
        self._last_fetch = time.monotonic()
        self._loop.run_in_executor(None, fetch, self.url).add_done_callback(self._fetched)

    def _fetched(self, future: asyncio.Future) -> None:
        self._fetching = False
        try:
            keys = future.result()
        except (OSError, ValueError) as e:
            log.warning("JWKS refresh failed url=%s, keeping %d keys: %s", self.url, len(self._keys), e)
            return
        if keys.keys() != self._keys.keys():
            log.info("JWKS refreshed url=%s kids=%s", self.url, ",".join(sorted(keys)))
        self._keys = keys
