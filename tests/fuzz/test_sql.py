"""The SQL planner over scripts from a small grammar (``tests/fuzz/sql_grammar.py``): each is
planned or refused with a PlanningError and its diagnostics, never another exception."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import hypothesis
import pytest
from hypothesis import HealthCheck

from tests.fuzz.sql_grammar import plan_outcome, scripts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.fuzz, pytest.mark.spark]

STATEMENTS = 150


def test_a_script_is_planned_or_refused_with_diagnostics(
    spark: SparkSession, tmp_path: Path
) -> None:
    from arroyo.engine.catalog import spark_planner

    planner = spark_planner(spark, state_dir=tmp_path)
    outcomes: Counter[str] = Counter()

    @hypothesis.settings(
        max_examples=STATEMENTS,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(scripts())
    def plan(sql: str) -> None:
        outcomes[plan_outcome(planner, sql)] += 1

    plan()
    print(f"\nfuzz sql: {sum(outcomes.values())} scripts, outcomes {dict(outcomes)}")
