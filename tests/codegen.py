"""Spark's interpreter, rather than generated code, for the golden cases' resumed runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark's internal setting for its own tests of both paths: expressions and operators
# interpreted, not compiled to Java. The results are the same by Spark's contract.
_FACTORY_MODE = "spark.sql.codegen.factoryMode"


@contextmanager
def interpreted(spark: SparkSession) -> Iterator[None]:
    """The pipelines run inside evaluate interpreted; Spark's default again afterwards.

    For the golden cases' resumed runs alone: a few rows a batch, and a stateful query generates
    a new class for nearly every batch (its state's eviction predicates carry the batch's
    watermark as a literal, so Spark's code cache misses), so compiling cost more than running.
    Five cases stopped and resumed, twice each in one JVM on the tests' quick JIT
    (bench/golden_codegen.py): 245 -> 208 machine CPU-s. Tests with more rows a batch are slower
    interpreted (Nexmark q4 at 20 K events/s: 13 s -> 64 s, in a CI run with the whole session
    interpreted), so everything else, each golden case's straight run included, keeps Spark's
    default, the product's path."""
    spark.conf.set(_FACTORY_MODE, "NO_CODEGEN")
    try:
        yield
    finally:
        spark.conf.unset(_FACTORY_MODE)
