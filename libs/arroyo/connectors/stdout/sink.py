"""The stdout sink: each batch's encoded records printed on the driver's standard output, or
handed to the process's live-output route (a cluster worker's, which forwards them to the
controller)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from arroyo.connectors.base import LineWriter
from arroyo.program.spec import TableSpec

# Where stdout sinks' rows go in this process, when not to standard output: (sink, rows) -> None.
LiveRoute = Callable[[str, list[str]], None]


class _Stdout:
    route: LiveRoute | None = None


def route_stdout(route: LiveRoute | None) -> None:
    """Send every stdout sink's rows of this process to ``route`` (called on the thread that
    runs the micro-batch, once per batch) instead of printing them. A cluster worker installs
    one that forwards them to the controller, where the api streams them to users."""
    _Stdout.route = route


def stdout_route() -> LiveRoute | None:
    return _Stdout.route


class LiveOutput:
    """Hands each batch's lines to a live-output route (a LineWriter). At least once."""

    def __init__(self, route: LiveRoute, sink: str) -> None:
        self.route = route
        self.sink = sink

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        rows = [line.decode().rstrip("\n") for line in lines]
        if rows:
            self.route(self.sink, rows)


class StdoutPrinter:
    """Prints one line per record (a LineWriter). At least once."""

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        out = sys.stdout.buffer
        for line in lines:
            out.write(line)
        out.flush()


def stdout_writer(table: TableSpec) -> LineWriter:
    """Where this process prints a stdout table's rows: its live-output route, if it has one."""
    route = stdout_route()
    return LiveOutput(route, table.name) if route else StdoutPrinter()
