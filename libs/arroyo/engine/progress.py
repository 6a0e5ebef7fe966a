"""Each committed micro-batch's progress, handed to the runner in order, none skipped.

Spark tells a listener after each batch; polling ``recentProgress`` instead would re-parse up
to a hundred reports per poll and could miss batches between polls. The listener runs in the
JVM (``arroyo.engine.ProgressFeed``) and keeps each report as Spark's JSON: one written in
Python has PySpark read each report field by field from the JVM, dozens of calls per batch that
take the cores the batch's tasks need (bench/storage.py measured it)."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryProgress


class ProgressFeed:
    """The progress of every query of ``spark``, from ``attach`` to ``detach``."""

    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark.sparkContext._jvm
        self._streams: Any = spark._jsparkSession.streams()
        self._feed: Any = jvm.arroyo.engine.ProgressFeed()
        self._arrived: list[str] = []

    def attach(self) -> None:
        self._streams.addListener(self._feed)

    def detach(self) -> None:
        self._streams.removeListener(self._feed)

    def wait(self, seconds: float) -> None:
        """Returns when progress arrived, or after ``seconds``."""
        if not self._arrived:
            self._arrived.extend(self._feed.take(max(1, int(seconds * 1000))))

    def take(self) -> list[StreamingQueryProgress]:
        """The progress that arrived since the last call, oldest first."""
        arrived = [*self._arrived, *self._feed.take(0)]
        self._arrived.clear()
        return [parse(text) for text in arrived]


# Keys PySpark's parser reads without checking, which Spark leaves out of a source's report
# when their value is not a number (a rate over no time).
_SOURCE_KEYS = ("inputRowsPerSecond", "processedRowsPerSecond", "numInputRows")
_OFFSETS = ("startOffset", "endOffset", "latestOffset")


def parse(text: str) -> StreamingQueryProgress:
    """A report as PySpark's listener events hold it, with each source's offsets as Spark's
    JSON (PySpark's parser would spell a parsed offset as Python's repr of it)."""
    report = json.loads(text)
    for source in report.get("sources", []):
        for key in (*_SOURCE_KEYS, *_OFFSETS):
            source.setdefault(key, None)
        for key in _OFFSETS:
            value = source.get(key)
            if isinstance(value, dict | list):
                source[key] = json.dumps(value, separators=(",", ":"))
    return StreamingQueryProgress.fromJson(report)
