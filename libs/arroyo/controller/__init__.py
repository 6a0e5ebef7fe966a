"""The controller: job state machines, scheduling onto nodes, heartbeats, recovery."""

from arroyo.controller.controller import Controller, StaleGenerationError

__all__ = ["Controller", "StaleGenerationError"]
