"""The MQTT source: a Python streaming data source whose subscriber writes every message to a
spool in the table's state before the broker's delivery is acknowledged, and whose offsets are
positions in that spool.

Why a spool: Spark replays a micro-batch after a crash by its offsets, and MQTT cannot replay.
A message reaches the spool (written and flushed to the operating system; not fsynced, as
Kafka's own log is not) inside paho's message callback, and paho acknowledges a QoS 1 or 2
delivery only when the callback returns: a message the broker counts as delivered is in the
spool, and a batch replayed after a crash reads the same messages again. The spool is cut at
each committed batch. With QoS 1 or 2 the client's session is persistent (a client id stable
for the pipeline, no clean session), so the broker keeps what is sent while the pipeline is
down. So at QoS 1 or 2 the source is replayable from the point a message was acknowledged (as
Kafka's is), which with an exactly-once sink gives each message once; at QoS 0 what the broker
sends while nothing is connected is lost (at most once).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from arroyo.connectors.mqtt.options import MqttOptions
from arroyo.connectors.runtime.spool import (
    Spool,
    SpooledReader,
    SpooledSource,
    read_spooled,
)
from arroyo.formats.arrow_json import carried

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec


class _Reader(SpooledReader):
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = MqttOptions.model_validate(json.loads(options["options"]))
        self.client_id = options["client_id"]

    def connect(self, spool: Spool) -> Any:
        from arroyo.connectors.mqtt.client import connect

        def on_message(_c: Any, _u: Any, message: Any) -> None:
            try:
                spool.append(message.topic, int(time.time() * 1000), bytes(message.payload))
            except Exception as err:  # a full disk: the next read fails the query
                self.fail(err)
                raise

        # At QoS 2 paho acknowledges (PUBREC) before the message reaches us, so a crash between
        # the two would lose it: the source subscribes at 1 at most (duplicates are the
        # spool's to avoid, and a replay of a batch is exact).
        qos = min(self.opts.qos_level(), 1)
        return connect(
            self.opts,
            self.client_id,
            clean_session=qos == 0,
            on_message=on_message,
            subscribe=(self.opts.topic, qos),
        )

    def disconnect(self, client: Any) -> None:
        client.disconnect()
        client.loop_stop()


class MqttSource(SpooledSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory), ``client_id``."""

    reader_type = _Reader

    @classmethod
    def name(cls) -> str:
        return "arroyo_mqtt"


def read_mqtt(ctx: ReadContext, table: TableSpec, opts: MqttOptions) -> DataFrame:
    """The topic's messages as ``value``, the time each reached the spool as the source time."""
    df = read_spooled(
        ctx,
        MqttSource,
        table,
        opts.model_dump_json(by_alias=True),
        client_id=f"{opts.client_prefix}-{{ident}}",
    )
    return df.select("value", "_source_time", "_eoi", "_meta_topic", *carried(df.columns))
