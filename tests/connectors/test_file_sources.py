"""The bounded lines source read in the JVM (BoundedLinesSource.java) gives the rows Spark's own
batch reader gives for the same files, and those of the Python source it replaced, batch by batch
as small as a caller asks, then end-of-input markers."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from arroyo.connectors.runtime.file_tables import LINES_SOURCE
from arroyo.connectors.runtime.files import BoundedFilesSource

pytestmark = pytest.mark.spark


def _files(root: Path) -> Path:
    """JSON lines over nested files, with blank lines, CRLF endings, a last line without a
    newline, a malformed UTF-8 byte, and files a reader must not see."""
    (root / "day=1").mkdir(parents=True)
    (root / "a.json").write_bytes(b'{"n": 1}\n\n{"n": 2}\r\n   \n{"n": 3}')
    (root / "day=1" / "b.json").write_bytes(
        b'{"n": 4, "s": "caf\xc3\xa9"}\n{"n": 5, "s": "\xff"}\n'
    )
    (root / "c.json").write_bytes(b"".join(b'{"n": %d}\n' % i for i in range(6, 40)))
    (root / "_hidden.json").write_bytes(b'{"n": -1}\n')
    (root / ".dot.json").write_bytes(b'{"n": -2}\n')
    return root


def _stream(spark: SparkSession, reader: DataFrame, work: Path) -> tuple[list[str], int]:
    """The values of a bounded stream's rows until its first end-of-input marker, and the
    number of batches that carried rows."""
    values: list[str] = []
    batches: list[int] = []
    ended: list[bool] = []

    def take(df: DataFrame, _batch_id: int) -> None:
        rows = df.collect()
        data = [r["value"] for r in rows if not r["_eoi"]]
        values.extend(data)
        if data:
            batches.append(len(data))
        if any(r["_eoi"] for r in rows):
            ended.append(True)

    query = reader.writeStream.foreachBatch(take).option("checkpointLocation", str(work)).start()
    try:
        while not ended:
            assert query.exception() is None, query.exception()
            query.awaitTermination(0.2)
    finally:
        query.stop()
    return values, len(batches)


def _jvm(spark: SparkSession, path: Path, max_records: int, **options: str) -> DataFrame:
    reader = spark.readStream.format(LINES_SOURCE).option("path", str(path))
    for key, value in {"max_records": str(max_records), **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def _python(spark: SparkSession, path: Path, max_records: int, **options: str) -> DataFrame:
    spark.dataSource.register(BoundedFilesSource)
    reader = spark.readStream.format(BoundedFilesSource.name()).option("path", str(path))
    for key, value in {"mode": "lines", "max_records": str(max_records), **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def test_lines_are_those_of_sparks_batch_reader(spark: SparkSession, tmp_path: Path) -> None:
    root = _files(tmp_path / "in")
    values, batches = _stream(spark, _jvm(spark, root, 4), tmp_path / "jvm")
    # Spark's own reader of the same visible files (it ends lines at \r\n too), blank lines
    # left out as a record reader leaves them.
    visible = [str(p) for p in sorted(root.rglob("*.json")) if not p.name.startswith(("_", "."))]
    batch = [r.value for r in spark.read.text(visible).collect() if r.value.strip()]
    assert Counter(values) == Counter(batch)
    assert len(values) == 39 and batches >= 39 // 4
    assert '{"n": 4, "s": "café"}' in values and '{"n": 5, "s": "\ufffd"}' in values


@pytest.mark.parametrize("max_records", [0, 3])
def test_lines_are_those_the_python_source_gave(
    spark: SparkSession, tmp_path: Path, max_records: int
) -> None:
    root = _files(tmp_path / "in")
    with gzip.open(root / "day=1" / "d.json.gz", "wb") as f:
        f.write(b'{"n": 40}\n\n{"n": 41}\n')
    for compression, pattern in (("none", r"\.json$"), ("gzip", r"\.gz$")):
        options = {"compression": compression, "pattern": pattern}
        jvm, _ = _stream(spark, _jvm(spark, root, max_records, **options), tmp_path / f"j{pattern}")
        python, _ = _stream(
            spark, _python(spark, root, max_records, **options), tmp_path / f"p{pattern}"
        )
        assert jvm == python  # in the same order
        assert jvm, compression


def test_a_missing_path_is_empty_and_ends(spark: SparkSession, tmp_path: Path) -> None:
    values, batches = _stream(spark, _jvm(spark, tmp_path / "nowhere", 0), tmp_path / "work")
    assert (values, batches) == ([], 0)


def test_a_corrupt_gzip_file_fails_naming_it(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.json.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(Exception, match=r"cannot read '.*bad\.json\.gz' as gzip"):
        _stream(spark, _jvm(spark, tmp_path / "in", 0, compression="gzip"), tmp_path / "work")
