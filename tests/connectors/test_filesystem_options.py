"""The filesystem connector's options as Arroyo names them, seen as a reader that is not Spark
sees them (a plain listing, gzip, pyarrow): sinks partitioned by event time and by fields,
files named by ``filename.*``, rolled at ``rolling_policy.file_size``, gzip JSON, Parquet
compression and row groups, and a batch replayed part-way placed once; sources reading the
files ``source.regex_pattern`` matches, gzip- and zstd-compressed; and the diagnostics for
options that do not apply or cannot be read."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError, PlanningError
from tests.connectors.checkpoints import committed_batches, forget_commit, query_checkpoint

pytestmark = pytest.mark.spark

_SOURCE = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '1000',
    message_count = '{count}', event_time_interval = '1 second');
"""


def _run(spark: SparkSession, sql: str, state: Path, **kwargs: int) -> PipelineRunner:
    runner = PipelineRunner(spark, spark_planner(spark, state_dir=state).plan(sql), state, **kwargs)
    runner.start()
    return runner


def _files(root: Path) -> list[Path]:
    """What a plain listing shows: visible files, at any depth."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(s.startswith((".", "_")) for s in p.relative_to(root).parts)
    )


def _json_rows(path: Path) -> list[dict[str, object]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_sinks_partitioned_named_rolled_and_compressed(spark: SparkSession, tmp_path: Path) -> None:
    """One pipeline, three sinks: gzip JSON partitioned by event time and a field (PARTITIONED
    BY, which is 'partitioning.fields'), named by prefix and UUID, rolled at 2 kB; Parquet with
    snappy, 1 kB row groups and serial names with a suffix of its own; Parquet as Arroyo writes
    it by default (zstd)."""
    out, pq_out, default = tmp_path / "out", tmp_path / "pq", tmp_path / "default"
    sql = (
        _SOURCE.format(count=3000)
        + f"""
CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', type = 'sink', format = 'json',
    'json.compression' = 'gzip', 'partitioning.time_pattern' = '%Y/%m/%d/%H',
    'filename.prefix' = 'events', 'filename.strategy' = 'uuid',
    'rolling_policy.file_size' = '2kb', 'rolling_policy.interval' = interval '10 seconds')
    PARTITIONED BY (k);
CREATE TABLE pq WITH (connector = 'filesystem', path = '{pq_out}', type = 'sink',
    format = 'parquet', 'parquet.compression' = 'snappy', 'parquet.row_group_size' = '1kb',
    'filename.strategy' = 'serial', 'filename.suffix' = '.pq');
CREATE TABLE plain WITH (connector = 'filesystem', path = '{default}', type = 'sink',
    format = 'parquet');
INSERT INTO out SELECT counter, counter % 3 AS k, timestamp AS ts FROM src;
INSERT INTO pq SELECT counter, timestamp FROM src;
INSERT INTO plain SELECT counter FROM src;
"""
    )
    assert _run(spark, sql, tmp_path / "state").wait(timeout=300), "the run did not finish"

    files = _files(out)
    uuid5 = r"[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert files and all(re.fullmatch(f"events-{uuid5}\\.json\\.gz", f.name) for f in files)
    rows = []
    for f in files:
        got = _json_rows(f)
        # rolled at 2 kB of JSON lines
        assert sum(len(json.dumps(r, separators=(",", ":"))) + 1 for r in got) <= 2048, f
        for row in got:
            at = datetime.fromisoformat(str(row["ts"])).replace(tzinfo=UTC)
            assert f.parent.relative_to(out).as_posix() == f"{at:%Y/%m/%d/%H}/k={row['k']}"
        rows += got
    assert sorted(int(str(r["counter"])) for r in rows) == list(range(3000))
    assert len(files) > 2 * len({f.parent for f in files}), "the partitions' files did not roll"

    files = _files(pq_out)
    assert files and all(re.fullmatch(r"part-\d{10}-\d{5}\.pq", f.name) for f in files), files
    metas = [pq.read_metadata(f) for f in files]
    assert {m.row_group(0).column(0).compression for m in metas} == {"SNAPPY"}
    assert max(m.num_row_groups for m in metas) > 1, "1 kB row groups: more than one per file"
    counters = pa.concat_tables([pq.read_table(f) for f in files]).column("counter")
    assert sorted(counters.to_pylist()) == list(range(3000))
    plain = _files(default)
    # Arroyo's default Parquet compression
    assert plain and {pq.read_metadata(f).row_group(0).column(0).compression for f in plain} == {
        "ZSTD"
    }


def test_a_batch_replayed_part_way_is_placed_once(spark: SparkSession, tmp_path: Path) -> None:
    """A crash after the sink moved some of a batch's files, before it recorded the batch: the
    replay removes what the attempt placed (by the list the sink kept) and places its own."""
    out, state = tmp_path / "out", tmp_path / "state"
    sql = (
        _SOURCE.format(count=300)
        + f"""
CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', type = 'sink', format = 'json',
    'filename.strategy' = 'uuid', 'rolling_policy.file_size' = '100');
INSERT INTO out SELECT counter FROM src;
"""
    )
    # Ten batches of rows: the stop after two (later on a loaded machine) leaves one that
    # placed files as the last.
    first = _run(spark, sql, state, max_records_per_batch=30, stop_after_batches=2)
    assert not first.wait(timeout=300), "the first run finished before its stop"
    checkpoint = query_checkpoint(state)
    last = committed_batches(checkpoint)[-1]
    forget_commit(checkpoint, last)
    [sink_state] = (state / "queries").glob("*/sink")
    (sink_state / "committed_batch").write_text(str(last - 1))
    placing = json.loads((sink_state / "placing.json").read_text())
    # The attempt had moved only its first file before the crash; and it had cut its rows into
    # one file more than the replay will (a file the replay's names do not replace).
    # (The list's paths are relative to the sink's directory.)
    (out / placing["files"][-1]).unlink()
    extra = out / "attempt-only.json"
    extra.write_text((out / placing["files"][0]).read_text())
    placing["files"].append(extra.name)
    (sink_state / "placing.json").write_text(json.dumps(placing))
    assert _run(spark, sql, state, max_records_per_batch=30).wait(timeout=300)
    assert not extra.exists(), "the replay left a file of the attempt it replaced"
    counters = [r["counter"] for f in _files(out) for r in _json_rows(f)]
    assert sorted(counters) == list(range(300)), counters


def test_serial_names_never_replace_files_they_did_not_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A fresh pipeline numbers its batches from 0 again: with serial names it would replace an
    earlier run's files. It fails instead, naming the file, and the earlier files stay."""
    out = tmp_path / "out"
    sql = (
        _SOURCE.format(count=5)
        + f"""
CREATE TABLE out WITH (connector = 'filesystem', path = '{out}', type = 'sink', format = 'json',
    'filename.strategy' = 'serial');
INSERT INTO out SELECT counter FROM src;
"""
    )
    assert _run(spark, sql, tmp_path / "first").wait(timeout=300)
    before = {f: f.read_bytes() for f in _files(out)}
    assert before
    with pytest.raises(JobFailedError, match=r"exists and is not this pipeline's"):
        _run(spark, sql, tmp_path / "second").wait(timeout=300)
    assert {f: f.read_bytes() for f in _files(out)} == before


def test_source_reads_the_files_its_pattern_matches_compressed(
    spark: SparkSession, tmp_path: Path
) -> None:
    data, out = tmp_path / "in", tmp_path / "out.json"
    (data / "2024" / "01").mkdir(parents=True)
    (data / "skip").mkdir()
    lines = [json.dumps({"id": i}) for i in range(6)]
    with gzip.open(data / "2024" / "01" / "a.json.gz", "wt") as f:
        f.write("\n".join(lines[:3]) + "\n")
    with pa.output_stream(str(data / "2024" / "b.json.gz"), compression="gzip") as f:
        f.write(("\n".join(lines[3:]) + "\n").encode())
    with gzip.open(data / "skip" / "c.json.gz", "wt") as f:
        f.write(json.dumps({"id": 99}) + "\n")
    zstd = tmp_path / "z"
    zstd.mkdir()
    with pa.output_stream(str(zstd / "d.json.zst"), compression="zstd") as f:
        f.write(b'{"id": 7}\n{"id": 8}\n')
    sql = f"""
CREATE TABLE gz (id BIGINT) WITH (connector = 'filesystem', path = '{data}', type = 'source',
    format = 'json', 'source.regex_pattern' = '^2024/.*\\.json\\.gz$',
    'source.compression' = 'gzip');
CREATE TABLE zs (id BIGINT) WITH (connector = 'filesystem', path = '{zstd}', type = 'source',
    format = 'json', compression_format = 'zstd', 'source.regex-pattern' = 'd[.]json');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink', format = 'json');
INSERT INTO out SELECT id FROM gz UNION ALL SELECT id FROM zs;
"""
    # Three records a batch: offsets inside the decompressed files.
    assert _run(spark, sql, tmp_path / "state", max_records_per_batch=3).wait(timeout=300)
    got = sorted(json.loads(line)["id"] for line in out.read_text().splitlines() if line)
    assert got == [0, 1, 2, 3, 4, 5, 7, 8]


_SINK = "CREATE TABLE out WITH (connector = 'filesystem', path = '/tmp/x', type = 'sink', "
_READ = "CREATE TABLE i WITH (connector = 'filesystem', path = '/tmp/x', type = 'source', "


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            _READ + "format = 'json', 'rolling_policy.file_size' = '1MB');",
            "option 'rolling_policy.file_size' is for sink tables of connector 'filesystem'",
        ),
        (
            _SINK + "format = 'json', 'source.regex_pattern' = 'a');",
            "option 'source.regex_pattern' is for source tables of connector 'filesystem'",
        ),
        (_READ + "format = 'json', 'source.regex_pattern' = '(');", "could not parse regex"),
        (_READ + "format = 'json', 'source.compression' = 'lzma');", "'gzip' or 'zstd'"),
        (_SINK + "format = 'json', 'partitioning.time_pattern' = '%Q');", "'%Q' is not supported"),
        (_SINK + "format = 'json', 'rolling_policy.file_size' = '12 parsecs');", "data size"),
        (_SINK + "format = 'json', 'rolling_policy.interval' = 'soon');", "'soon'"),
        (_SINK + "format = 'json', 'filename.strategy' = 'ulid');", "'serial' or 'uuid'"),
        (
            _SINK + "format = 'parquet', 'parquet.row_group_size' = '2TB');",
            "row_group_size must be between 1 and 1073741824 bytes",
        ),
        (_SINK + "format = 'json', 'multipart.max_parts' = '3');", "unknown option"),
        (_SINK + "format = 'json', 'filename.prefix' = '../up');", "cannot hold '/'"),
        (_SINK + "format = 'json', 'filename.prefix' = '_x');", "hidden from readers"),
        (_SINK + "format = 'json', 'partitioning.time_pattern' = ' ');", "empty pattern"),
        (
            _READ + "format = 'json', 'json.compression' = 'gzip');",
            "option 'json.compression' is not used by source tables of connector 'filesystem'",
        ),
        (
            _READ + "format = 'parquet', 'parquet.row_group_size' = '1MB');",
            "option 'parquet.row_group_size' is not used by source tables",
        ),
        (
            "CREATE TABLE out WITH (connector = 'stdout', 'json.compression' = 'gzip');",
            "option 'json.compression' is not used by sink tables of connector 'stdout'",
        ),
        (
            _SINK + "format = 'json', 'partitioning.fields' = '[counter, nope]');"
            "\nINSERT INTO out SELECT counter FROM j;",
            "partition field 'nope' does not exist in the schema of 'out' (columns: counter)",
        ),
    ],
)
def test_options_that_do_not_apply_or_do_not_read_are_refused(
    spark: SparkSession, tmp_path: Path, sql: str, message: str
) -> None:
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(
            "CREATE TABLE j WITH (connector = 'impulse', event_rate = '1');\n"
            + sql
            + "\nSELECT counter FROM j;"
        )
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


def test_a_parquet_source_reads_only_the_columns_its_query_uses(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark pushes no column pruning into a streaming source; the engine tells the Parquet
    source which columns each query uses, and it decodes only those. Seen from outside: a column
    whose values cannot be read as the table's type fails the query that reads it and not one
    that does not, and the columns read hold the file's values (also through a UNION, which
    uses its inputs by position)."""
    data = tmp_path / "in"
    data.mkdir()
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "bad": [{"x": 1}] * 3})
    pq.write_table(table, data / "a.parquet")
    head = f"""CREATE TABLE t (id BIGINT, name TEXT, bad BIGINT) WITH (connector = 'filesystem',
    path = '{data}', type = 'source', format = 'parquet');
CREATE TABLE out WITH (connector = 'single_file', path = '{{out}}', type = 'sink',
    format = 'json');
"""
    for i, query in enumerate(
        [
            "INSERT INTO out SELECT id, upper(name) AS name FROM t WHERE id > 1;",
            "INSERT INTO out SELECT id, upper(name) AS name FROM t WHERE id = 2 "
            "UNION ALL SELECT id, upper(name) AS name FROM t WHERE id = 3;",
        ]
    ):
        out = tmp_path / f"out{i}.json"
        sql = head.format(out=out) + query
        assert _run(spark, sql, tmp_path / f"state{i}").wait(timeout=300)
        got = sorted(json.loads(line)["name"] for line in out.read_text().splitlines() if line)
        assert got == ["B", "C"], query
    sql = head.format(out=tmp_path / "bad.json") + "INSERT INTO out SELECT id, bad FROM t;"
    with pytest.raises(JobFailedError, match=r"a\.parquet.*column 'bad' is struct<x:bigint>"):
        _run(spark, sql, tmp_path / "state-bad").wait(timeout=300)


@pytest.mark.parametrize("a_type", [pa.int64(), pa.int32()], ids=["columnar", "rows-cast"])
def test_a_parquet_source_reads_only_the_struct_fields_its_query_takes(
    spark: SparkSession, tmp_path: Path, a_type: pa.DataType
) -> None:
    """Of a struct column whose query takes fields and tests it for null, only those fields are
    decoded; the struct's nulls are still its own. Seen from outside: a field that cannot be read
    as the table's type fails a query that uses the struct whole, and not one that takes the
    other field. Read as column vectors (the file's types are the table's) and a row at a time
    (a field is cast)."""
    data = tmp_path / "in"
    data.mkdir()
    s = pa.struct([("a", a_type), ("bad", pa.struct([("x", pa.int64())]))])
    structs = [{"a": 1, "bad": {"x": 1}}, None, {"a": None, "bad": {"x": 3}}, {"a": 4, "bad": None}]
    table = pa.table({"id": [1, 2, 3, 4], "s": pa.array(structs, type=s)})
    pq.write_table(table, data / "a.parquet")
    head = f"""CREATE TABLE t (id BIGINT, s STRUCT<a: BIGINT, bad: BIGINT>) WITH (
    connector = 'filesystem', path = '{data}', type = 'source', format = 'parquet');
CREATE TABLE out WITH (connector = 'single_file', path = '{{out}}', type = 'sink',
    format = 'json');
"""
    out = tmp_path / "out.json"
    sql = head.format(out=out) + "INSERT INTO out SELECT id, s.a AS a FROM t WHERE s IS NOT NULL;"
    assert _run(spark, sql, tmp_path / "state").wait(timeout=300)
    got = sorted((r["id"], r.get("a")) for r in _json_rows(out))
    assert got == [(1, 1), (3, None), (4, 4)]
    sql = head.format(out=tmp_path / "bad.json") + "INSERT INTO out SELECT id, s FROM t;"
    with pytest.raises(JobFailedError, match=r"a\.parquet.*column 's' is struct<a:"):
        _run(spark, sql, tmp_path / "state-bad").wait(timeout=300)
