"""Fuzzing at larger counts than CI's (``tests/fuzz``): the same three drivers, printing how
much each tried.

    PYTHONPATH=libs:. .venv/bin/python bench/fuzz.py [--examples 40] [--records 1000]
        [--batches 3] [--statements 1000] [--seed 0]

- the REST API: every operation of its OpenAPI document x ``--examples`` requests per mode
  (positive, known ids, negative), under schemathesis's checks;
- each record format: ``--batches`` batches of ``--records`` generated records, decoded with
  bad_data 'drop' and 'fail' in one Spark job each;
- the SQL planner: ``--statements`` scripts from the grammar, each planned or refused with
  diagnostics.

A failure raises with the failing input (Hypothesis's falsifying example); the counts are
printed as each part ends.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import hypothesis
from hypothesis import HealthCheck
from hypothesis import strategies as st

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _settings(examples: int) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _fuzz_format(
    spark: SparkSession, fmt: str, records: int, batches: int, seed: int
) -> tuple[int, int]:
    """``batches`` batches of ``records`` records of ``fmt``: how many tried, how many bad."""
    from tests.fuzz.formats_fuzz import FORMATS, check_format

    tried = [0, 0]

    @hypothesis.seed(seed)
    @_settings(batches)
    @hypothesis.given(st.lists(FORMATS[fmt].records, min_size=records, max_size=records))
    def batch(generated: list[bytes]) -> None:
        tried[1] += check_format(spark, fmt, generated)
        tried[0] += len(generated)

    batch()
    return tried[0], tried[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--statements", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from arroyo.compiler import Compiler
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.session import SessionSettings, get_or_create_session
    from tests.fuzz.api_fuzz import fuzz_operation, has_inputs, operation_labels
    from tests.fuzz.api_server import served_api
    from tests.fuzz.formats_fuzz import FORMATS
    from tests.fuzz.sql_grammar import plan_outcome, scripts

    spark = get_or_create_session(SessionSettings(parallelism=2, shuffle_partitions=2))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        started = time.monotonic()
        labels = operation_labels()
        requests = 0
        with served_api(root / "api", Compiler(spark)) as api:
            for label in labels:
                for known in (None, api.known_ids) if "{" in label else (None,):
                    requests += fuzz_operation(
                        api.base_url, label, args.examples, path_parameters=known, seed=args.seed
                    )
                if has_inputs(label):
                    requests += fuzz_operation(
                        api.base_url, label, args.examples, negative=True, seed=args.seed
                    )
        print(
            f"api: {len(labels)} operations x {args.examples} examples per mode, "
            f"{requests} requests, {time.monotonic() - started:.1f} s"
        )

        for fmt in FORMATS:
            started = time.monotonic()
            tried, dropped = _fuzz_format(spark, fmt, args.records, args.batches, args.seed)
            print(
                f"format {fmt}: {tried} records, {dropped} bad data, "
                f"{time.monotonic() - started:.1f} s"
            )

        started = time.monotonic()
        planner = spark_planner(spark, state_dir=root / "planning")
        outcomes: Counter[str] = Counter()

        @hypothesis.seed(args.seed)
        @_settings(args.statements)
        @hypothesis.given(scripts())
        def plan(sql: str) -> None:
            outcomes[plan_outcome(planner, sql)] += 1

        plan()
        print(
            f"sql: {sum(outcomes.values())} statements, {outcomes['planned']} planned, "
            f"{len(set(outcomes) - {'planned'})} diagnostic codes, "
            f"{time.monotonic() - started:.1f} s"
        )


if __name__ == "__main__":
    main()
