"""Structured logging for every process: key/value events on stderr (JSON when asked)."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "warning", json: bool = False) -> None:
    """Standard output is reserved for pipeline output (a bare SELECT prints there)."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
