"""Fixtures shared by the engine's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.session import _TRACK_ROWS


@pytest.fixture
def counted_state(spark: SparkSession) -> Iterator[None]:
    """State rows counted in progress (off by default: counting costs a read per write)."""
    before = spark.conf.get(_TRACK_ROWS)
    spark.conf.set(_TRACK_ROWS, "true")
    yield
    spark.conf.set(_TRACK_ROWS, before or "false")
