"""The MQTT sink: each micro-batch's rows, encoded in the table's format, published from the
executors (a client per partition), each at the table's QoS and retain flag; a QoS 1 or 2
publish is waited for until the broker has it. At least once: a replayed micro-batch is
published again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arroyo.connectors.base import WriteContext
from arroyo.connectors.mqtt.options import MqttOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.streaming.readwriter import DataStreamWriter

PUBLISH_TIMEOUT_S = 30.0


class MqttPublishError(RuntimeError):
    """A message that could not be published: names the sink and the broker."""


@dataclass(frozen=True)
class PartitionPublisher:
    sink: str
    options: MqttOptions

    def __call__(self, rows: Iterator[Row]) -> None:
        from arroyo.connectors.mqtt.client import connect

        opts = self.options
        payloads = []
        for row in rows:
            value = row["value"]
            payload = value.encode() if isinstance(value, str) else bytes(value)
            if opts.max_packet_size and len(payload) > opts.max_packet_size:
                raise MqttPublishError(
                    f"mqtt sink '{self.sink}': a {len(payload)}-byte message is larger than "
                    f"max_packet_size ({opts.max_packet_size})"
                )
            payloads.append(payload)
        if not payloads:
            return
        client = connect(opts, f"{opts.client_prefix}-{uuid.uuid4().hex[:12]}")
        try:
            infos = [
                client.publish(opts.topic, p, qos=opts.qos_level(), retain=opts.sink_retain)
                for p in payloads
            ]
            for info in infos:
                info.wait_for_publish(PUBLISH_TIMEOUT_S)
                if not info.is_published():
                    raise MqttPublishError(
                        f"mqtt sink '{self.sink}': the broker at {opts.url} did not take a "
                        f"message within {PUBLISH_TIMEOUT_S:.0f} s (rc {info.rc})"
                    )
        finally:
            client.disconnect()
            client.loop_stop()


def write_mqtt(
    ctx: WriteContext, df: DataFrame, table: TableSpec, opts: MqttOptions
) -> DataStreamWriter:
    from arroyo.connectors.runtime.sinks import write_partitions
    from arroyo.formats.codec import encode

    return write_partitions(encode(df, table), PartitionPublisher(table.name, opts))
