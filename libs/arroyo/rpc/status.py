"""The one place gRPC status codes and ArroyoErrors are translated into each other.

Server side: an ``ArroyoError`` escaping a servicer becomes a status (``status_for``) plus
trailing metadata carrying its ``code``, ``domain`` and ``retryable`` (``error_metadata``); the
server interceptor (``arroyo.rpc.server``) applies both. Client side: ``translate`` rebuilds an
``RpcError`` from a failed call, from that metadata when the peer is ours and from the status
alone otherwise, so callers match on ``code`` exactly as if the error had been raised locally.
``call`` wraps one awaited stub call with that translation; the facades in
``arroyo.rpc.clients`` use it for every rpc.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import grpc
import grpc.aio

from arroyo.errors import ArroyoError, ErrorDomain

T = TypeVar("T")

ERROR_CODE_KEY = "arroyo-error-code"
ERROR_DOMAIN_KEY = "arroyo-error-domain"
ERROR_RETRYABLE_KEY = "arroyo-error-retryable"

# Codes an ArroyoError may carry that have a gRPC status of their own.
NOT_FOUND = "not_found"
STALE_GENERATION = "stale_generation"
UNAVAILABLE = "unavailable"

# What a status means when the peer sent no Arroyo metadata (it is not ours, or the failure
# happened in transport): (code, domain, retryable).
_BY_STATUS: dict[Any, tuple[str, ErrorDomain, bool]] = {
    grpc.StatusCode.UNAVAILABLE: (UNAVAILABLE, ErrorDomain.EXTERNAL, True),
    grpc.StatusCode.DEADLINE_EXCEEDED: (UNAVAILABLE, ErrorDomain.EXTERNAL, True),
    grpc.StatusCode.RESOURCE_EXHAUSTED: ("resource_exhausted", ErrorDomain.EXTERNAL, True),
    grpc.StatusCode.CANCELLED: ("cancelled", ErrorDomain.EXTERNAL, True),
    grpc.StatusCode.NOT_FOUND: (NOT_FOUND, ErrorDomain.USER, False),
    grpc.StatusCode.INVALID_ARGUMENT: ("invalid_argument", ErrorDomain.USER, False),
}


class RpcError(ArroyoError):
    """An error a remote call ended with, rebuilt on the caller's side.

    ``code``, ``domain`` and ``retryable`` are the remote ``ArroyoError``'s when the peer is an
    Arroyo service; ``status`` is the gRPC status code the call ended with (a
    ``grpc.StatusCode``). Raised by every facade method in ``arroyo.rpc.clients``; raised
    again from a servicer it keeps its code, domain and retry hint across the next hop.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        domain: ErrorDomain,
        retryable: bool,
        status: Any,
    ) -> None:
        super().__init__(message, code=code)
        self.domain = domain
        self.retryable = retryable
        self.status = status


def status_for(err: ArroyoError) -> Any:
    """The ``grpc.StatusCode`` a servicer's ``err`` is answered with."""
    if err.code == NOT_FOUND:
        return grpc.StatusCode.NOT_FOUND
    if err.code == STALE_GENERATION:
        return grpc.StatusCode.FAILED_PRECONDITION
    if err.domain == ErrorDomain.USER:
        return grpc.StatusCode.INVALID_ARGUMENT
    if err.domain == ErrorDomain.EXTERNAL and err.retryable:
        return grpc.StatusCode.UNAVAILABLE
    return grpc.StatusCode.INTERNAL


def error_metadata(err: ArroyoError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata that lets ``translate`` rebuild ``err`` exactly on the caller's side."""
    return (
        (ERROR_CODE_KEY, err.code),
        (ERROR_DOMAIN_KEY, str(err.domain)),
        (ERROR_RETRYABLE_KEY, "true" if err.retryable else "false"),
    )


def translate(err: grpc.aio.AioRpcError) -> RpcError:
    """The ``RpcError`` a failed call stands for; see the module docstring for the rules."""
    status = err.code()
    message = err.details() or status.name
    sent = _metadata(err.trailing_metadata())
    if ERROR_CODE_KEY in sent:
        try:
            domain = ErrorDomain(sent.get(ERROR_DOMAIN_KEY, ErrorDomain.INTERNAL))
        except ValueError:
            domain = ErrorDomain.INTERNAL
        return RpcError(
            message,
            code=sent[ERROR_CODE_KEY],
            domain=domain,
            retryable=sent.get(ERROR_RETRYABLE_KEY) == "true",
            status=status,
        )
    code, domain, retryable = _BY_STATUS.get(
        status, (status.name.lower(), ErrorDomain.INTERNAL, False)
    )
    return RpcError(message, code=code, domain=domain, retryable=retryable, status=status)


async def call(awaitable: Awaitable[T]) -> T:
    """Await one stub call; a failed call raises its ``RpcError`` (``from`` the gRPC error)."""
    try:
        return await awaitable
    except grpc.aio.AioRpcError as err:
        raise translate(err) from err


def _metadata(pairs: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in pairs or ():
        out[key] = value.decode() if isinstance(value, bytes) else value
    return out
