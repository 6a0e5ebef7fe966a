"""The service bootstrap: what every service's ``main`` calls (see ``bootstrap``)."""

from arroyo.service.bootstrap import (
    DEFAULT_GRACE_S,
    Listen,
    Readiness,
    RunningService,
    ServiceError,
    serve,
    start,
    tracer_provider_for,
)
from arroyo.service.readiness import store_ready

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
