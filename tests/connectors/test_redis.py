"""The ``redis`` sink against a real Redis server (Debian's redis-server, password required),
read back by an independent client: strings with a key column and a TTL, lists appended and
prepended and trimmed to ``target.max_length``, hash fields; a replayed pipeline leaves strings
and hashes as written once; and the diagnostics for options and columns that cannot work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.lookups import lookup_counts
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.redis import RedisServer
from tests.connectors.pipelines import json_lines, start, stop
from tests.waiting import wait_until

pytestmark = pytest.mark.spark

_SOURCE = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000',
    message_count = '{count}', event_time_interval = '1 second');
"""


@pytest.fixture
def server(redis_server: RedisServer) -> RedisServer:
    return redis_server


@pytest.fixture
def client(server: RedisServer) -> Iterator[Any]:
    import redis

    c = redis.Redis(server.host, server.port, password=server.password, decode_responses=True)
    c.flushall()
    yield c
    c.close()


def _run(spark: SparkSession, sql: str, state: Path) -> None:
    assert start(spark, sql, state).wait(timeout=300)


def _sink(server: RedisServer, options: str, columns: str = "k TEXT NOT NULL, n BIGINT") -> str:
    return (
        f"CREATE TABLE out ({columns}) WITH (connector = 'redis', type = 'sink', "
        f"format = 'json', {server.options()}, {options});\n"
    )


def test_strings_by_key_column_with_a_ttl(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path
) -> None:
    sql = (
        _SOURCE.format(count=10)
        + _sink(
            server,
            "target = 'string', 'target.key_prefix' = 'row:', "
            "'target.key_column' = 'k', 'target.ttl_secs' = '600'",
        )
        + "INSERT INTO out SELECT CAST(counter % 4 AS TEXT) AS k, counter AS n FROM src;"
    )
    _run(spark, sql, tmp_path / "state")
    keys = sorted(client.keys("*"))
    assert keys == ["row:0", "row:1", "row:2", "row:3"]
    values = {k: json.loads(client.get(k)) for k in keys}
    # Each key holds one of its rows, whole (the key column too), in the table's format.
    assert all(
        v["k"] == k.removeprefix("row:") and v["n"] % 4 == int(v["k"]) for k, v in values.items()
    )
    assert all(0 < client.ttl(k) <= 600 for k in keys)
    # Run again from the start: the same keys, set again, nothing else.
    _run(spark, sql, tmp_path / "again")
    assert sorted(client.keys("*")) == keys


@pytest.mark.parametrize("operation", ["append", "prepend"])
def test_lists_pushed_and_trimmed_to_max_length(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path, operation: str
) -> None:
    """Two pipelines push onto one list, the second's items all newer: the list keeps five,
    all the second's (the newest, at the end of an appended list, the start of a prepended)."""
    sink = _sink(
        server,
        f"target = 'list', 'target.key_prefix' = 'events', "
        f"'target.operation' = '{operation}', 'target.max_length' = '5'",
        "n BIGINT",
    )
    for run, offset in enumerate((0, 100)):
        sql = _SOURCE.format(count=20) + sink
        sql += f"INSERT INTO out SELECT counter + {offset} AS n FROM src;"
        _run(spark, sql, tmp_path / f"state{run}")
    items = [json.loads(v)["n"] for v in client.lrange("events", 0, -1)]
    assert len(items) == 5 and len(set(items)) == 5
    assert all(100 <= n < 120 for n in items), items


def test_hash_fields_by_field_column(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path
) -> None:
    sql = (
        _SOURCE.format(count=12)
        + _sink(
            server,
            "target = 'hash', 'target.key_prefix' = 'h:', "
            "'target.key_column' = 'k', 'target.field_column' = 'f'",
            "k TEXT NOT NULL, f TEXT NOT NULL, n BIGINT",
        )
        + "INSERT INTO out SELECT CAST(counter % 2 AS TEXT) AS k, "
        "CAST(counter AS TEXT) AS f, counter AS n FROM src;"
    )
    _run(spark, sql, tmp_path / "state")
    for k in ("0", "1"):
        fields = client.hgetall(f"h:{k}")
        assert sorted(int(f) for f in fields) == [n for n in range(12) if n % 2 == int(k)]
        assert all(json.loads(v)["n"] == int(f) for f, v in fields.items())


@pytest.mark.parametrize(
    ("options", "columns", "message"),
    [
        ("'target.key_prefix' = 'p'", "n BIGINT", "a redis sink needs target = 'string'"),
        ("target = 'string'", "n BIGINT", "target.key_prefix must be set"),
        (
            "target = 'string', 'target.key_prefix' = 'p', 'target.key_column' = 'k'",
            "k TEXT, n BIGINT",
            "invalid value 'k' for target.key_column, must be the name of a non-nullable TEXT",
        ),
        (
            "target = 'hash', 'target.key_prefix' = 'p', 'target.field_column' = 'nope'",
            "n BIGINT",
            "invalid value 'nope' for target.field_column",
        ),
        ("target = 'hash', 'target.key_prefix' = 'p'", "n BIGINT", "target.field_column must"),
        (
            "target = 'string', 'target.key_prefix' = 'p', 'target.max_length' = '3'",
            "n BIGINT",
            "target.max_length applies to target = 'list' only",
        ),
        ("target = 'set', 'target.key_prefix' = 'p'", "n BIGINT", "target"),
    ],
)
def test_options_and_columns_that_cannot_work_are_refused(
    spark: SparkSession,
    server: RedisServer,
    tmp_path: Path,
    options: str,
    columns: str,
    message: str,
) -> None:
    sql = _SOURCE.format(count=1) + _sink(server, options, columns)
    sql += f"INSERT INTO out SELECT {', '.join(c.split()[0] for c in columns.split(', '))} FROM ("
    sql += "SELECT 'a' AS k, 'b' AS f, counter AS n FROM src);"
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


def test_a_wrong_password_fails_the_job_naming_the_server(
    spark: SparkSession, server: RedisServer, tmp_path: Path
) -> None:
    sql = (
        _SOURCE.format(count=3)
        + f"CREATE TABLE out (n BIGINT) WITH (connector = 'redis', type = 'sink', format = "
        f"'json', address = '{server.address}', password = 'wrong', target = 'string', "
        "'target.key_prefix' = 'p');\nINSERT INTO out SELECT counter AS n FROM src;"
    )
    with pytest.raises(
        JobFailedError, match=rf"redis sink 'out' could not write to {server.address}"
    ):
        _run(spark, sql, tmp_path / "state")


def _lookup_sql(server: RedisServer, out: Path, join: str, extra: str = "", count: int = 8) -> str:
    return (
        _SOURCE.format(count=count)
        + "CREATE TEMPORARY TABLE customers (id TEXT METADATA FROM 'key' PRIMARY KEY, "
        f"name TEXT, plan TEXT) WITH (connector = 'redis', format = 'json', {server.options()}"
        f"{extra});\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\n"
        "INSERT INTO out SELECT CAST(counter % 4 AS TEXT) AS k, c.name, plan, c.id AS found "
        f"FROM src {join} customers AS c ON CAST(src.counter % 4 AS TEXT) = c.id;"
    )


@pytest.mark.parametrize("join", ["LEFT JOIN", "JOIN"])
def test_a_stream_joined_with_a_lookup_table_by_key(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path, join: str
) -> None:
    """Keys 0 and 1 are in Redis, 2 and 3 are not: a LEFT JOIN keeps every row (the missing
    keys' columns null), an inner join only the rows whose key was found."""
    client.set("0", json.dumps({"name": "ann", "plan": "pro"}))
    client.set("1", json.dumps({"name": "bob", "plan": None}))
    out = tmp_path / "out.json"
    _run(
        spark,
        _lookup_sql(server, out, join, ", 'lookup.cache.ttl' = '5 seconds'"),
        tmp_path / "state",
    )
    got = sorted((r["k"], r.get("name"), r.get("plan"), r.get("found")) for r in json_lines(out))
    found = [("0", "ann", "pro", "0"), ("0", "ann", "pro", "0")]
    found += [("1", "bob", None, "1"), ("1", "bob", None, "1")]
    missing = [(k, None, None, None) for k in ("2", "2", "3", "3")]
    assert got == sorted(found + (missing if join == "LEFT JOIN" else []))


def test_lookups_are_batched_not_a_round_trip_per_row(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path
) -> None:
    """100 rows, the cache off: the keys reach Redis in a few MGETs, none by GET."""
    for k in range(4):
        client.set(str(k), json.dumps({"name": f"n{k}", "plan": "p"}))
    client.config_resetstat()
    out = tmp_path / "out.json"
    sql = _lookup_sql(server, out, "JOIN", ", 'lookup.cache.max_bytes' = '0'", count=100)
    _run(spark, sql, tmp_path / "state")
    assert len(json_lines(out)) == 100
    stats = client.info("commandstats")
    assert "cmdstat_get" not in stats
    assert 0 < stats["cmdstat_mget"]["calls"] <= 20, stats["cmdstat_mget"]
    # Counted: every row, no cache hits, and each key asked for read from Redis.
    counts = lookup_counts("customers")
    assert counts is not None and counts.rows == 100 and counts.cache_hits == 0
    assert counts.keys == client.info("stats")["keyspace_hits"], counts


def test_lookups_answered_by_the_cache_are_counted(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path
) -> None:
    """The cache on, three seconds of rows, each task's rows in Arrow batches of 100 (so one
    Python worker answers many batches, whichever worker Spark hands a task): the keys not
    answered by the cache are the keys Redis was asked for."""
    for k in range(2):
        client.set(str(k), json.dumps({"name": f"n{k}", "plan": "p"}))
    client.config_resetstat()
    out = tmp_path / "out.json"
    arrow_batch = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(arrow_batch)
    spark.conf.set(arrow_batch, "100")
    try:
        _run(spark, _lookup_sql(server, out, "LEFT JOIN", count=3000), tmp_path / "state")
    finally:
        spark.conf.set(arrow_batch, before)
    counts = lookup_counts("customers")
    assert counts is not None and counts.rows == 3000 and counts.cache_hits > 0, counts
    stats = client.info("stats")
    assert counts.keys - counts.cache_hits == stats["keyspace_hits"] + stats["keyspace_misses"]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn});\nSELECT counter FROM src JOIN c ON CAST(counter AS TEXT) = c.name;",
            "the right-side of a look-up join condition must be a PRIMARY KEY column, but "
            "'name' is not",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT, name TEXT) WITH ({conn});\n"
            "SELECT counter FROM src JOIN c ON CAST(counter AS TEXT) = c.id;",
            "Redis lookup tables must have a PRIMARY KEY field defined as "
            "`field_name TEXT METADATA FROM 'key'`",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn});\nSELECT counter FROM src RIGHT JOIN c ON CAST(counter AS TEXT) = c.id;",
            "RIGHT join is not supported for lookup tables; must be a left or inner join",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn}, type = 'sink');\nSELECT counter FROM src;",
            "Cannot have a temporary table with type 'sink'; temporary tables must be type "
            "'lookup'",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn});\nSELECT name FROM c;",
            "lookup tables must be used directly within a join",
        ),
        (
            "CREATE TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn}, type = 'lookup', target = 'string');\nSELECT counter FROM src;",
            "target",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT) WITH "
            "({conn});\nSELECT counter FROM c JOIN src ON c.id = CAST(counter AS TEXT);",
            "lookup sources must be on the right side of an inner or left join",
        ),
        (
            "CREATE TEMPORARY TABLE c (id TEXT METADATA FROM 'key' PRIMARY KEY, v BYTEA) WITH "
            "(connector = 'redis', format = 'raw_bytes', address = 'redis://127.0.0.1:1');\n"
            "SELECT counter FROM src JOIN c ON CAST(counter AS TEXT) = c.id;",
            "values are json or raw_string, not raw_bytes",
        ),
    ],
)
def test_lookup_joins_that_cannot_work_are_refused(
    spark: SparkSession, server: RedisServer, tmp_path: Path, sql: str, message: str
) -> None:
    conn = f"connector = 'redis', format = 'json', {server.options()}"
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(
            _SOURCE.format(count=1) + sql.format(conn=conn)
        )
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


@pytest.mark.parametrize("bad_data", ["fail", "drop"])
def test_a_value_that_is_not_json_follows_bad_data(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path, bad_data: str
) -> None:
    """Key 2's value is not JSON: ``'fail'`` fails the job naming the table, Redis and the key;
    ``'drop'`` takes the key as having no value, so an inner join drops its rows as it does a
    missing key's (3)."""
    client.set("0", json.dumps({"name": "ann", "plan": "pro"}))
    client.set("1", json.dumps({"name": "bob", "plan": None}))
    client.set("2", "ann; pro")
    out = tmp_path / "out.json"
    sql = _lookup_sql(server, out, "JOIN", f", bad_data = '{bad_data}'")
    if bad_data == "fail":
        with pytest.raises(
            JobFailedError,
            match=r"bad data in table 'customers' \(redis key '2', json\): could not decode "
            r"ann; pro",
        ):
            _run(spark, sql, tmp_path / "state")
        return
    _run(spark, sql, tmp_path / "state")
    assert sorted(r["k"] for r in json_lines(out)) == ["0", "0", "1", "1"]


def test_a_value_changed_mid_run_is_read_once_its_cached_record_expires(
    spark: SparkSession, server: RedisServer, client: Any, tmp_path: Path
) -> None:
    """A running pipeline (an impulse source at a rate, never ending) sees a key's new value
    once the record it cached (``lookup.cache.ttl``) has expired."""
    client.set("0", json.dumps({"name": "old", "plan": "p"}))
    out = tmp_path / "out.json"
    sql = (
        "CREATE TABLE src WITH (connector = 'impulse', event_rate = '20');\n"
        "CREATE TEMPORARY TABLE customers (id TEXT METADATA FROM 'key' PRIMARY KEY, name TEXT, "
        f"plan TEXT) WITH (connector = 'redis', format = 'json', {server.options()}, "
        "'lookup.cache.ttl' = '1 second');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', "
        "format = 'json');\n"
        "INSERT INTO out SELECT counter, c.name FROM src "
        "JOIN customers AS c ON CAST(src.counter * 0 AS TEXT) = c.id;"
    )
    runner = start(spark, sql, tmp_path / "state")

    def names() -> list[str]:
        return [r["name"] for r in json_lines(out)]

    try:
        wait_until("rows with the old value", lambda: "old" in names(), timeout=120)
        client.set("0", json.dumps({"name": "new", "plan": "p"}))
        wait_until("rows with the new value", lambda: "new" in names(), timeout=60)
    finally:
        stop(runner)
    assert set(names()) == {"old", "new"}
