"""``polling_http``: an HTTP endpoint requested at an interval, each response a message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, ReadContext
from arroyo.connectors.polling_http.options import PollingHttpOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class PollingHttpConnector(Connector[PollingHttpOptions]):
    """Source (``source.py``): requests ``endpoint`` (``method``, ``headers``, ``body``) every
    ``poll_interval_ms``; each successful response's body is a message in the table's format
    (``framing = 'newline'``: each line a record), or, with ``emit_behavior = 'changed'``,
    only a body that differs from the one before. Each body is written to a spool in the
    table's state, and Spark's offsets are positions in it, so a replayed micro-batch reads
    exactly what it first read. What the endpoint answered while the pipeline was down is
    not read, and it cannot replay: at most once. A failed request is made again with
    backoff. Event time: when the body reached the spool.
    """

    name = "polling_http"
    description = "HTTP endpoints polled at an interval"
    capabilities = Capabilities(source=True, needs_format=True, source_time=True)
    options_model = PollingHttpOptions
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"

    def sample(self, options: PollingHttpOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.polling_http.source import PollingHttpReader
        from arroyo.connectors.runtime.http_source import sample_http

        return sample_http(PollingHttpReader, options, count, timeout_s)

    def read(self, ctx: ReadContext, table: TableSpec, options: PollingHttpOptions) -> DataFrame:
        from arroyo.connectors.polling_http.source import read_polling_http

        return read_polling_http(ctx, table, options)


__all__ = ["PollingHttpConnector"]
