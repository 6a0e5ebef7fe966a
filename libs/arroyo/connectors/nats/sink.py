"""The NATS sink: each micro-batch's rows, encoded in the table's format, published to the
subject from the executors (a connection per partition, flushed before the partition ends).
At least once: a replayed micro-batch is published again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arroyo.connectors.base import WriteContext
from arroyo.connectors.nats.options import NatsOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.streaming.readwriter import DataStreamWriter

FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionPublisher:
    sink: str
    options: NatsOptions

    def __call__(self, rows: Iterator[Row]) -> None:
        payloads = []
        for row in rows:
            value = row["value"]
            payloads.append(value.encode() if isinstance(value, str) else bytes(value))
        if payloads:
            asyncio.run(self._publish(payloads))

    async def _publish(self, payloads: list[bytes]) -> None:
        from arroyo.connectors.nats.client import NatsError, connect

        client = await connect(self.options)
        try:
            assert self.options.subject is not None
            for payload in payloads:
                await client.publish(self.options.subject, payload)
            await client.flush(timeout=FLUSH_TIMEOUT_S)
        except Exception as err:
            raise NatsError(
                f"nats sink '{self.sink}' could not publish to {self.options.servers}: {err}"
            ) from err
        finally:
            await client.close()


def write_nats(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: NatsOptions
) -> DataStreamWriter:
    from arroyo.connectors.runtime.sinks import write_partitions
    from arroyo.formats.codec import encode

    return write_partitions(encode(df, table), PartitionPublisher(table.name, opts))
