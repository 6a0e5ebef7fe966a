"""The server interceptor every Arroyo gRPC server runs (``arroyo.service`` installs it).

Per call it: continues the caller's trace (W3C ``traceparent`` from the metadata) with a SERVER
span named after the rpc and current while the servicer runs; answers an ``ArroyoError`` the
servicer raises with the status ``arroyo.rpc.status.status_for`` picks and the error's code,
domain and retry hint in trailing metadata; answers any other exception with INTERNAL (code
``internal``) after logging it, so a bug reaches the caller as data rather than as an opaque
UNKNOWN; and counts the call in ``arroyo_rpc_server_handled_total`` and
``arroyo_rpc_server_handling_seconds``. Servicers are ``async def`` methods (unary responses) or
async generators (streamed responses); they raise, and never call ``context.abort`` for errors
of ours (they may for anything else, and the status they set is recorded).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import structlog
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from prometheus_client import Counter, Histogram

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.rpc.channel import method_name, record_status, rpc_attributes
from arroyo.rpc.status import error_metadata, status_for

log = structlog.get_logger(__name__)

_HANDLED = Counter(
    "arroyo_rpc_server_handled",
    "RPCs this process answered, by method and gRPC status code.",
    ["grpc_service", "grpc_method", "grpc_code"],
)
_HANDLING = Histogram(
    "arroyo_rpc_server_handling_seconds",
    "Time from an RPC's arrival to its last response, by method.",
    ["grpc_service", "grpc_method"],
)

_TRACER_NAME = "arroyo.rpc"

Behaviour = Callable[[Any, Any], Any]


# grpc ships no type information, so its ServerInterceptor is Any to mypy; grpc.aio insists on
# instances of it.
class ServerInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Tracing, error translation and metrics around every servicer method; see the module."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler is None:
            # No such method: grpc answers UNIMPLEMENTED itself.
            return None
        name = method_name(details.method)
        options = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(name, handler.unary_unary), **options
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap(name, handler.unary_stream), **options
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._wrap(name, handler.stream_unary), **options
            )
        return grpc.stream_stream_rpc_method_handler(
            self._wrap(name, handler.stream_stream), **options
        )

    def _wrap(self, name: str, behaviour: Behaviour) -> Behaviour:
        if inspect.isasyncgenfunction(behaviour):

            async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
                async with self._serving(name, context):
                    async for response in behaviour(request, context):
                        yield response

            return streaming

        async def unary(request: Any, context: Any) -> Any:
            async with self._serving(name, context):
                result = behaviour(request, context)
                if inspect.isawaitable(result):
                    result = await result
                return result

        return unary

    @asynccontextmanager
    async def _serving(self, name: str, context: Any) -> AsyncIterator[None]:
        parent = propagate.extract(_metadata(context.invocation_metadata()))
        service, _, rpc = name.partition("/")
        started = time.perf_counter()
        status: Any = grpc.StatusCode.UNKNOWN
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=rpc_attributes(name),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                try:
                    yield
                except ArroyoError as err:
                    status = status_for(err)
                    span.record_exception(err)
                    # Our own failures deserve attention; a user's bad request is routine.
                    emit = log.warning if err.domain == ErrorDomain.INTERNAL else log.info
                    emit(
                        "rpc_error",
                        method=name,
                        code=err.code,
                        domain=str(err.domain),
                        retryable=err.retryable,
                        status=status.name,
                        message=err.message,
                    )
                    await context.abort(status, err.message, trailing_metadata=error_metadata(err))
                except grpc.aio.AbortError:
                    # The servicer aborted with a status of its own choosing.
                    status = context.code() or grpc.StatusCode.UNKNOWN
                    raise
                except (asyncio.CancelledError, GeneratorExit):
                    status = grpc.StatusCode.CANCELLED
                    raise
                except Exception as err:
                    status = grpc.StatusCode.INTERNAL
                    span.record_exception(err)
                    log.exception("rpc_failed", method=name)
                    bug = ArroyoError(f"{type(err).__name__}: {err}")
                    await context.abort(status, bug.message, trailing_metadata=error_metadata(bug))
                else:
                    status = context.code() or grpc.StatusCode.OK
            finally:
                record_status(span, status)
                _HANDLED.labels(service, rpc, status.name).inc()
                _HANDLING.labels(service, rpc).observe(time.perf_counter() - started)


def _metadata(pairs: Any) -> dict[str, str]:
    return {
        key: value.decode() if isinstance(value, bytes) else value
        for key, value in (pairs or ())
        # Binary entries (``-bin``) never carry trace context.
        if not key.endswith("-bin")
    }
