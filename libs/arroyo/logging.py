"""Structured logging for every process: key/value events on stderr (JSON when asked).

Events are constant names with context as keys (``log.info("job_started", job_id=...)``). Context
bound with ``structlog.contextvars.bind_contextvars`` (the service bootstrap binds ``service``)
and the ids of the OpenTelemetry span current at the call (``trace_id``, ``span_id``) are added
to every event, so one grep over all the services' logs follows one request.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO, cast

import structlog
from opentelemetry import trace


def configure_logging(level: str = "warning", json: bool = False) -> None:
    """Standard output is reserved for pipeline output (a bare SELECT prints there).

    Called once per process, first thing in its entry point (the CLI, or
    ``arroyo.service.serve``); calling it again replaces the configuration.
    """
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
        _add_trace_context,
    ]
    if json:
        # The console renderer formats exc_info itself; JSON needs it turned into a string.
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
    )


class _CurrentStderr:
    """Whatever ``sys.stderr`` is at the time of each write: a configuration outlives the stream
    it was made under when something (pytest's capture, a daemonising parent) swaps it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _add_trace_context(
    _logger: Any, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event
