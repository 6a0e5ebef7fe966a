"""Fixtures of the api's tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arroyo.compiler import Compiler


@pytest.fixture(scope="module")
def compiler(spark: SparkSession) -> Compiler:
    """The compiler the compiler service runs, on the session's SparkSession."""
    from arroyo.compiler import Compiler

    return Compiler(spark)
