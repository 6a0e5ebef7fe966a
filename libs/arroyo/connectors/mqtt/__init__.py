"""``mqtt``: topics of an MQTT broker as sources and sinks."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.mqtt.options import MqttConnection, MqttOptions
from arroyo.program.spec import Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class MqttConnector(Connector[MqttOptions, MqttConnection]):
    """Source (``source.py``): subscribes to ``topic`` (wildcards allowed) at ``qos``; each
    message is written to a spool in the table's state before the broker's delivery is
    acknowledged, and Spark's offsets are positions in it, so a replayed micro-batch reads the
    same messages. At QoS 1 or 2 the session is persistent: at least once from the broker, and
    exactly once with an exactly-once sink from the spool on. At QoS 0 messages sent while the
    pipeline is down are lost, and it cannot replay those. Event time: when the message reached
    the spool. Metadata: ``topic``.

    Sink (``sink.py``): each row encoded in the table's format and published to ``topic`` at
    ``qos``, retained if ``sink.retain``. At least once: a replayed micro-batch is published
    again.
    """

    name = "mqtt"
    description = "MQTT brokers' topics"
    capabilities = Capabilities(
        source=True,
        sink=True,
        replayable=True,
        delivery="at_least_once",
        needs_format=True,
        source_time=True,
    )
    options_model = MqttOptions
    connection_model = MqttConnection
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {"topic": ("STRING",)}

    def test_connection(self, settings: MqttConnection) -> str:
        from arroyo.connectors.mqtt.client import MqttError, connect

        try:
            client = connect(settings, f"{settings.client_prefix}-test")
        except MqttError as err:
            raise ConnectorError(str(err)) from err
        client.loop_stop()
        client.disconnect()
        return f"connected to {settings.url}"

    def sample(self, options: MqttOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.mqtt.client import MqttError, first_messages

        try:
            return first_messages(options, count, timeout_s)
        except MqttError as err:
            raise ConnectorError(str(err)) from err

    def replayable(self, options: MqttOptions) -> bool:
        return options.qos_level() > 0  # at QoS 0 the broker keeps nothing for a client away

    def misplaced_options(self, options: MqttOptions, role: Role) -> list[str]:
        set_ = options.model_dump(by_alias=True, exclude_unset=True)
        return ["sink.retain"] if role == "source" and "sink.retain" in set_ else []

    def read(self, ctx: ReadContext, table: TableSpec, options: MqttOptions) -> DataFrame:
        from arroyo.connectors.mqtt.source import read_mqtt

        return read_mqtt(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: MqttOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.mqtt.sink import write_mqtt

        return write_mqtt(ctx, df, table, options)


__all__ = ["MqttConnector"]
