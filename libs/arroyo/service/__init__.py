"""The service bootstrap: what every service's ``main`` calls (see ``bootstrap``)."""

from arroyo.service.bootstrap import (
    DEFAULT_GRACE_S,
    Listen,
    Readiness,
    RunningService,
    ServiceError,
    serve,
    start,
    store_ready,
    tracer_provider_for,
)

__all__ = [
    "DEFAULT_GRACE_S",
    "Listen",
    "Readiness",
    "RunningService",
    "ServiceError",
    "serve",
    "start",
    "store_ready",
    "tracer_provider_for",
]
