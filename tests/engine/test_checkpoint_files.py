"""Checkpoint files on local disks go through Arroyo's manager (libs/arroyo/java/arroyo/state/
LocalCheckpointFileManager.java) with the guarantees Spark's own gives: whole files or none, a
file that must not be overwritten is refused with Hadoop's FileAlreadyExistsException (how
Spark tells that a batch's offsets were already written), and listing, reading and deleting as
Spark's manager does. Recovery through it is covered by every resumed golden case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from arroyo.engine.session import CHECKPOINT_FILE_MANAGER

pytestmark = pytest.mark.spark


def _manager(spark: SparkSession, root: Path) -> tuple[Any, Any]:
    jvm = spark._jvm
    assert jvm is not None
    # The Hadoop configuration Spark hands its streaming queries (it carries the SQL settings).
    conf = spark._jsparkSession.sessionState().newHadoopConf()  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(str(root))
    checkpointing = jvm.org.apache.spark.sql.execution.streaming.checkpointing
    manager = checkpointing.CheckpointFileManager.create(path, conf)
    return manager, jvm


def _write(manager: Any, path: Any, text: str, overwrite: bool) -> None:
    out = manager.createAtomic(path, overwrite)
    out.write(bytearray(text.encode()))
    out.close()


def _read(manager: Any, path: Any) -> str:
    stream = manager.open(path)
    data = bytearray()
    while (b := stream.read()) != -1:
        data.append(b)
    stream.close()
    return data.decode()


def test_the_session_uses_arroyos_manager_for_local_paths(
    spark: SparkSession, tmp_path: Path
) -> None:
    manager, _ = _manager(spark, tmp_path)
    assert manager.getClass().getName() == CHECKPOINT_FILE_MANAGER
    assert manager.isLocal()


def test_files_are_written_whole_and_a_kept_file_is_never_overwritten(
    spark: SparkSession, tmp_path: Path
) -> None:
    manager, jvm = _manager(spark, tmp_path)
    offsets = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "offsets" / "7"))
    _write(manager, offsets, "batch 7", overwrite=False)
    assert (tmp_path / "offsets" / "7").read_text() == "batch 7"
    with pytest.raises(Py4JJavaError) as refused:
        _write(manager, offsets, "batch 7 again", overwrite=False)
    refusal = refused.value.java_exception.getClass().getName()
    assert refusal == "org.apache.hadoop.fs.FileAlreadyExistsException"  # what Spark catches
    assert (tmp_path / "offsets" / "7").read_text() == "batch 7"
    _write(manager, offsets, "rewritten", overwrite=True)
    assert _read(manager, offsets) == "rewritten"
    # Nothing but the file itself is left in its directory (no temporary files, no .crc).
    assert [p.name for p in (tmp_path / "offsets").iterdir()] == ["7"]


def test_cancelled_writes_leave_nothing(spark: SparkSession, tmp_path: Path) -> None:
    manager, jvm = _manager(spark, tmp_path)
    path = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "commits" / "3"))
    out = manager.createAtomic(path, False)
    out.write(bytearray(b"half"))
    out.cancel()
    assert not manager.exists(path)
    assert list((tmp_path / "commits").iterdir()) == []


def test_list_exists_mkdirs_and_delete(spark: SparkSession, tmp_path: Path) -> None:
    manager, jvm = _manager(spark, tmp_path)
    fs = jvm.org.apache.hadoop.fs
    state = fs.Path(str(tmp_path / "state" / "0"))
    manager.mkdirs(state)
    for name in ("1.changelog", "2.changelog", "2.zip"):
        _write(manager, fs.Path(state, name), name, overwrite=True)
    listed = sorted(s.getPath().getName() for s in manager.list(state))
    assert listed == ["1.changelog", "2.changelog", "2.zip"]
    assert all(s.getLen() > 0 and not s.isDirectory() for s in manager.list(state))
    with pytest.raises(Py4JJavaError) as missing:
        manager.list(fs.Path(str(tmp_path / "nowhere")))
    assert missing.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"
    manager.delete(fs.Path(state, "2.zip"))
    assert not manager.exists(fs.Path(state, "2.zip"))
    manager.delete(fs.Path(str(tmp_path / "state")))
    assert not (tmp_path / "state").exists()
    manager.delete(fs.Path(str(tmp_path / "state")))  # deleting what is not there is fine


def test_hadoop_checksum_files_of_replaced_files_go_with_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A checkpoint begun under Spark's own manager has a ``.<name>.crc`` beside each file;
    Hadoop's reads check it, so replacing or deleting a file must take its checksum along."""
    manager, jvm = _manager(spark, tmp_path)
    fs = jvm.org.apache.hadoop.fs
    snapshot = tmp_path / "state" / "1.zip"
    snapshot.parent.mkdir()
    snapshot.write_text("old")
    (tmp_path / "state" / ".1.zip.crc").write_text("checksum of old")
    (tmp_path / "state" / ".2.zip.crc").write_text("checksum of 2")
    (tmp_path / "state" / "2.zip").write_text("two")
    assert sorted(s.getPath().getName() for s in manager.list(fs.Path(str(snapshot.parent)))) == [
        "1.zip",
        "2.zip",
    ]
    _write(manager, fs.Path(str(snapshot)), "new", overwrite=True)
    assert snapshot.read_text() == "new"
    assert not (tmp_path / "state" / ".1.zip.crc").exists()
    manager.delete(fs.Path(str(tmp_path / "state" / "2.zip")))
    assert sorted(p.name for p in snapshot.parent.iterdir()) == ["1.zip"]
