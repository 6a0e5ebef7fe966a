"""A table's event time and watermark as Arroyo's users declare them: WATERMARK FOR over any
expression that is the event time less an interval once virtual columns are written out, the
older options event_time_field and watermark_field, and the idleness options; and what each
bad declaration is told."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.errors import PlanningError
from arroyo.program.spec import TableSpec
from tests.sql.harness import INPUTS

_SINK = "CREATE TABLE out WITH (connector = 'single_file', path = '/nonexistent/o.json', " + (
    "type = 'sink');\nINSERT INTO out SELECT id FROM events;"
)


def _events(columns: str, options: str = "") -> str:
    return (
        f"CREATE TABLE events (id BIGINT NOT NULL, ts TEXT, {columns}) WITH ("
        f"connector = 'single_file', path = '{INPUTS / 'events.json'}', format = 'json', "
        f"type = 'source'{', ' + options if options else ''});\n{_SINK}"
    )


def _source(spark: SparkSession, tmp_path: Path, sql: str) -> TableSpec:
    [source] = spark_planner(spark, state_dir=tmp_path).plan(sql).sources
    return source


_PARSED = "CAST(ts AS TIMESTAMP)"


@pytest.mark.spark
@pytest.mark.parametrize(
    ("columns", "options", "column", "delay_ms"),
    [
        # Arroyo's own example: the watermark over the expression a virtual column computes.
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), "
            f"WATERMARK FOR t AS {_PARSED} - INTERVAL '5 seconds'",
            "",
            "t",
            5000,
        ),
        # WATERMARK FOR a column, no AS: the watermark is the event time itself.
        (f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), WATERMARK FOR t", "", "t", 0),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), "
            f"w TIMESTAMP GENERATED ALWAYS AS (t - INTERVAL '3 seconds'), WATERMARK FOR t AS (w)",
            "",
            "t",
            3000,
        ),
        # The older options: an event time alone is watermarked 1 second behind.
        (f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED})", "event_time_field = 't'", "t", 1000),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), "
            f"w TIMESTAMP GENERATED ALWAYS AS ({_PARSED} - INTERVAL '2 seconds')",
            "event_time_field = t, watermark_field = 'w'",
            "t",
            2000,
        ),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED})",
            "event_time_field = 't', watermark_field = 't'",
            "t",
            0,
        ),
        # Names as Spark reads them: case-insensitive, quoted or not.
        (
            f'"Stamp" TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), '
            "WATERMARK FOR \"Stamp\" AS STAMP - INTERVAL '4' SECOND",
            "",
            "Stamp",
            4000,
        ),
        # WATERMARK FOR wins over the options, as in Arroyo.
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), u TIMESTAMP GENERATED ALWAYS AS "
            f"({_PARSED}), WATERMARK FOR u AS u - INTERVAL '1' MINUTE",
            "event_time_field = 't'",
            "u",
            60_000,
        ),
        # Idleness is accepted in both spellings.
        ("amount DOUBLE", "idle_micros = '5000000', idle_time = interval '30 seconds'", None, 1000),
    ],
)
def test_event_time_and_watermark_are_taken_as_declared(
    spark: SparkSession,
    tmp_path: Path,
    columns: str,
    options: str,
    column: str | None,
    delay_ms: int,
) -> None:
    source = _source(spark, tmp_path, _events(columns, options))
    assert (source.event_time_column, source.watermark_delay_ms) == (column, delay_ms)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("columns", "options", "code", "message"),
    [
        ("amount DOUBLE", "event_time_field = 'when'", "unknown_column", "unknown column 'when'"),
        ("amount DOUBLE", "event_time_field = 'amount'", "bad_watermark", "must be a TIMESTAMP"),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED})",
            "watermark_field = 't'",
            "bad_watermark",
            "watermark_field needs event_time_field",
        ),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), "
            "WATERMARK FOR t AS CAST(ts AS TIMESTAMP) + INTERVAL '1' SECOND",
            "",
            "bad_watermark",
            "less an interval",
        ),
        (
            f"t TIMESTAMP GENERATED ALWAYS AS ({_PARSED}), WATERMARK FOR t AS t - id",
            "",
            "bad_watermark",
            "expected an interval, found 'id'",
        ),
        ("amount DOUBLE", "idle_micros = 'soon'", "bad_option", "idle_micros"),
        ("amount DOUBLE", "idle_time = '5 fortnights'", "bad_option", "idle_time"),
    ],
)
def test_a_bad_event_time_is_a_diagnostic_at_its_declaration(
    spark: SparkSession, tmp_path: Path, columns: str, options: str, code: str, message: str
) -> None:
    sql = _events(columns, options)
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    # (The table's diagnostic comes first; a query reading the refused table has its own.)
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.code == code, diagnostic.render()
    assert message in diagnostic.message, diagnostic.render()
    assert diagnostic.span is not None
    assert diagnostic.span.line == 1, diagnostic.render()
