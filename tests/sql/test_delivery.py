"""The planner's warnings about delivery (arroyo.sql.planner.delivery): a source that cannot
replay its input (a NATS core subject, MQTT at QoS 0) feeding an exactly-once sink, through
views too, is named with the sink; replayable sources and sinks that are not exactly once are
not. Planned only: no server is contacted, nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from arroyo.compiler.compiler import Compiler
from arroyo.engine.catalog import spark_planner
from arroyo.sql.planner.delivery import ReplayWarning, replay_warnings

pytestmark = pytest.mark.spark

_NATS = "connector = 'nats', type = 'source', servers = '127.0.0.1:1', format = 'json'"
_MQTT = "connector = 'mqtt', type = 'source', url = 'tcp://127.0.0.1:1', topic = 't', "


def _script(out: Path) -> str:
    return (
        f"CREATE TABLE core (n BIGINT) WITH ({_NATS}, subject = 's');\n"
        f"CREATE TABLE js (n BIGINT) WITH ({_NATS}, stream = 'st');\n"
        f"CREATE TABLE q0 (n BIGINT) WITH ({_MQTT} format = 'json');\n"
        f"CREATE TABLE q1 (n BIGINT) WITH ({_MQTT} qos = 'AtLeastOnce', format = 'json');\n"
        f"CREATE TABLE files (n BIGINT) WITH (connector = 'single_file', path = '{out}/f.json', "
        "type = 'sink');\n"
        f"CREATE TABLE dir (n BIGINT) WITH (connector = 'filesystem', path = '{out}/dir', "
        "format = 'json', type = 'sink');\n"
        "CREATE VIEW messages AS SELECT n FROM core UNION ALL SELECT n FROM js;\n"
        "INSERT INTO files SELECT n FROM messages;\n"
        "INSERT INTO files SELECT n FROM q0;\n"
        "INSERT INTO dir SELECT n FROM q1 UNION ALL SELECT n FROM js;\n"
        "SELECT n FROM core;\n"  # stdout: at least once, nothing to warn of
    )


def test_a_source_that_cannot_replay_into_an_exactly_once_sink_is_warned_of(
    spark: SparkSession, tmp_path: Path
) -> None:
    sql = _script(tmp_path)
    program = spark_planner(spark, state_dir=tmp_path / "plan").plan(sql)
    warnings = replay_warnings(program)
    assert warnings == [
        ReplayWarning("core", "nats", "files"),
        ReplayWarning("q0", "mqtt", "files"),
    ]
    assert {w.code for w in warnings} == {"unreplayable_source"}
    # As the API's validate_query returns them (the compiler's response).
    response = Compiler(spark).compile(sql, "", parallelism=1)
    assert list(response.warnings) == [w.message for w in warnings]
    assert "source 'core' (nats) cannot replay" in response.warnings[0]
    assert "exactly-once sink 'files'" in response.warnings[0]
