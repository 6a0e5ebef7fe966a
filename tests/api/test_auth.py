"""API keys (arroyo.api.auth): open on loopback until a key exists, then every /api/v1 call
needs one, by header or cookie; a revoked key is refused (at once here: the tests' api reads
the keys at every request, a deployed one every few seconds); the UI's files stay
served; a bind beyond loopback without a key is refused. The keys are made and kept as
``arroyo keys`` makes them, and the store never holds a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from arroyo.api.auth import COOKIE, NoApiKeyError, is_loopback, refuse_open_bind
from arroyo.api.webui import web_root
from arroyo.store.api_keys import new_api_key
from tests.api import error_of, running_api


async def _status(env: object, token: str | None = None, cookie: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cookies = {COOKIE: cookie} if cookie else None
    response = await env.client.get("/api/v1/pipelines", headers=headers, cookies=cookies)  # type: ignore[attr-defined]
    return int(response.status)


async def test_loopback_is_open_until_a_key_exists_then_every_call_needs_one(
    tmp_path: Path,
) -> None:
    async with running_api(tmp_path, keys_always=False, web_root=web_root()) as env:
        assert await _status(env) == 200
        key, token = new_api_key("ci")
        await env.store.create_api_key(key)

        response = await env.client.get("/api/v1/pipelines")
        message = await error_of(response, 401)
        assert "requires a key" in message and "arroyo keys create" in message
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert await _status(env, token) == 200
        assert await _status(env, cookie=token) == 200  # the web UI's way (an EventSource's)
        id_, _, secret = token.partition(".")
        for wrong in (f"{id_}.{secret[:-1]}x", f"key_nope.{secret}", secret, "Basic x"):
            assert await _status(env, wrong) == 401, wrong
        response = await env.client.get(
            "/api/v1/pipelines", headers={"Authorization": f"Bearer {id_}.x"}
        )
        assert "not accepted" in await error_of(response, 401)
        # The UI's files hold no data: served without a key (the page then asks for one).
        page = await env.client.get("/pipelines/pl_x")
        assert page.status == 200 and "Sign in" in await page.text()

        await env.store.revoke_api_key(key.id)
        assert await _status(env, token) == 401
        # Only the SHA-256 of the secret is stored.
        assert secret.encode() not in (tmp_path / "arroyo.db").read_bytes()


async def test_beyond_loopback_a_key_is_required_even_before_one_exists(tmp_path: Path) -> None:
    async with running_api(tmp_path, keys_always=True) as env:
        assert await _status(env) == 401
        # The probes answer without one (a load balancer, `arroyo cluster` waiting for ready),
        # and say so in the OpenAPI document; a probe's path with another method is guarded.
        for probe in ("/api/v1/ping", "/api/v1/status"):
            assert (await env.client.get(probe)).status == 200, probe
        assert (await env.client.post("/api/v1/status")).status in (401, 405)
        key, token = new_api_key("ci")
        await env.store.create_api_key(key)
        document = await (
            await env.client.get(
                "/api/v1/openapi.json", headers={"Authorization": f"Bearer {token}"}
            )
        ).json()
        status = document["paths"]["/api/v1/status"]["get"]
        assert status["security"] == [] and "401" not in status["responses"]
        assert "401" in document["paths"]["/api/v1/pipelines"]["get"]["responses"]


def test_a_bind_beyond_loopback_without_a_key_is_refused() -> None:
    key, _ = new_api_key("ci")
    for host in ("127.0.0.1", "::1", "localhost"):
        assert is_loopback(host)
        refuse_open_bind(host, [])
    for host in ("0.0.0.0", "", "::", "10.1.2.3"):
        assert not is_loopback(host)
        with pytest.raises(NoApiKeyError, match="arroyo keys create"):
            refuse_open_bind(host, [])
        refuse_open_bind(host, [key])


async def test_the_openapi_document_says_how_to_authenticate(tmp_path: Path) -> None:
    async with running_api(tmp_path) as env:
        doc = await (await env.client.get("/api/v1/openapi.json")).json()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schemes["apiKey"]["description"],
    }
    assert schemes["cookie"]["name"] == COOKIE
    # Every operation answers 401 without a key, but the probes, which need none.
    for path, operations in doc["paths"].items():
        for op in operations.values():
            public = path in ("/api/v1/ping", "/api/v1/status")
            assert ("401" in op["responses"]) != public, path
