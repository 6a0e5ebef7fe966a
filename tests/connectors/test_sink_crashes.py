"""Exactly once as a reader that is not Spark sees it: ``arroyo run`` killed with -9 at random
moments, then resumed from its state directory, writes each row once into a local directory
and into an S3 bucket, as a plain listing (and pyarrow, not Spark's ``_spark_metadata``) reads
them, into a Delta table as delta-rs reads it and an Iceberg table as pyiceberg does. Between
the kills a listing may show part of a batch awaiting its replay, never a row twice."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyiceberg.table import StaticTable

from arroyo.testing.s3 import S3Server
from tests.connectors.uploads import pending_uploads
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.s3]

ROWS = 40_000


def _local_rows(out: Path) -> list[int]:
    """As a plain reader lists the directory: hidden names (``_``, ``.``) are not descended
    into, so the sink's staging, changing under the listing, is never read."""
    rows: list[int] = []
    for parent, dirs, files in os.walk(out):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for name in sorted(f for f in files if not f.startswith(("_", "."))):
            try:
                text = Path(parent, name).read_text()
            except FileNotFoundError:  # removed between the listing and the read, as above
                continue
            rows += [json.loads(line)["n"] for line in text.splitlines() if line]
    return rows


def _bucket_rows(server: S3Server, bucket: str) -> list[int]:
    fs = server.filesystem()
    # S3 has no directories: before the first commit (or after recovery removed the last
    # staged object) the prefix lists nothing, as `aws s3 ls` shows it
    selector = pafs.FileSelector(f"{bucket}/out", recursive=True, allow_not_found=True)
    infos = fs.get_file_info(selector)
    rows: list[int] = []
    for info in infos:
        relative = info.path.removeprefix(f"{bucket}/out/").split("/")
        if info.type != pafs.FileType.File or any(p.startswith(("_", ".")) for p in relative):
            continue
        try:
            with fs.open_input_file(info.path) as f:
                rows += pq.read_table(f).column("n").to_pylist()
        except FileNotFoundError:
            # Listed, then gone: part of a batch a kill cut short, which the resumed run removes
            # before it places the batch again (as a reader listing a bucket being written
            # meets it). The rows come back with the replay; the final reads see them once.
            continue
    return rows


def _delta_rows(table: Path) -> list[int]:
    """The rows of the Delta table as delta-rs reads it (its log, not Spark's)."""
    try:
        return DeltaTable(str(table)).to_pyarrow_table().column("n").to_pylist()
    except TableNotFoundError:  # before the first commit
        return []


def _iceberg_rows(warehouse: Path) -> list[int]:
    """The rows of the Iceberg table (a Hadoop catalog's) as pyiceberg reads them."""
    metadata = warehouse / "default" / "t" / "metadata"
    try:
        version = (metadata / "version-hint.text").read_text().strip()
    except FileNotFoundError:  # before the table was made
        return []
    table = StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))
    return table.scan().to_arrow().column("n").to_pylist()


def _no_row_twice(rows: list[int], where: str) -> None:
    twice = [n for n, c in Counter(rows).items() if c > 1]
    assert not twice, f"{where}: rows seen twice, e.g. {twice[:5]}"


def test_kill_9_leaves_each_row_once_for_a_plain_reader(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    seed = int(os.environ.get("ARROYO_TEST_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    out, lake, warehouse = tmp_path / "out", tmp_path / "lake", tmp_path / "warehouse"
    script = tmp_path / "crash.sql"
    script.write_text(
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '2000', "
        f"message_count = '{ROWS}');\n"
        f"CREATE TABLE local_out (n BIGINT) WITH (connector = 'filesystem', path = '{out}', "
        "format = 'json', type = 'sink');\n"
        f"CREATE TABLE s3_out (n BIGINT) WITH (connector = 'filesystem', "
        f"path = 's3://{s3_bucket}/out', format = 'parquet', type = 'sink'"
        f"{s3_server.with_clause()});\n"
        f"CREATE TABLE delta_out (n BIGINT) WITH (connector = 'delta', path = '{lake}', "
        "type = 'sink');\n"
        "INSERT INTO local_out SELECT counter AS n FROM impulse;\n"
        "INSERT INTO s3_out SELECT counter AS n FROM impulse;\n"
        f"CREATE TABLE ice_out (n BIGINT) WITH (connector = 'iceberg', 'catalog.type' = "
        f"'hadoop', 'catalog.warehouse' = '{warehouse}', table_name = 't', type = 'sink');\n"
        "INSERT INTO delta_out SELECT counter AS n FROM impulse;\n"
        "INSERT INTO ice_out SELECT counter AS n FROM impulse;\n"
    )
    command = [
        str(Path(sys.executable).with_name("arroyo")),
        "run", str(script), "--parallelism", "1", "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    log = tmp_path / "run.log"
    # Two kills: a first run's, and one of a run that itself recovered from a kill.
    for kill in range(2):
        with open(log, "ab") as sink:
            run = subprocess.Popen(command, stdout=sink, stderr=sink, start_new_session=True)
        try:
            # Kill once every sink has written since the last kill (or has every row).
            def counts() -> list[int]:
                return [
                    len(_local_rows(out)),
                    len(_bucket_rows(s3_server, s3_bucket)),
                    len(_delta_rows(lake)),
                    len(_iceberg_rows(warehouse)),
                ]

            before = counts()

            def written(run: subprocess.Popen[bytes] = run, before: list[int] = before) -> bool:
                if run.poll() is not None:
                    return True
                return not any(now <= t < ROWS for now, t in zip(counts(), before, strict=True))

            wait_until(f"new rows in every sink (seed {seed})", written, 180, interval=0.5)
            # The kill lands at a random point of the following batches (seeded): once a
            # random number more rows (up to about 2.5 s of the source's) are on disk.
            more = len(_local_rows(out)) + rng.randint(0, 5000)

            def further(run: subprocess.Popen[bytes] = run, more: int = more) -> bool:
                return run.poll() is not None or len(_local_rows(out)) >= min(more, ROWS)

            wait_until(f"more rows on disk (seed {seed})", further, 180, interval=0.1)
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have ended by itself
                os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        local, in_s3 = _local_rows(out), _bucket_rows(s3_server, s3_bucket)
        in_delta, in_iceberg = _delta_rows(lake), _iceberg_rows(warehouse)
        print(
            f"kill {kill + 1}: {len(local)} rows on disk, {len(in_s3)} in S3, "
            f"{len(in_delta)} in Delta, {len(in_iceberg)} in Iceberg (seed {seed})"
        )
        _no_row_twice(local, f"local, after kill {kill + 1} (seed {seed})")
        _no_row_twice(in_s3, f"S3, after kill {kill + 1} (seed {seed})")
        _no_row_twice(in_delta, f"Delta, after kill {kill + 1} (seed {seed})")
        _no_row_twice(in_iceberg, f"Iceberg, after kill {kill + 1} (seed {seed})")
    with open(log, "ab") as sink:
        done = subprocess.run(command, stdout=sink, stderr=sink, timeout=300, check=False)
    assert done.returncode == 0, log.read_text()[-3000:]
    expected = list(range(ROWS))
    assert sorted(_local_rows(out)) == expected, f"seed {seed}"
    assert sorted(_bucket_rows(s3_server, s3_bucket)) == expected, f"seed {seed}"
    # The uploads the kills cut short were aborted when their batches were replayed.
    assert pending_uploads(s3_server, s3_bucket, "out/") == [], f"seed {seed}"
    assert sorted(_delta_rows(lake)) == expected, f"seed {seed}"
    assert sorted(_iceberg_rows(warehouse)) == expected, f"seed {seed}"
