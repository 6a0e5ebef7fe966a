"""API keys: who may call ``/api/v1``.

A key is ``<id>.<secret>``: the id (``key_...``) names the stored key, the secret is 32 random
bytes (URL-safe base64) of which the store keeps only the SHA-256; or the secret alone, for the
key a deployment sets in ``api.bootstrap_key``. A request carries it as
``Authorization: Bearer <key>``, or in the ``arroyo_key`` cookie (the web UI's sign-in sets
it: an EventSource, which streams a preview's rows, cannot send a header). The cookie is
``SameSite=Strict``, so no other site's page can make a browser send it.

When keys are required: always when the api listens on anything but loopback (it refuses to
start there without a key), and on loopback once any key was made (revoked or not: revoking
the last key locks the api, it does not open it), so that ``arroyo cluster`` on a laptop needs
no set-up until its owner creates a key. The keys are read from the store
every ``REFRESH_S``, so a key created or revoked by ``arroyo keys`` takes effect within that
time, on every replica of the api.

Only ``/api/v1`` is guarded, and not its probes, ``GET /api/v1/ping`` and ``/api/v1/status``
(whether the services are up: what a load balancer and ``arroyo cluster`` ask, with no key).
The UI's files hold no data (they call the API like any client), and the services' admin ports
(``/status``, ``/metrics``) stay readable by monitoring without a key, as documented.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import time
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from arroyo.api.models import ErrorBody
from arroyo.api.routing import API_PREFIX, JSON
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.store.api_keys import BOOTSTRAP_ID, secret_digest
from arroyo.store.model import ApiKey, Store

COOKIE = "arroyo_key"
REFRESH_S = 2.0


class NoApiKeyError(ArroyoError):
    code = "no_api_key"
    domain = ErrorDomain.USER


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) is this machine only."""
    if host == "localhost":
        return True
    if not host:  # every interface
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in socket.getaddrinfo(host, None)
            )
        except (OSError, ValueError):
            return False


def refuse_open_bind(host: str, keys: list[ApiKey]) -> None:
    """Raise NoApiKeyError when the api would listen beyond loopback with no key to require."""
    if is_loopback(host) or any(k.revoked_at is None for k in keys):
        return
    raise NoApiKeyError(
        f"the api listens on {host!r}, beyond this machine, and no API key exists: create one "
        "with `arroyo keys create --name NAME` (it is printed once and stored hashed), then "
        "send it as 'Authorization: Bearer <key>'; or set one in api.bootstrap_key "
        "(ARROYO__API__BOOTSTRAP_KEY); or bind the api to 127.0.0.1 (api.bind_host)"
    )


@dataclass
class KeyRing:
    """The store's active keys, read again every ``refresh_s``."""

    store: Store
    always: bool  # keys are required even when none exists (a bind beyond loopback)
    refresh_s: float = REFRESH_S  # how long the keys read are trusted
    _keys: dict[str, str] | None = None  # id -> secret's digest, of the keys not revoked
    _any: bool = False  # whether any key was ever made (revoked ones too)
    _read_at: float = 0.0

    async def keys(self) -> dict[str, str]:
        if self._keys is None or time.monotonic() - self._read_at >= self.refresh_s:
            stored = await self.store.list_api_keys()
            self._keys = {k.id: k.secret_sha256 for k in stored if k.revoked_at is None}
            self._any = bool(stored)
            self._read_at = time.monotonic()
        return self._keys

    async def check(self, token: str | None) -> str | None:
        """None when ``token`` may pass, else why not. Once a key was made, keys are required
        for good: revoking the last one locks the api rather than opening it."""
        keys = await self.keys()
        if not self._any and not self.always:
            return None
        if not token:
            return (
                "this API requires a key: send 'Authorization: Bearer <key>' "
                "(create one with `arroyo keys create --name NAME`)"
            )
        key_id, dot, secret = token.partition(".")
        if not dot:  # api.bootstrap_key's token: the secret alone
            key_id, secret = BOOTSTRAP_ID, token
        digest = keys.get(key_id)
        if digest is None or not hmac.compare_digest(digest, secret_digest(secret)):
            return "the API key was not accepted: it is unknown, revoked or mistyped"
        return None


def _token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(COOKIE) or None


def auth_middleware(ring: KeyRing, public: frozenset[str] = frozenset()) -> Middleware:
    """Guards ``/api/v1`` but the GET ``public`` paths (the probes)."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "GET" and request.path in public:
            return await handler(request)
        if request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/"):
            refused = await ring.check(_token(request))
            if refused is not None:
                return web.Response(
                    status=401,
                    body=ErrorBody(error=refused).to_json(),
                    content_type=JSON,
                    headers={"WWW-Authenticate": 'Bearer realm="arroyo"'},
                )
        return await handler(request)

    return authenticate
