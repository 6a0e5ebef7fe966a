"""The bounded file source read in the JVM (BoundedFilesSource.java) gives the rows Spark's own
batch readers give for the same files (lines and Parquet), batch by batch as small as a caller
asks, then end-of-input markers."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from arroyo.connectors.runtime.file_tables import FILES_SOURCE
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


def _files(root: Path) -> Path:
    """JSON lines over nested files, with blank lines, CRLF endings, a last line without a
    newline, a malformed UTF-8 byte, and files a reader must not see."""
    (root / "day=1").mkdir(parents=True)
    (root / "a.json").write_bytes(b'{"n": 1}\n\n{"n": 2}\r\r\n   \n{"n": 3}')
    (root / "day=1" / "b.json").write_bytes(
        b'{"n": 4, "s": "caf\xc3\xa9"}\n{"n": 5, "s": "\xff"}\n'
    )
    (root / "c.json").write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(6, 40)))
    (root / "_hidden.json").write_bytes(b'{"n": -1}\n')
    (root / ".dot.json").write_bytes(b'{"n": -2}\n')
    return root


def _stream(
    spark: SparkSession, reader: DataFrame, work: Path, batches: list[int] | None = None
) -> tuple[list[Row], int]:
    """The rows of a bounded stream until its first end-of-input marker, and the number of
    batches that carried rows (their sizes into ``batches``)."""
    rows: list[Row] = []
    batches = [] if batches is None else batches
    ended: list[bool] = []

    def take(df: DataFrame, _batch_id: int) -> None:
        got = df.collect()
        data = [r for r in got if not r["_eoi"]]
        rows.extend(data)
        if data:
            batches.append(len(data))
        if any(r["_eoi"] for r in got):
            ended.append(True)

    query = reader.writeStream.foreachBatch(take).option("checkpointLocation", str(work)).start()

    def at_the_end() -> bool:
        error = query.exception()
        if error is not None:
            raise error  # the query failed: its own message, whole
        return bool(ended)

    try:
        wait_until("the end-of-input marker", at_the_end, timeout=180)
    finally:
        query.stop()
    return rows, len(batches)


def _jvm(spark: SparkSession, path: Path, max_records: int, **options: str) -> DataFrame:
    reader = spark.readStream.format(FILES_SOURCE).option("path", str(path))
    for key, value in {"max_records": str(max_records), **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def _visible(root: Path, suffix: str) -> list[str]:
    return [
        str(p)
        for p in sorted(root.rglob(f"*{suffix}"))
        if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    ]


@pytest.mark.parametrize("max_records", [0, 4])
def test_lines_are_those_of_sparks_batch_reader(
    spark: SparkSession, tmp_path: Path, max_records: int
) -> None:
    root = _files(tmp_path / "in")
    with gzip.open(root / "day=1" / "d.json.gz", "wb") as f:
        f.write(b'{"n": 40}\n\n{"n": 41}\n')
    for compression, suffix, count in (("none", ".json", 39), ("gzip", ".gz", 2)):
        options = {"compression": compression, "pattern": f"\\{suffix}$"}
        rows, batches = _stream(spark, _jvm(spark, root, max_records, **options), tmp_path / suffix)
        values = [r["value"] for r in rows]
        # Spark's own reader of the same visible files (it ends lines at \r\n too, and reads
        # .gz files decompressed), blank lines left out as a record reader leaves them.
        batch = [r.value for r in spark.read.text(_visible(root, suffix)).collect()]
        assert Counter(values) == Counter(v for v in batch if v.strip())
        assert len(values) == count
        assert batches >= (max(1, count // max_records) if max_records else 1)
        if compression == "none":
            assert '{"n": 4, "s": "café"}' in values and '{"n": 5, "s": "\ufffd"}' in values


def test_parquet_rows_are_those_of_sparks_batch_reader(spark: SparkSession, tmp_path: Path) -> None:
    """Parquet files of narrower and other types than the table's, one without a column, one
    without rows: cast as Spark casts them, the missing column null."""
    root = tmp_path / "in"
    root.mkdir()
    narrow = pa.table({"n": pa.array(range(10), pa.int32()), "s": [f"s{i}" for i in range(10)]})
    pq.write_table(narrow, root / "a.parquet", row_group_size=3)
    pq.write_table(pa.table({"n": pa.array([10, 11], pa.int64())}), root / "b.parquet")
    # A file without rows is not read: its column, of a type no BIGINT is cast from, is not
    # an error.
    pq.write_table(
        pa.table({"n": pa.array([], pa.struct([("x", pa.int64())]))}), root / "c.parquet"
    )
    (root / "_skip.parquet").write_bytes(b"not parquet")
    columns = "`n` BIGINT, `s` STRING"
    rows, batches = _stream(
        spark, _jvm(spark, root, 4, mode="parquet", columns=columns), tmp_path / "work"
    )
    got = Counter((r["n"], r["s"]) for r in rows)
    files = [f for f in _visible(root, ".parquet") if not f.endswith("c.parquet")]
    batch = spark.read.schema(columns).parquet(*files).collect()
    assert got == Counter((r.n, r.s) for r in batch)
    assert len(rows) == 12 and (11, None) in got and batches >= 3


def test_a_linked_directory_is_read_where_it_leads(spark: SparkSession, tmp_path: Path) -> None:
    root = _files(tmp_path / "in")
    (tmp_path / "link").symlink_to(root, target_is_directory=True)
    rows, _ = _stream(spark, _jvm(spark, tmp_path / "link", 0), tmp_path / "work")
    assert len(rows) == 39


def test_parquet_structs_are_read_by_name(spark: SparkSession, tmp_path: Path) -> None:
    """Struct fields in another order than the table's land in their own fields; a field the
    file lacks is null, and one the table lacks is not read."""
    root = tmp_path / "in"
    root.mkdir()
    s = [{"b": "x", "a": "y", "extra": 1}]
    pq.write_table(pa.table({"s": s, "t": [[{"q": 2}]]}), root / "swapped.parquet")
    columns = "`s` STRUCT<a: STRING, b: STRING, c: BIGINT>, `t` ARRAY<STRUCT<p: INT, q: BIGINT>>"
    rows, _ = _stream(spark, _jvm(spark, root, 0, mode="parquet", columns=columns), tmp_path / "w")
    assert [(r["s"].asDict(), [e.asDict() for e in r["t"]]) for r in rows] == [
        ({"a": "y", "b": "x", "c": None}, [{"p": None, "q": 2}])
    ]


def test_a_table_read_twice_decodes_the_struct_fields_both_reads_take(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The engine tells a source which struct fields its query takes (ColumnUse.java); a table
    read twice in one query (a self-join) is one source to it, so each read decodes what both
    take: here one takes ``s.a`` and the other ``s.b``, and neither reads as null. (``s.c``
    cannot be read as the table's type: decoding it would fail the query.)"""
    from arroyo.engine.plans import declare_column_use

    root = tmp_path / "in"
    root.mkdir()
    s = pa.array([{"a": i, "b": f"b{i}", "c": {"x": i}} for i in range(5)])
    pq.write_table(pa.table({"id": range(5), "s": s}), root / "t.parquet")
    columns = "`id` BIGINT, `s` STRUCT<a: BIGINT, b: STRING, c: BIGINT>"

    def read() -> DataFrame:
        reader = _jvm(spark, root, 0, mode="parquet", columns=columns, use_id="t")
        return reader.where("NOT _eoi")

    left, right = read().alias("l"), read().alias("r")
    joined = left.join(right, "id").selectExpr("id", "l.s.a AS a", "r.s.b AS b")
    checkpoint = str((tmp_path / "work").absolute())
    declare_column_use(joined, checkpoint)
    rows: list[Row] = []
    query = (
        joined.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        wait_until("the joined rows", lambda: len(rows) >= 5 or query.exception(), timeout=180)
    finally:
        query.stop()
    assert sorted((r["id"], r["a"], r["b"]) for r in rows) == [(i, i, f"b{i}") for i in range(5)]


def test_parquet_int96_timestamps_are_read(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's old default timestamp encoding, still common in data lakes."""
    root = tmp_path / "in"
    root.mkdir()
    when = pa.array([1_700_000_000_000_000], pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table({"t": when}), root / "old.parquet", use_deprecated_int96_timestamps=True
    )
    rows, _ = _stream(
        spark, _jvm(spark, root, 0, mode="parquet", columns="`t` TIMESTAMP"), tmp_path / "w"
    )
    batch = spark.read.parquet(str(root / "old.parquet")).collect()
    assert [r["t"] for r in rows] == [r.t for r in batch] and batch[0].t is not None


def test_parquet_of_a_type_that_cannot_be_cast_fails_naming_file_and_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "in"
    root.mkdir()
    pq.write_table(pa.table({"n": [{"a": 1}]}), root / "nested.parquet")
    reader = _jvm(spark, root, 0, mode="parquet", columns="`n` BIGINT")
    with pytest.raises(Exception, match=r"nested\.parquet.*column 'n' is struct<a:bigint>.*bigint"):
        _stream(spark, reader, tmp_path / "w")


@pytest.mark.parametrize(
    ("cap", "sizes"), [(50_000, [40_000, 20_000]), (15_000, [15_000, 5_000] * 3)]
)
def test_parquet_batches_end_at_row_groups_where_the_cap_allows(
    spark: SparkSession, tmp_path: Path, cap: int, sizes: list[int]
) -> None:
    """Three row groups of 20,000 rows: a cap of 50,000 takes two whole groups, then the third
    (no task decodes rows another batch gives); a cap below a group takes part of it, then the
    rest. Every row once."""
    root = tmp_path / "in"
    root.mkdir()
    pq.write_table(pa.table({"n": range(60_000)}), root / "groups.parquet", row_group_size=20_000)
    assert pq.ParquetFile(root / "groups.parquet").metadata.num_row_groups == 3
    got: list[int] = []
    reader = _jvm(spark, root, cap, mode="parquet", columns="`n` BIGINT")
    rows, _ = _stream(spark, reader, tmp_path / "w", got)
    assert got == sizes
    assert sorted(r["n"] for r in rows) == list(range(60_000))


def test_a_missing_path_is_empty_and_ends(spark: SparkSession, tmp_path: Path) -> None:
    values, batches = _stream(spark, _jvm(spark, tmp_path / "nowhere", 0), tmp_path / "work")
    assert (values, batches) == ([], 0)


def test_a_corrupt_gzip_file_fails_naming_it(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.json.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(Exception, match=r"cannot read '.*bad\.json\.gz' as gzip"):
        _stream(spark, _jvm(spark, tmp_path / "in", 0, compression="gzip"), tmp_path / "work")


@pytest.mark.parametrize("bad_data", ["fail", "drop"])
def test_a_corrupt_parquet_file_follows_bad_data(
    spark: SparkSession, tmp_path: Path, bad_data: str
) -> None:
    """A file that is not Parquet (a truncated upload, say) fails the run naming it, or under
    bad_data = 'drop' is skipped, named in the run's progress and log, the other files read."""
    from arroyo.engine.catalog import spark_planner
    from arroyo.engine.runner import PipelineRunner
    from arroyo.errors import JobFailedError

    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.table({"n": list(range(10))}), src / "a.parquet")
    (src / "b.parquet").write_bytes(b"PAR1" + b"cut short" * 20)
    pq.write_table(pa.table({"n": list(range(10, 20))}), src / "c.parquet")
    out = tmp_path / "out.json"
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = 'filesystem', path = '{src}', "
        f"format = 'parquet', type = 'source', bad_data = '{bad_data}');\n"
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"
        "INSERT INTO out SELECT n FROM src;"
    )
    state = tmp_path / "state"
    runner = PipelineRunner(spark, spark_planner(spark, state_dir=state).plan(sql), state)
    runner.start()
    if bad_data == "fail":
        with pytest.raises(JobFailedError, match=r"b\.parquet is not a Parquet file"):
            runner.wait(timeout=300)
        return
    assert runner.wait(timeout=300)
    rows = [json.loads(line)["n"] for line in out.read_text().splitlines()]
    assert sorted(rows) == list(range(20))
    assert runner.progress.dropped_files == {str(src / "b.parquet")}
