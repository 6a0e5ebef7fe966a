"""``arroyo_clock``: event numbers that become readable at their event time, to the millisecond.

Spark's ``rate`` source counts in whole seconds (its offsets are seconds since it started), so a
row becomes readable up to a second after its own timestamp, and nothing fed by it can have a
latency under a second. This source is the paced generator a latency measurement needs: event
``n`` becomes readable at ``start_ms + n * 1000 / rate``, the same time the generators give it as
event time, so the time from its event time to the sink is the pipeline's end-to-end latency.

Offsets are event numbers (``{"n": 123}``), so a restarted query replays exactly what it read
before. Only numbers cross from Python, as one Arrow batch per partition; the events are built
from them by Spark expressions in the JVM (arroyo.connectors.nexmark_generator).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

NAME = "arroyo_clock"


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


class ClockStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.start_ms = int(options["start_ms"])
        self.rate = float(options["rate"])
        self.partitions_n = max(1, int(options.get("partitions", "1")))
        total = options.get("total")
        self.total = int(total) if total else None

    def initialOffset(self) -> dict[str, int]:
        return {"n": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        # No read limit: a batch takes every event readable by now.
        readable = int((time.time() * 1000 - self.start_ms) * self.rate / 1000)
        return {"n": max(int(start["n"]), readable)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = int(start["n"]), int(end["n"])
        if last <= first:
            return []
        k = min(self.partitions_n, last - first)
        bounds = [first + (last - first) * i // k for i in range(k + 1)]
        return [_Range(a, b) for a, b in itertools.pairwise(bounds)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa

        assert isinstance(partition, _Range)
        values = pa.array(np.arange(partition.start, partition.end, dtype=np.int64))
        yield pa.RecordBatch.from_arrays([values], names=["value"])

    def commit(self, end: dict[str, int]) -> None:
        pass


class ClockDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "value BIGINT"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ClockStreamReader(self.options)


_registered: set[int] = set()


def register_clock(spark: SparkSession) -> None:
    """Makes ``arroyo_clock`` readable in this session (once per session)."""
    if id(spark) not in _registered:
        spark.dataSource.register(ClockDataSource)
        _registered.add(id(spark))
