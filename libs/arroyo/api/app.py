"""The api service's aiohttp application: the routes of ``arroyo.api.routes``, JSON errors for
every failure, and optionally the web UI's files.

Errors: every response with a 4xx or 5xx status has the body ``{"error": "<message>"}``
(``arroyo.api.models.ErrorBody``), whether a handler raised it, aiohttp's router refused the
request (404, 405) or the request was too large (413). An exception that is not one of ours is
logged with its traceback and answered with a 500 whose message reveals nothing of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import Counter, Gauge

from arroyo.api.auth import KeyRing, auth_middleware
from arroyo.api.errors import InvalidQueryError, http_status
from arroyo.api.handlers import COMPILER_WAIT_S, Api
from arroyo.api.models import ErrorBody
from arroyo.api.openapi import openapi_document
from arroyo.api.routes import ROUTES
from arroyo.api.routing import API_PREFIX, JSON
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.rpc import CompilerClient, ControllerClient
from arroyo.store.model import Store

log = structlog.get_logger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error; the api's log has the details"


class WebRootError(ArroyoError):
    code = "bad_web_root"
    domain = ErrorDomain.USER


def create_app(
    store: Store,
    compiler: CompilerClient,
    controller: ControllerClient,
    *,
    web_root: Path | None = None,
    compiler_wait_s: float = COMPILER_WAIT_S,
    keys: KeyRing | None = None,
) -> web.Application:
    """The application serving ``/api/v1`` over ``store`` and the two clients.

    Call it on the event loop that will run the application (the clients are bound to it). The
    caller keeps ownership of the store and the clients and closes them after the application
    has shut down. With ``web_root``, a directory with the UI's ``index.html`` (else
    ``WebRootError``), its files are served from ``/``, and any other path outside ``/api/``
    that names no file gets ``index.html``, so the UI can route its own paths.
    ``compiler_wait_s``: how long a request that compiles waits for a compiler that does not
    answer (one still starting) before it is a 503. With ``keys``, ``/api/v1`` requires an
    API key when they say so (``arroyo.api.auth``); without, it is open (tests, a caller that
    guards it itself).
    """
    middlewares: list[Any] = [metrics_middleware, error_middleware]
    if keys is not None:
        public = frozenset(r.full_path for r in ROUTES if r.public and r.method == "GET")
        middlewares.append(auth_middleware(keys, public))
    app = web.Application(middlewares=middlewares)
    api = Api(
        store,
        compiler,
        controller,
        openapi=openapi_document(ROUTES),
        compiler_wait_s=compiler_wait_s,
    )
    for route in ROUTES:
        app.router.add_route(route.method, route.full_path, route.bind(api))

    async def drain(_app: web.Application) -> None:
        api.draining.set()

    app.on_shutdown.append(drain)
    if web_root is not None:
        _serve_web_root(app, web_root)
    return app


_IN_FLIGHT = Gauge("arroyo_api_requests_in_flight", "HTTP requests the api is answering")
_HANDLED = Counter(
    "arroyo_api_requests_total",
    "HTTP requests the api answered, by method, route and status",
    ["method", "route", "code"],
)


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counts requests in flight (what a drain waits for) and answered, per route pattern."""
    _IN_FLIGHT.inc()
    code = 500
    try:
        response = await handler(request)
        code = response.status
        return response
    except web.HTTPException as err:
        code = err.status
        raise
    finally:
        _IN_FLIGHT.dec()
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        _HANDLED.labels(request.method, route, str(code)).inc()


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400:
            raise
        message = f"{err.reason}: {request.method} {request.path}"
        if isinstance(err, web.HTTPMethodNotAllowed):
            message += f"; allowed: {', '.join(sorted(err.allowed_methods))}"
        headers = {k: v for k, v in err.headers.items() if k.lower() == "allow"}
        return _error(err.status, ErrorBody(error=message), headers)
    except ArroyoError as err:
        status = http_status(err)
        if status == 500:
            log.exception(
                "api_request_failed", method=request.method, path=request.path, code=err.code
            )
            return _error(status, ErrorBody(error=INTERNAL_ERROR_MESSAGE))
        if status >= 500:
            # Another service or the database is down or failing: theirs to log in detail.
            log.warning(
                "api_upstream_error",
                method=request.method,
                path=request.path,
                code=err.code,
                error=err.message,
            )
        diagnostics = err.diagnostics if isinstance(err, InvalidQueryError) else None
        return _error(status, ErrorBody(error=err.message, diagnostics=diagnostics))
    except Exception:
        log.exception("api_request_failed", method=request.method, path=request.path)
        return _error(500, ErrorBody(error=INTERNAL_ERROR_MESSAGE))


def _error(status: int, body: ErrorBody, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=body.to_json(),
        content_type=JSON,
        headers=headers,
    )


def _serve_web_root(app: web.Application, web_root: Path) -> None:
    root = web_root.resolve()
    index = root / "index.html"
    if not index.is_file():
        raise WebRootError(f"web root {web_root} has no index.html")

    async def serve(request: web.Request) -> web.StreamResponse:
        if request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/"):
            raise web.HTTPNotFound()
        tail = request.match_info["tail"]
        if tail:
            candidate = (root / tail).resolve()
            if candidate.is_relative_to(root) and candidate.is_file():
                return web.FileResponse(candidate)
            if "." in tail.rsplit("/", 1)[-1]:
                # A missing asset (app.js, logo.png) is a 404, not the UI's page.
                raise web.HTTPNotFound()
        return web.FileResponse(index)

    app.router.add_get("/{tail:.*}", serve)
