"""bad_data = 'fail' stops the run with an error naming the record; 'drop' skips and counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError

INPUT = Path(__file__).parents[1] / "sql" / "inputs" / "millis.json"


def _sql(tmp_path: Path, bad_data: str) -> str:
    return (
        f"CREATE TABLE src (id BIGINT NOT NULL, at TIMESTAMP) WITH (connector = "
        f"'single_file', path = '{INPUT}', 'json.timestamp_format' = 'unix_millis', "
        f"bad_data = '{bad_data}', type = 'source');\n"
        f"CREATE TABLE o WITH (connector = 'single_file', path = '{tmp_path}/o.json', "
        "type = 'sink');\nINSERT INTO o SELECT id FROM src;"
    )


@pytest.mark.spark
def test_bad_data_fail_names_the_record(spark: SparkSession, tmp_path: Path) -> None:
    program = spark_planner(spark, state_dir=tmp_path).plan(_sql(tmp_path, "fail"))
    runner = PipelineRunner(spark, program, tmp_path / "state")
    runner.start()
    with pytest.raises(JobFailedError) as caught:
        runner.wait(timeout=120)
    assert caught.value.code == "job_failed"
    # The failure of a job has one code; which table and record it names is the behaviour
    # under test (what the user reads to find the record).
    assert "bad data in table 'src'" in caught.value.message
    assert '"not a number"' in caught.value.message or "this is not json" in caught.value.message


@pytest.mark.spark
def test_bad_data_drop_skips_and_counts(spark: SparkSession, tmp_path: Path) -> None:
    program = spark_planner(spark, state_dir=tmp_path).plan(_sql(tmp_path, "drop"))
    runner = PipelineRunner(spark, program, tmp_path / "state")
    runner.start()
    assert runner.wait(timeout=120)
    ids = sorted(
        int(line.split(":")[1].rstrip("}"))
        for line in (tmp_path / "o.json").read_text().splitlines()
    )
    assert ids == [i for i in range(20) if i not in (4, 11, 15)]
    assert runner.progress.dropped_bad_records == 3


@pytest.mark.spark
def test_a_change_record_whose_time_is_no_time_is_bad_data(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A debezium record's TIMESTAMP is a number (nanoseconds, as Arroyo reads it) or text; a
    value that is neither, or a number too large for the type, is bad data, not a failed job."""
    records = tmp_path / "changes.json"
    records.write_text(
        '{"before": null, "after": {"id": 1, "at": 1734539354748899000}, "op": "c"}\n'
        '{"before": null, "after": {"id": 2, "at": "yesterday"}, "op": "c"}\n'
        '{"before": null, "after": {"id": 3, "at": "2024-12-18T16:29:14"}, "op": "c"}\n'
        '{"before": null, "after": {"id": 4, "at": 123456789012345678901234}, "op": "c"}\n'
        '{"before": null, "after": {"id": 5, "at": null}, "op": "c"}\n'
    )
    sql = (
        "CREATE TABLE src (id BIGINT NOT NULL PRIMARY KEY, at TIMESTAMP) WITH (connector = "
        f"'single_file', path = '{records}', format = 'debezium_json', bad_data = 'drop', "
        "type = 'source');\n"
        f"CREATE TABLE o WITH (connector = 'single_file', path = '{tmp_path}/o.json', "
        "format = 'debezium_json', type = 'sink');\nINSERT INTO o SELECT id, at FROM src;"
    )
    program = spark_planner(spark, state_dir=tmp_path).plan(sql)
    runner = PipelineRunner(spark, program, tmp_path / "state")
    runner.start()
    assert runner.wait(timeout=120)
    rows = [json.loads(line)["after"] for line in (tmp_path / "o.json").read_text().splitlines()]
    assert sorted((r["id"], r["at"]) for r in rows) == [
        (1, 1734539354748),
        (3, 1734539354000),
        (5, None),
    ]
    assert runner.progress.dropped_bad_records == 2
