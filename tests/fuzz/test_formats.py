"""Every record format's decoder over generated records (``tests/fuzz/formats_fuzz.py``):
one Spark job per batch of records and mode, not one per record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import hypothesis
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st

from tests.fuzz.formats_fuzz import FORMATS, check_format

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.fuzz, pytest.mark.spark]

RECORDS_PER_BATCH = 150
BATCHES = 2
_TRIED: dict[str, list[int]] = {}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    for fmt, (tried, dropped) in _TRIED.items():
        print(f"\nfuzz format {fmt}: {tried} records, {dropped} dropped as bad data", end="")
    print()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_record_decodes_or_is_bad_data(spark: SparkSession, fmt: str) -> None:
    tried = _TRIED.setdefault(fmt, [0, 0])

    @hypothesis.settings(
        max_examples=BATCHES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[hypothesis.Phase.generate],
    )
    @hypothesis.given(
        st.lists(FORMATS[fmt].records, min_size=RECORDS_PER_BATCH, max_size=RECORDS_PER_BATCH)
    )
    def batch(records: list[bytes]) -> None:
        tried[1] += check_format(spark, fmt, records)
        tried[0] += len(records)

    batch()
