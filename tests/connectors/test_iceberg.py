"""The iceberg sink, read back by pyiceberg (not Spark, not Iceberg's JVM code): each row once
after replays, the PARTITIONED BY spec as the table's, in a Hadoop catalog on disk and on S3
and in a JDBC catalog on PostgreSQL; bad options refused by name."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import asyncpg
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable, Table
from pyspark.sql import SparkSession

from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import PlanningError
from arroyo.testing.iceberg_rest import IcebergRestCatalog
from arroyo.testing.s3 import S3Server
from tests.connectors.checkpoints import forget_commit, query_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.lakehouse]

ROWS = 300
_SPEC = "PARTITIONED BY (identity(k), bucket(n, 4), truncate(s, 2), hour(ts))"


def _script(catalog: str, extra: str = "", spec: str = _SPEC) -> str:
    return (
        "CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', "
        f"message_count = '{ROWS}');\n"
        "CREATE TABLE out (n BIGINT, k TEXT, s TEXT, ts TIMESTAMP) WITH (connector = 'iceberg', "
        f"{catalog}, namespace = 'arroyo.tests', table_name = 'events', type = 'sink', "
        f"format = 'parquet'{extra}) {spec};\n"
        "INSERT INTO out SELECT counter AS n, CAST(counter % 3 AS TEXT) AS k, "
        "concat('s', CAST(counter AS TEXT)) AS s, timestamp AS ts FROM impulse;"
    )


def _replay_from(state: Path, batch: int) -> None:
    """Leave the checkpoint as a crash after the sink committed ``batch`` and before Spark did
    would, so that the next run runs it again."""
    forget_commit(query_checkpoint(state), batch)


def _run(spark: SparkSession, state: Path, script: str) -> None:
    program = spark_planner(spark, state_dir=state).plan(script)
    runner = PipelineRunner(spark, program, state, max_records_per_batch=100)
    runner.start()
    assert runner.wait(timeout=300), "the run did not end by itself"


def _check(table: Table) -> None:
    rows = table.scan().to_arrow().to_pylist()
    assert Counter(r["n"] for r in rows) == Counter(range(ROWS)), "a row missing or twice"
    assert all(r["k"] == str(r["n"] % 3) and r["s"] == f"s{r['n']}" for r in rows)
    spec = table.spec()
    transforms = [
        (str(f.transform), table.schema().find_field(f.source_id).name) for f in spec.fields
    ]
    assert transforms == [
        ("identity", "k"), ("bucket[4]", "n"), ("truncate[2]", "s"), ("hour", "ts")
    ]  # fmt: skip


def _hadoop_table(warehouse: str, properties: dict[str, str] | None = None) -> StaticTable:
    """The table's latest metadata in a Hadoop catalog: ``version-hint.text`` names it."""
    from pyarrow import fs as pafs

    metadata = f"{warehouse}/arroyo/tests/events/metadata"
    if warehouse.startswith("s3://"):
        assert properties is not None
        s3 = pafs.S3FileSystem(
            access_key=properties["s3.access-key-id"],
            secret_key=properties["s3.secret-access-key"],
            endpoint_override=properties["s3.endpoint"].removeprefix("http://"),
            scheme="http",
            region=properties["s3.region"],
        )
        with s3.open_input_stream(f"{metadata.removeprefix('s3://')}/version-hint.text") as f:
            version = f.read().decode().strip()
    else:
        version = Path(metadata, "version-hint.text").read_text().strip()
    return StaticTable.from_metadata(f"{metadata}/v{version}.metadata.json", properties or {})


def test_a_hadoop_catalog_on_disk_each_row_once_after_a_replay(
    spark: SparkSession, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    catalog = f"'catalog.type' = 'hadoop', 'catalog.warehouse' = '{warehouse}'"
    state = tmp_path / "state"
    script = _script(catalog, ", 'parquet.compression' = 'gzip'")
    _run(spark, state, script)
    first = _hadoop_table(str(warehouse))
    _check(first)
    data = [f for f in (warehouse / "arroyo").rglob("*.parquet")]
    assert data and all(
        pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "GZIP" for f in data
    )
    # Batches Iceberg committed and Spark did not: their replay writes nothing.
    _replay_from(state, 1)
    _run(spark, state, script)
    table = _hadoop_table(str(warehouse))
    _check(table)
    summaries = [s.summary for s in table.snapshots() if s.summary is not None]
    epoch = "spark.sql.streaming.epochId"  # Iceberg's streaming write names each batch
    batches = [int(s[epoch]) for s in summaries if epoch in s.additional_properties]
    assert batches, "no snapshot names its batch"
    assert len(batches) == len(set(batches)), f"a batch committed twice: {batches}"


def test_rows_gathered_by_partition_transforms_before_the_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Iceberg's hash distribution by the table's transforms (bucket, truncate, hour): the
    # catalog plans them, the stream being started into its table.
    warehouse = tmp_path / "warehouse"
    catalog = f"'catalog.type' = 'hadoop', 'catalog.warehouse' = '{warehouse}'"
    _run(spark, tmp_path / "state", _script(catalog, ", 'shuffle_by_partition.enabled' = 'true'"))
    _check(_hadoop_table(str(warehouse)))


@pytest.mark.s3
def test_a_hadoop_catalog_on_s3(
    spark: SparkSession, tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    catalog = (
        f"'catalog.type' = 'hadoop', 'catalog.warehouse' = 's3://{s3_bucket}/warehouse'"
        + s3_server.with_clause()
    )
    state = tmp_path / "state"
    _run(spark, state, _script(catalog))
    _replay_from(state, 1)
    _run(spark, state, _script(catalog))
    options = s3_server.object_store_options()
    properties = {
        "s3.endpoint": options["aws_endpoint"],
        "s3.access-key-id": options["aws_access_key_id"],
        "s3.secret-access-key": options["aws_secret_access_key"],
        "s3.region": options["aws_region"],
    }
    _check(_hadoop_table(f"s3://{s3_bucket}/warehouse", properties))


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergRestCatalog]:
    """Iceberg's own REST catalog server (arroyo.testing.iceberg_rest), for this module."""
    with IcebergRestCatalog.start(tmp_path_factory.mktemp("rest")) as catalog:
        yield catalog


def test_a_rest_catalog_as_arroyo_configures_it(
    spark: SparkSession, tmp_path: Path, rest_catalog: IcebergRestCatalog
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    catalog = f"'catalog.type' = 'rest', 'catalog.rest.url' = '{rest_catalog.uri}'"
    state = tmp_path / "state"
    _run(spark, state, _script(catalog))
    _replay_from(state, 1)
    _run(spark, state, _script(catalog))
    reader = RestCatalog("rest", uri=rest_catalog.uri)
    _check(reader.load_table("arroyo.tests.events"))


def test_a_jdbc_catalog_on_postgresql(
    spark: SparkSession, tmp_path: Path, postgres_url: str
) -> None:
    url = urlparse(postgres_url)
    catalog = (
        "'catalog.type' = 'jdbc', "
        f"'catalog.jdbc.url' = 'jdbc:postgresql://{url.hostname}:{url.port}{url.path}', "
        f"'catalog.jdbc.user' = '{url.username}', 'catalog.warehouse' = '{tmp_path / 'wh'}'"
    )
    state = tmp_path / "state"
    _run(spark, state, _script(catalog))
    _replay_from(state, 1)
    _run(spark, state, _script(catalog))

    async def metadata_location() -> str:
        conn = await asyncpg.connect(postgres_url)
        try:
            return str(
                await conn.fetchval(
                    "SELECT metadata_location FROM iceberg_tables "
                    "WHERE table_namespace = 'arroyo.tests' AND table_name = 'events'"
                )
            )
        finally:
            await conn.close()

    _check(StaticTable.from_metadata(asyncio.run(metadata_location())))


@pytest.mark.parametrize(
    ("catalog", "spec", "named"),
    [
        ("'catalog.type' = 'glue'", _SPEC, "catalog.type"),
        ("'catalog.type' = 'rest'", _SPEC, "catalog.rest.url"),
        ("'catalog.type' = 'jdbc', 'catalog.warehouse' = '/tmp/w'", _SPEC, "catalog.jdbc.url"),
        ("'catalog.type' = 'hadoop', 'catalog.warehouse' = '/w'", "PARTITIONED BY (zorder(n))",
         "unknown Iceberg transform 'zorder'"),
        ("'catalog.type' = 'hadoop', 'catalog.warehouse' = '/w'", "PARTITIONED BY (bucket(n))",
         "write it bucket(column, n)"),
        ("'catalog.type' = 'hadoop', 'catalog.warehouse' = '/w'", "PARTITIONED BY (day(nope))",
         "nope"),
        ("'catalog.type' = 'hadoop', 'catalog.warehouse' = '/w', "
         "'partitioning.fields' = 'bucket(n, 4'", "", "unbalanced parentheses"),
        ("'catalog.type' = 'hadoop', 'catalog.warehouse' = '/w', "
         "'partitioning.fields' = 'day(ts)(n)'", "", "write a transform as fn(column)"),
    ],
)  # fmt: skip
def test_bad_catalogs_and_partition_specs_are_refused(
    spark: SparkSession, tmp_path: Path, catalog: str, spec: str, named: str
) -> None:
    with pytest.raises(PlanningError) as refused:
        spark_planner(spark, state_dir=tmp_path).plan(_script(catalog, spec=spec))
    assert named in str(refused.value)
