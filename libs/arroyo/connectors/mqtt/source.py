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

import hashlib
import json
import struct
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from arroyo.connectors.mqtt.options import MqttOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

_HEADER = struct.Struct("<IqI")  # topic length, time in ms, payload length
_SEGMENT_BYTES = 64 * 1024 * 1024
# The most a micro-batch takes of the spool (the rest waits for the next batch).
_BATCH_BYTES = 64 * 1024 * 1024


class Spool:
    """Messages appended to segment files named by their first byte's position (offsets run on
    across segments and restarts); segments wholly before a committed position are removed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        starts = self.segments()
        self.start = starts[0] if starts else 0
        last = starts[-1] if starts else 0
        self.end = last + (self._path(last).stat().st_size if starts else 0)
        self._file: Any = None
        self._file_start = last

    def segments(self) -> list[int]:
        return sorted(int(p.stem) for p in self.root.glob("*.log"))

    def _path(self, start: int) -> Path:
        return self.root / f"{start:020d}.log"

    def append(self, topic: str, at_ms: int, payload: bytes) -> None:
        name = topic.encode()
        record = _HEADER.pack(len(name), at_ms, len(payload)) + name + payload
        with self.lock:
            if self._file is None or self.end - self._file_start >= _SEGMENT_BYTES:
                if self._file is not None:
                    self._file.close()
                self._file_start = self.end
                self._file = self._path(self.end).open("ab")
            self._file.write(record)
            self._file.flush()
            self.end += len(record)

    def read(self, start: int, end: int) -> Iterator[tuple[str, int, bytes]]:
        """The messages in [start, end)."""
        for first in self.segments():
            path = self._path(first)
            size = path.stat().st_size
            if first + size <= start or first >= end:
                continue
            with path.open("rb") as f:
                pos = first
                if start > first:
                    f.seek(start - first)
                    pos = start
                while pos < min(end, first + size):
                    head = f.read(_HEADER.size)
                    topic_len, at_ms, length = _HEADER.unpack(head)
                    topic = f.read(topic_len).decode("utf-8", "replace")
                    payload = f.read(length)
                    pos += _HEADER.size + topic_len + length
                    yield topic, at_ms, payload

    def cut(self, committed: int) -> None:
        """Removes the segments wholly before ``committed``."""
        with self.lock:
            starts = self.segments()
            for i, first in enumerate(starts):
                following = starts[i + 1] if i + 1 < len(starts) else self.end
                if following <= committed and first != self._file_start:
                    self._path(first).unlink(missing_ok=True)


class _Reader(SimpleDataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it: the spool and the client are made there.
        self.opts = MqttOptions.model_validate(json.loads(options["options"]))
        self.root = Path(options["spool"])
        self.client_id = options["client_id"]
        self._spool: Spool | None = None
        self.client: Any = None

    @property
    def spool(self) -> Spool:
        if self._spool is None:
            self._spool = Spool(self.root)
        return self._spool

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_spool": None, "client": None}

    def _subscribed(self) -> None:
        if self.client is not None:
            return
        from arroyo.connectors.mqtt.client import connect

        spool = self.spool

        def on_message(_c: Any, _u: Any, message: Any) -> None:
            spool.append(message.topic, int(time.time() * 1000), bytes(message.payload))

        qos = self.opts.qos_level()
        self.client = connect(
            self.opts,
            self.client_id,
            clean_session=qos == 0,
            on_message=on_message,
            subscribe=(self.opts.topic, qos),
        )

    def initialOffset(self) -> dict[str, int]:
        return {"pos": self.spool.start}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        self._subscribed()
        begin = max(start["pos"], self.spool.start)
        end = min(self.spool.end, begin + _BATCH_BYTES)
        rows = list(self._rows(begin, end))
        if rows:
            end = begin + sum(_HEADER.size + len(t.encode()) + len(p) for t, _, p, _e, _m in rows)
        return iter(rows), {"pos": end}

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        return self._rows(start["pos"], end["pos"])

    def _rows(self, start: int, end: int) -> Iterator[tuple[Any, ...]]:
        for topic, at_ms, payload in self.spool.read(start, end):
            yield topic, datetime.fromtimestamp(at_ms / 1000, UTC), payload, False, topic

    def commit(self, end: dict[str, int]) -> None:
        self.spool.cut(end["pos"])

    def stop(self) -> None:
        if self.client is not None:
            self.client.loop_stop()
            self.client.disconnect()
            self.client = None


class MqttSource(DataSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory), ``client_id``."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_mqtt"

    def schema(self) -> str:
        return (
            "`_topic` STRING, `_source_time` TIMESTAMP, `value` BINARY, `_eoi` BOOLEAN, "
            "`_meta_topic` STRING"
        )

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return _Reader(dict(self.options))


def read_mqtt(ctx: ReadContext, table: TableSpec, opts: MqttOptions) -> DataFrame:
    """The topic's messages as ``value``, the time each reached the spool as the source time."""
    state = ctx.state_dir.resolve()
    ident = hashlib.sha256(str(state).encode()).hexdigest()[:12]
    ctx.spark.dataSource.register(MqttSource)
    df = (
        ctx.spark.readStream.format(MqttSource.name())
        .option("options", opts.model_dump_json(by_alias=True))
        .option("spool", str(state / "spool"))
        .option("client_id", f"{opts.client_prefix}-{table.name}-{ident}")
        .load()
    )
    return df.select("value", "_source_time", "_eoi", "_meta_topic")
