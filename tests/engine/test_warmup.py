"""The start-up warm-up: the sample must plan and run (a warm-up that quietly fails leaves the
first user's pipeline slow), and a failure must not stop a service from starting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.engine import warmup

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_the_sample_plans_and_runs(spark: SparkSession) -> None:
    assert warmup.plan_sample(spark)
    assert warmup.run_sample(spark)


def test_a_failing_warm_up_is_logged_not_raised(spark: SparkSession) -> None:
    bad = "SELECT FROM nowhere WHERE;"
    assert not warmup.plan_sample(spark, bad)
    assert not warmup.run_sample(spark, bad)
