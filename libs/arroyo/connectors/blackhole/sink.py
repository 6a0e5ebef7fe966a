"""The blackhole sink: every row computed, none kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


def discard(df: DataFrame) -> DataStreamWriter:
    """Spark's no-op sink: the query runs, nothing is written."""
    return df.writeStream.format("noop")


class Discard:
    """A LineWriter that computes every record and keeps none."""

    def committed(self, batch_id: int) -> bool:
        return False

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None:
        for _ in lines:
            pass
