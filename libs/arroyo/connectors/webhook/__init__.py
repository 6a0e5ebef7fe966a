"""``webhook``: a sink POSTing rows to an HTTP endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, WriteContext
from arroyo.connectors.webhook.options import WebhookOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class WebhookConnector(Connector[WebhookOptions]):
    """Sink (``sink.py``): each row encoded in the table's format and POSTed to ``endpoint``
    with ``headers``: one record per request, its body the record (as Arroyo sends them), or
    with ``max_batch_size`` above 1 up to that many per request, a JSON array of them (json) or
    their lines (raw_string, raw_bytes); a batch is sent once full, once ``max_batch_interval``
    has passed since its first record, or at the end of its task's rows. Up to ``max_inflight``
    requests are in flight per task (Arroyo's 50). Timeouts (``request_timeout``), refused
    connections and answers 408, 429 and 5xx are retried with backoff; any other 4xx fails the
    job with the answer's body, as does a request still failing after its last retry. At least
    once: a replayed micro-batch is posted again, and a receiver that must see each record once
    deduplicates them (by a key column of its rows).
    """

    name = "webhook"
    description = "HTTP endpoints receiving rows as POST requests"
    capabilities = Capabilities(sink=True, delivery="at_least_once", needs_format=True)
    options_model = WebhookOptions
    formats = frozenset({"json", "raw_string", "raw_bytes"})
    default_format = "json"

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: WebhookOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.webhook.sink import write_webhook

        return write_webhook(ctx, df, table, options)


__all__ = ["WebhookConnector"]
