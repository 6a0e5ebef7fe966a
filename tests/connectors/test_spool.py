"""The spool of sources that cannot replay (runtime/spool.py), as files: positions run on across
segments and reopenings, a record cut short by a crash is cut off, committed segments go, and
the sequence numbers spooled are found again."""

from __future__ import annotations

import itertools
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


def test_many_records_appended_at_once_read_as_appended_one_by_one(tmp_path: Path) -> None:
    one, many = (
        Spool(tmp_path / "one", segment_bytes=4096),
        Spool(tmp_path / "many", segment_bytes=4096),
    )
    payloads = [b"p" * (n % 7) for n in range(3000)]
    for at in range(0, 3000, 500):
        for payload in payloads[at : at + 500]:
            one.append("t", at, payload, flush=False)
        many.append_many("t", at, payloads[at : at + 500])
    assert many.flush() == one.flush()
    assert list(many.read(0, many.end)) == list(one.read(0, one.end))
    assert Spool(tmp_path / "many").end == many.end  # whole records, as a reopening finds them


def test_a_record_of_lines_reads_as_its_messages(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append("a", 1, b"first")
    spool.append_lines("b", 2, b"x\ny\n\nz")
    spool.append("c", 3, b"last")
    assert list(spool.read(0, spool.flush())) == [
        ("a", 1, b"first"),
        *[("b", 2, line) for line in (b"x", b"y", b"", b"z")],
        ("c", 3, b"last"),
    ]
    assert spool.sequences() == set()


def test_a_range_splits_at_record_ends_into_about_equal_parts(tmp_path: Path) -> None:
    """``split``: where a micro-batch's range is cut for its tasks (the writer's marks, about
    every megabyte); a range with no mark within, or one written before this run, is one part."""
    spool = Spool(tmp_path)
    size = Spool.size("t", b"x" * 1000)
    for at in range(0, 6000, 1000):
        spool.append_many("t", at, [b"x" * 1000] * 1000)
    cuts = spool.split(0, spool.end, 2)
    assert len(cuts) == 1 and cuts[0] % size == 0
    assert abs(cuts[0] - spool.end // 2) <= 1_100_000
    three = spool.split(size, spool.end, 3)
    assert len(three) == 2 and size < three[0] < three[1] < spool.end
    assert all(c % size == 0 for c in three)
    assert spool.split(0, 10 * size, 2) == []  # no mark within
    assert Spool(tmp_path).split(0, spool.end, 2) == []  # no marks: written before this run
    parts = [0, *cuts, spool.end]
    read = [r for lo, hi in itertools.pairwise(parts) for r in spool.read(lo, hi)]
    assert len(read) == 6000


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
