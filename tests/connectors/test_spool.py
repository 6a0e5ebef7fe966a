"""The spool of sources that cannot replay (runtime/spool.py), as files: positions run on across
segments and reopenings, a record cut short by a crash is cut off, committed segments go, and
the sequence numbers spooled are found again."""

from __future__ import annotations

from pathlib import Path

from arroyo.connectors.runtime.spool import Spool


def test_positions_run_on_across_segments_and_reopening(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=100)
    for n in range(10):
        spool.append(f"t/{n}", 1000 + n, b"x" * 30, sequence=n)
    assert len(spool.segments()) > 2
    everything = list(spool.read(0, spool.end))
    assert [t for t, _, _ in everything] == [f"t/{n}" for n in range(10)]
    middle = Spool.size("t/0", b"x" * 30) * 4
    assert [t for t, _, _ in spool.read(middle, spool.end)] == [f"t/{n}" for n in range(4, 10)]
    reopened = Spool(tmp_path)
    assert (reopened.start, reopened.end, reopened.last_sequence()) == (0, spool.end, 9)
    reopened.append("t/10", 2000, b"y")
    assert [t for t, _, _ in reopened.read(spool.end, reopened.end)] == ["t/10"]


def test_a_record_cut_short_by_a_crash_is_cut_off(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append("a", 1, b"first")
    spool.append("b", 2, b"second")
    whole = spool.end
    segment = tmp_path / f"{spool.segments()[-1]:020d}.log"
    with segment.open("ab") as f:
        f.write(b"\x05\x00\x00")  # the start of a header, then the crash
    reopened = Spool(tmp_path)
    assert reopened.end == whole and segment.stat().st_size == whole
    reopened.append("c", 3, b"third")
    assert [p for _, _, p in reopened.read(0, reopened.end)] == [b"first", b"second", b"third"]


def test_committed_segments_are_removed_but_not_the_one_written(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=50)
    for n in range(6):
        spool.append("t", n, b"z" * 20)
    before = spool.segments()
    spool.cut(spool.end)
    after = spool.segments()
    assert len(after) == 1 and after[0] == before[-1]
    assert Spool(tmp_path).start == after[0]


def test_a_batch_ends_at_a_record_within_its_bytes(tmp_path: Path) -> None:
    """``boundary``: where a micro-batch of at most so many bytes ends: the end of a whole
    record, from the writer's marks (about every megabyte) or, for what an earlier run wrote,
    from the records' headers; a record larger than the limit is taken alone."""
    spool = Spool(tmp_path)
    size = Spool.size("t", b"x" * 1000)
    for n in range(3000):
        spool.append("t", n, b"x" * 1000)
    assert spool.boundary(0, spool.end, spool.end) == spool.end
    marked = spool.boundary(0, 1_500_000, spool.end)
    assert marked % size == 0 and 400_000 < marked <= 1_500_000
    assert spool.boundary(0, 10 * size + 5, spool.end) == 10 * size  # before the first mark
    assert spool.boundary(3 * size, 10 * size, spool.end) == 13 * size
    assert spool.boundary(0, 5, spool.end) == size
    reopened = Spool(tmp_path)  # no marks: the headers are read
    assert reopened.boundary(size, 1_500_000, reopened.end) == size + (1_500_000 // size) * size


def test_the_position_a_spool_was_cut_at_is_remembered(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    assert spool.committed() == 0
    for n in range(5):
        spool.append("t", n, b"z")
    spool.cut(2 * Spool.size("t", b"z"))
    assert Spool(tmp_path).committed() == 2 * Spool.size("t", b"z")


def test_the_driver_reads_the_batches_where_executors_cannot_read_the_spool(
    tmp_path: Path,
) -> None:
    """What ``read_spooled`` asks for (``executors_read``, from the Spark setting or local
    mode) picks the reader Spark gets."""
    from arroyo.connectors.runtime.spool import DriverReads, SpooledReader, StoppingWrapper
    from arroyo.connectors.sse.options import SseOptions
    from arroyo.connectors.sse.source import SseSource

    table = SseOptions.model_validate({"endpoint": "http://127.0.0.1:1/e"})
    options = {"options": table.model_dump_json(by_alias=True), "spool": str(tmp_path)}
    assert isinstance(SseSource(options).streamReader(None), SpooledReader)  # type: ignore[arg-type]
    driver = SseSource({**options, "executors_read": "false"}).streamReader(None)  # type: ignore[arg-type]
    assert isinstance(driver, StoppingWrapper)
    assert isinstance(driver.simple_reader, DriverReads)

    # A batch the wrapper has not cached (replayed after a restart, or started past what was
    # committed) is read by the driver too, never left to a task that may not see the spool.
    spool = Spool(tmp_path)
    for n in range(3):
        spool.append("t", n, b"%d" % n)
    cached = driver.getCache({"pos": Spool.size("t", b"0")}, {"pos": spool.end})
    assert cached is not None
    assert [v for b in cached for v in b.column("value").to_pylist()] == [b"1", b"2"]
