"""How the tests' own SparkSession evaluates expressions: interpreted, and generated code where a
test asks for the product's path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The tests' own session evaluates expressions and operators as Spark's interpreter does, not as
# generated Java (an internal Spark setting, for its own tests of both paths). The tests' inputs
# are a few rows a batch, and Spark generates a new class for nearly every batch of a stateful
# query (its state's watermark predicates carry the watermark as a literal): compiling them
# (Janino, on the quick JIT the tests' JVMs run on) cost more than running them. Ten golden runs
# (five cases twice, stopped and resumed) in one JVM, bench/golden_codegen.py: 251 -> 208
# machine CPU-s, 188 -> 151 s; updating_global's warm run 28.8 -> 12.4 CPU-s. The results are
# the same by Spark's contract; the product's path (generated code) still runs in every golden
# case's straight run (``generated_code``), and in every pipeline a test runs through
# ``arroyo run``, a worker or the bench, which take Spark's defaults.
INTERPRETED = ("spark.sql.codegen.factoryMode", "NO_CODEGEN")


@contextmanager
def generated_code(spark: SparkSession) -> Iterator[None]:
    """Spark's default (generated code, interpreted where it cannot generate) for the pipelines
    run inside: the product's own path, in the tests' session."""
    spark.conf.set(INTERPRETED[0], "FALLBACK")
    try:
        yield
    finally:
        spark.conf.set(*INTERPRETED)
