"""What the REST API answers with when a request cannot be served, and the one mapping from
errors to HTTP statuses.

Handlers raise ``ApiError`` subclasses; the error middleware (``arroyo.api.app``) turns them,
the store's errors and aiohttp's own ``HTTPException`` s into ``{"error": ...}`` bodies with the
status ``http_status`` picks. Anything else is a bug: a 500 with a generic message, logged.
"""

from __future__ import annotations

from arroyo.api.models import Diagnostic
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.rpc import RpcError
from arroyo.store.errors import Conflict, NotFound, StoreError
from arroyo.store.model import ConnectionProfileId, JobId, PipelineId


class ApiError(ArroyoError):
    """An error with the HTTP status it is answered with."""

    status: int = 500


class BadRequestError(ApiError):
    """Bad JSON, a body or query string its model refuses, an id that cannot be a cursor."""

    status = 400
    code = "bad_request"
    domain = ErrorDomain.USER


class InvalidQueryError(BadRequestError):
    """The SQL (or its UDFs) did not compile; the diagnostics say where."""

    code = "invalid_query"

    def __init__(self, message: str, diagnostics: list[Diagnostic]) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class ResourceNotFoundError(ApiError):
    status = 404
    code = "not_found"
    domain = ErrorDomain.USER

    @classmethod
    def pipeline(cls, pipeline_id: PipelineId | str) -> ResourceNotFoundError:
        return cls(f"pipeline {pipeline_id} does not exist")

    @classmethod
    def job(cls, pipeline_id: PipelineId | str, job_id: JobId | str) -> ResourceNotFoundError:
        return cls(f"job {job_id} does not exist in pipeline {pipeline_id}")

    @classmethod
    def connection_profile(cls, profile_id: ConnectionProfileId | str) -> ResourceNotFoundError:
        return cls(f"connection profile {profile_id} does not exist")


class StateConflictError(ApiError):
    """The request contradicts the state the pipeline is in (deleting a running one), or a
    connection profile of that name exists."""

    status = 409
    code = "conflict"
    domain = ErrorDomain.USER


class ServiceUnavailableError(ApiError):
    """Another service (compiler, controller) or the database cannot be reached now."""

    status = 503
    code = "unavailable"
    domain = ErrorDomain.EXTERNAL
    retryable = True


class UpstreamFailedError(ApiError):
    """Another service answered with an error that retrying will not fix."""

    status = 502
    code = "upstream_failed"
    domain = ErrorDomain.EXTERNAL


def from_rpc(service: str, err: RpcError) -> ApiError:
    """The ApiError a failed call to ``service`` (``"compiler"``, ``"controller"``) becomes."""
    if err.retryable:
        return ServiceUnavailableError(f"the {service} is unavailable: {err.message}")
    return UpstreamFailedError(f"the {service} failed ({err.code}): {err.message}")


def http_status(err: ArroyoError) -> int:
    """The status an error of ours is answered with; 500 for those no client can act on."""
    if isinstance(err, ApiError):
        return err.status
    if isinstance(err, NotFound):
        # A row that went away between the handler's look-up and its change.
        return 404
    if isinstance(err, Conflict):
        return 409
    if isinstance(err, StoreError) and err.retryable:
        return 503
    if isinstance(err, RpcError):
        return from_rpc("service", err).status
    return 500
