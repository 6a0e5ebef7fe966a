"""Golden SQL tests: each query's output, as an order-insensitive multiset, must equal its golden
file, both straight through and when stopped part-way and resumed from the checkpoint.

Regenerate with ``pytest tests/sql --update-golden`` and review the diff before committing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.codegen import interpreted
from tests.sql.harness import (
    GOLDEN,
    QUERIES,
    as_multiset,
    read_output,
    render,
    replay_changes,
    run_case,
)

# `scripts/test --quick` runs these (one or two of each family); CI runs every case.
SAMPLE = frozenset(
    {
        "filesystem_parquet_roundtrip",
        "hop_window",
        "json_and_unnest",
        "lookup_join",
        "session_window",
        "top_n_per_window",
        "tumble_count",
        "union_two_sources",
        "unwindowed_inner_join",
        "updating_cdc_aggregate",
        "updating_filter",
        "updating_join_aggregate",
        "view_and_cte",
        "windowed_joins",
    }
)
CASES = [
    pytest.param(p.stem, marks=() if p.stem in SAMPLE else pytest.mark.breadth)
    for p in sorted(QUERIES.glob("*.sql"))
]


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["straight", "resumed"])
@pytest.mark.parametrize("case", CASES)
def test_golden(
    spark: SparkSession, tmp_path: Path, case: str, mode: str, request: pytest.FixtureRequest
) -> None:
    output = tmp_path / "out"
    sql = render(QUERIES / f"{case}.sql", output)
    if mode == "straight":
        run_case(spark, sql, tmp_path, resume_part_way=False)
    else:
        # Interpreted: tests/codegen.py says why. The straight run keeps the product's path.
        with interpreted(spark):
            run_case(spark, sql, tmp_path, resume_part_way=True)
    rows = read_output(output)
    if case.startswith("updating_"):
        # Updating results: the changes, replayed in order, must give the batch result. (How
        # many intermediate updates there are depends on the batches, so they are not compared.)
        rows = replay_changes(rows)
    golden = GOLDEN / f"{case}.json"
    if request.config.getoption("--update-golden") and mode == "straight":
        lines = sorted(json.dumps(r, sort_keys=True) for r in rows)
        golden.write_text("".join(line + "\n" for line in lines))
    expected = [json.loads(line) for line in golden.read_text().splitlines() if line.strip()]
    assert expected, f"golden file {golden.name} is empty"
    assert as_multiset(rows) == as_multiset(expected)
