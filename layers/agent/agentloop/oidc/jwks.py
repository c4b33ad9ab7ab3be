"""KeyCache: the issuer's signing keys, fetched at first use and refetched sparingly.

* The key set comes only from the configured JWKS URL, or the ``jwks_uri`` of the issuer's
  discovery document (which must be https or loopback http like the issuer): never from a
  token's header.
* An unknown ``kid`` (a rotation) triggers a refetch, at most one fetch per
  ``REFETCH_INTERVAL_S`` counted from the last fetch of any kind, so a flood of made-up kids
  costs the issuer one request a minute. A set older than ``MAX_AGE_S`` is refreshed at the
  next use (a key the issuer withdrew stops working), by one caller while the rest go on
  with the cached set.
* A failed fetch keeps the set already held. With no set ever loaded, the key set is
  unavailable: :class:`JwksUnavailable` (a deployment problem, a 503), never a pass, and the
  next attempt waits ``RETRY_UNAVAILABLE_S`` so a down issuer is not hammered.
* Thread-safe: ``_state`` guards the cached set and timestamps and is never held during a
  fetch; ``_fetching`` lets one fetch run at a time, and a caller that waited for it sees
  its result instead of fetching again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from agentloop.oidc.fetch import Fetch, FetchFailed
from agentloop.oidc.keys import LoadedKey, parse_jwks
from agentloop.oidc.settings import JwtSettings, check_url

logger = logging.getLogger(__name__)

REFETCH_INTERVAL_S = 60.0
RETRY_UNAVAILABLE_S = 5.0
MAX_AGE_S = 3600.0

Clock = Callable[[], float]


class KeyCache:
    """The verification keys by ``kid``; see the module docstring for when it fetches."""

    def __init__(self, settings: JwtSettings, fetch: Fetch, clock: Clock) -> None:
        self._settings = settings
        self._fetch = fetch
        self._clock = clock
        self._jwks_url = settings.jwks_url
        self._state = threading.Lock()
        self._fetching = threading.Lock()
        self._keys: dict[str, LoadedKey] | None = None
        self._loaded_at = 0.0
        self._attempted_at: float | None = None
        self._last_failure = "not fetched yet"

    def get(self, kid: str) -> LoadedKey | None:
        """The key for ``kid``, or None when the issuer does not (or no longer) publish it.

        Raises JwksUnavailable when no key set could ever be loaded.
        """
        with self._state:
            keys, stale = self._keys, self._clock() - self._loaded_at > MAX_AGE_S
        if keys is not None and kid in keys and not stale:
            return keys[kid]
        # A known kid in a stale set: refresh unless another caller is already doing so.
        self._refresh(wait=keys is None or kid not in keys)
        with self._state:
            keys, failure = self._keys, self._last_failure
        if keys is None:
            raise _unavailable(f"the issuer's signing keys are unavailable: {failure}")
        return keys.get(kid)

    def _refresh(self, *, wait: bool) -> None:
        """Fetch the set if one is due; one fetch at a time, no state lock held meanwhile."""
        if not self._fetching.acquire(blocking=wait):
            return
        try:
            with self._state:
                now = self._clock()
                if not self._due(now):
                    return
                self._attempted_at = now
            try:
                keys = self._download()
            except (FetchFailed, OSError) as exc:
                logger.warning("JWKS fetch failed (keeping any cached keys): %s", exc)
                with self._state:
                    self._last_failure = str(exc)
                return
            with self._state:
                self._keys, self._loaded_at = keys, now
        finally:
            self._fetching.release()

    def _due(self, now: float) -> bool:
        """Whether a fetch may start now (called with ``_state`` held)."""
        if self._attempted_at is None:
            return True
        interval = REFETCH_INTERVAL_S if self._keys is not None else RETRY_UNAVAILABLE_S
        return now - self._attempted_at >= interval

    def _download(self) -> dict[str, LoadedKey]:
        """Discovery (once, if no JWKS URL is configured), then the key set, in one budget."""
        deadline = time.monotonic() + self._settings.jwks_timeout_s
        if self._jwks_url is None:
            self._jwks_url = self._discover(deadline)
        body = self._fetch(self._jwks_url, _left(deadline))
        return parse_jwks(body, self._settings.algorithms)

    def _discover(self, deadline: float) -> str:
        """The ``jwks_uri`` of the issuer's OpenID Connect discovery document."""
        url = self._settings.discovery_url
        try:
            document = json.loads(self._fetch(url, _left(deadline)))
        except (ValueError, RecursionError):
            raise FetchFailed(f"{url} is not JSON") from None
        jwks_uri = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(jwks_uri, str):
            raise FetchFailed(f"{url} has no jwks_uri")
        from agentloop.config import ConfigurationError

        try:
            check_url(jwks_uri, f"the jwks_uri in {url}")
        except ConfigurationError as exc:
            raise FetchFailed(str(exc)) from None
        return jwks_uri


def _left(deadline: float) -> float:
    """Seconds left before ``deadline``; a spent budget is a failure, not a zero timeout."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchFailed("the JWKS fetch ran out of time")
    return left


def _unavailable(message: str) -> Exception:
    from agentloop.oidc.errors import JwksUnavailable

    return JwksUnavailable(message)
