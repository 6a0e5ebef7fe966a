"""``delta``: a Delta Lake table, local or on object storage (a sink, as in Arroyo)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arroyo.connectors.base import Capabilities, Connector, WriteContext
from arroyo.connectors.delta.options import DeltaOptions
from arroyo.connectors.filesystem.options import SOURCE_OPTIONS
from arroyo.connectors.storage import configure
from arroyo.formats import FormatOptions
from arroyo.program.spec import Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class DeltaConnector(Connector[DeltaOptions]):
    """A Delta Lake table at ``path`` (local, ``s3://``, or the other stores of
    arroyo.connectors.storage), written through Delta Lake's own Spark integration
    (delta-spark). Sink only. Exactly once for every Delta reader: each micro-batch is one
    Delta commit, made idempotent by Delta's transaction identifiers (``txnAppId``: the sink's
    id, kept in its state; ``txnVersion``: the batch), so a replayed batch that was already
    committed is skipped by Delta itself, and a batch cut short left no commit (its files are
    not in the log; ``VACUUM`` removes them). ``partitioning.fields`` are the table's partition
    columns. The table is created by the first batch when it does not exist; an existing
    table's schema must match the sink's columns."""

    name = "delta"
    description = "A Delta Lake table, local or on S3 (sink)"
    capabilities = Capabilities(sink=True, delivery="exactly_once", needs_format=True)
    options_model = DeltaOptions
    formats = frozenset({"parquet"})
    default_format = "parquet"

    def misplaced_options(self, options: DeltaOptions, role: Role) -> list[str]:
        given = options.model_dump(by_alias=True, exclude_defaults=True)
        return [name for name in SOURCE_OPTIONS if name in given]

    def misplaced_format_options(self, fmt: FormatOptions, role: Role) -> list[str]:
        return []

    def named_columns(self, options: DeltaOptions) -> list[tuple[str, str]]:
        return [("partitioning.fields", name) for name in options.fields or []]

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: DeltaOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.delta.sink import DeltaBatches

        configure(ctx.spark, options.location)
        return df.writeStream.foreachBatch(DeltaBatches(ctx.state_dir, table, options))


__all__ = ["DeltaConnector", "DeltaOptions"]
