"""Routes as data: what a route takes, what it answers, and the adapter that runs one on aiohttp.

A ``Route`` names its method and path, its handler, the pydantic model of its request body or
query string (at most one of them) and of its response, its success status and the error
statuses it can answer with. ``arroyo.api.routes.ROUTES`` lists them all, once; ``arroyo.api.app``
registers them on aiohttp from that list and ``arroyo.api.openapi`` documents them from it, so
the document cannot drift from what is served.

A handler is an ``async`` method of its owner (``arroyo.api.handlers.Api``) taking a ``Call``:
the aiohttp request and the validated body or query (``None`` when the route takes neither). It
returns a model of the route's response type (serialised with the route's status), ``None``
(for a 204), or a ``web.StreamResponse`` it prepared itself (server-sent events). It raises
``arroyo.api.errors.ApiError`` for anything the client should hear about.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from aiohttp import web
from pydantic import BaseModel, ValidationError

from arroyo.api.errors import BadRequestError

API_PREFIX = "/api/v1"
JSON = "application/json"
EVENT_STREAM = "text/event-stream"

Owner = TypeVar("Owner")
In = TypeVar("In")
Result = BaseModel | web.StreamResponse | None
AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Call(Generic[In]):
    """One request as a handler sees it."""

    request: web.Request
    # The validated body or query string; None for a route that takes neither.
    input: In

    def path(self, name: str) -> str:
        """A path parameter (``{pipeline_id}`` in the route's path)."""
        return self.request.match_info[name]


@dataclass(frozen=True, slots=True)
class Route(Generic[Owner, In]):
    method: str
    # Below API_PREFIX, with aiohttp/OpenAPI ``{name}`` parameters (no regular expressions).
    path: str
    handler: Callable[[Owner, Call[In]], Awaitable[Result]]
    summary: str
    tag: str
    body: type[In] | None = None
    query: type[In] | None = None
    # None: a free-form JSON object (the OpenAPI document) or, for EVENT_STREAM, the events.
    response: type[BaseModel] | None = None
    status: int = 200
    content_type: str = JSON
    # Beyond those every route of its shape has: 400 with a body or query, 404 with a path
    # parameter, and 500.
    errors: tuple[int, ...] = ()
    # Answered without an API key: the probes (``/ping``, ``/status``), which say whether the
    # services are up and nothing a key guards (as the services' admin ``/status`` do).
    public: bool = False

    def __post_init__(self) -> None:
        if self.body is not None and self.query is not None:
            raise ValueError(f"{self.method} {self.path}: a route takes a body or a query")

    @property
    def full_path(self) -> str:
        return API_PREFIX + self.path

    @property
    def operation_id(self) -> str:
        return self.handler.__name__

    @property
    def path_parameters(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    def bind(self, owner: Owner) -> AiohttpHandler:
        """The aiohttp handler running this route's handler on ``owner``."""

        async def handle(request: web.Request) -> web.StreamResponse:
            call = Call(request, await self._parse(request))
            return self._render(await self.handler(owner, call))

        return handle

    async def _parse(self, request: web.Request) -> In:
        if self.body is not None:
            model = cast(type[BaseModel], self.body)
            raw = await request.read()
            try:
                # Strict: JSON has types, and "3" for an integer is a client's mistake to hear
                # about rather than to guess at. An empty body is an empty object, so a POST
                # whose fields all have defaults needs none.
                return cast(In, model.model_validate_json(raw.strip() or b"{}", strict=True))
            except ValidationError as err:
                raise BadRequestError(describe(err, "body")) from err
        if self.query is not None:
            model = cast(type[BaseModel], self.query)
            try:
                return cast(In, model.model_validate(dict(request.query)))
            except ValidationError as err:
                raise BadRequestError(describe(err, "query")) from err
        return cast(In, None)

    def _render(self, result: Result) -> web.StreamResponse:
        if isinstance(result, web.StreamResponse):
            return result
        if result is None:
            return web.Response(status=self.status)
        if self.response is not None and not isinstance(result, self.response):
            raise TypeError(
                f"{self.operation_id} returned {type(result).__name__}, "
                f"its route declares {self.response.__name__}"
            )
        return web.Response(
            status=self.status, body=result.model_dump_json().encode(), content_type=JSON
        )


def describe(err: ValidationError, where: str) -> str:
    """Every problem pydantic found, each naming its field (``body.parallelism: ...``)."""
    problems = []
    for e in err.errors(include_url=False):
        field = ".".join([where, *(str(part) for part in e["loc"])])
        if e["type"] == "json_invalid":
            problems.append(f"the request body is not valid JSON ({e['ctx']['error']})")
        elif e["type"] == "extra_forbidden":
            problems.append(f"{field}: unknown field")
        elif e["type"] == "missing":
            problems.append(f"{field}: required")
        elif e["type"] == "model_type" and not e["loc"]:
            problems.append(f"the request {where} must be a JSON object")
        else:
            problems.append(f"{field}: {e['msg']}")
    return "; ".join(problems)
