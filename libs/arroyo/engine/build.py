"""Turning a pipeline program into Spark temp views and streaming DataFrames.

Used on two processes: the compiler, to let Spark analyse each query (types, names, streaming
support), and the worker, to run them. Building never contacts an external system.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from arroyo.connectors import ReadContext, connector
from arroyo.connectors.base import table_state_dir
from arroyo.formats.codec import decode
from arroyo.program.names import EVENT_TIME, KEEP, SIGN, quote_name, signed_view
from arroyo.program.spec import (
    AggregateSpec,
    ChangesSpec,
    IntervalJoinSpec,
    PipelineProgram,
    TableSpec,
    ViewSpec,
    WindowAggregateSpec,
)

# The end-of-input marker's event time: later than any real event, so the watermark derived from
# it closes every window. Rows are never this late, which is how the marker is told apart after
# the watermark operator (a filter on ``_eoi`` would be pushed below it and hide the marker).
END_OF_TIME = "9999-12-31 00:00:00"
_END_OF_TIME_YEAR = 9999
# The name under which a bounded source observes its end-of-input marker: ``eoi:<table>``.
EOI_METRIC = "eoi:"


@dataclass(frozen=True, slots=True)
class BuildSettings:
    state_dir: Path
    parallelism: int = 1
    max_records_per_batch: int | None = None
    # True when the program is only being planned: sources must not contact their systems.
    planning: bool = False
    # The query the sources are built for (ReadContext.query).
    query: int = 0


def _end_of_time() -> Column:
    return F.lit(END_OF_TIME).cast("TIMESTAMP")


def build_source(
    spark: SparkSession, table: TableSpec, settings: BuildSettings, *, signed: bool = False
) -> DataFrame:
    """The table's rows: its declared columns plus the hidden event time ``_timestamp``.
    ``signed``: a changelog source's changes as signed rows (``SIGN``) instead."""
    conn = connector(table.connector)
    assert conn is not None, table.connector
    options = conn.table_options(table)
    ctx = ReadContext(
        spark,
        table_state_dir(settings.state_dir, table.name),
        settings.parallelism,
        settings.max_records_per_batch,
        settings.planning,
        settings.query,
    )
    if table.is_lookup:
        df = conn.read_static(ctx, table, options)
    else:
        df = conn.read(ctx, table, options)
    if table.format is not None and conn.capabilities.needs_format:
        df = decode(df, table, signed=signed, planning=settings.planning)
    for col in table.columns:
        if col.metadata_key is not None:
            df = df.withColumn(col.name, F.col(f"_meta_{col.metadata_key}").cast(col.spark_type))
    for col in table.columns:
        if col.generated_sql is not None:
            df = df.withColumn(col.name, F.expr(col.generated_sql).cast(col.spark_type))
    if table.is_lookup:
        # A static table: no event time, no watermark; joined with streams as it is.
        return df.select(*[quote_name(c.name) for c in table.columns])
    if table.event_time_column:
        event = F.col(quote_name(table.event_time_column))
    elif conn.capabilities.source_time:
        event = F.col("_source_time")
    else:
        event = F.coalesce(F.col("_source_time"), F.current_timestamp())
    # A changelog source's rows say whether they (still) exist: see arroyo.engine.changelog.
    extra = [SIGN] if signed else [KEEP] if table.is_changelog else []
    names = [c.name for c in table.columns] + extra
    if not table.bounded:
        # Nothing ends, so none of the end-of-input machinery below is paid for. One projection
        # under the watermark: the optimizer walks every layer again in every micro-batch.
        df = df.select(*[quote_name(n) for n in names], event.alias(EVENT_TIME))
        return df.withWatermark(EVENT_TIME, f"{table.watermark_delay_ms} milliseconds")
    df = df.withColumn(EVENT_TIME, F.when(F.col("_eoi"), _end_of_time()).otherwise(event))
    df = df.withWatermark(EVENT_TIME, f"{table.watermark_delay_ms} milliseconds")
    # Observed right above the watermark operator, which gives it the rows it made: neither
    # runs as generated code, so an observer anywhere else costs a copy of every row. Besides
    # whether the end was read, the table's rows without the end-of-input marker
    # (arroyo.engine.operators: what the source sent).
    df = df.observe(
        f"{EOI_METRIC}{table.name}",
        F.max(F.col("_eoi").cast("INT")).alias("eoi"),
        F.count(F.when(~F.col("_eoi"), 1)).alias("rows"),
    )
    real = F.col(EVENT_TIME) < _end_of_time()
    # Each column is read through its row's event time. Spark pushes filters that do not mention
    # the event time below the watermark operator (a join's inferred ``IS NOT NULL`` on its keys,
    # a WHERE on a column), where they would drop the end-of-input marker before the watermark
    # sees it; a column that depends on the event time cannot be filtered there.
    return df.filter(real).select(
        *[F.when(real, F.col(quote_name(n))).alias(n) for n in names], EVENT_TIME
    )


def register(spark: SparkSession, program: PipelineProgram, settings: BuildSettings) -> None:
    """Make every source and view of the program visible to Spark SQL by its name."""
    for aggregate in program.aggregates:
        register_aggregate(spark, aggregate)
    for table in program.sources:
        register_source(spark, table, settings)
    for view in program.views:
        register_view(spark, view)


def register_source(spark: SparkSession, table: TableSpec, settings: BuildSettings) -> None:
    """The source's view; for a changelog, its signed rows' view too (each query reads the
    source anew, so a query reads the one it names)."""
    conn = connector(table.connector)
    if table.is_lookup and conn is not None and conn.capabilities.lookup_by_key:
        from arroyo.engine.lookups import register_key_lookup

        register_key_lookup(spark, table, conn, conn.table_options(table))
        return
    build_source(spark, table, settings).createOrReplaceTempView(table.name)
    if table.is_changelog:
        signed = build_source(spark, table, settings, signed=True)
        signed.createOrReplaceTempView(signed_view(table.name))


def register_aggregate(spark: SparkSession, aggregate: AggregateSpec) -> None:
    """One of Arroyo's own aggregate functions (Java), under the name the views call it by."""
    jvm = spark._jvm
    assert jvm is not None
    if aggregate.kind == "top_n":
        jvm.arroyo.sql.TopN.register(
            spark._jsparkSession,
            aggregate.name,
            aggregate.input_ddl,
            aggregate.key,
            aggregate.largest,
        )
        return
    if aggregate.kind != "extreme_rows":
        jvm.arroyo.sql.SignedMultiset.register(
            spark._jsparkSession, aggregate.name, aggregate.input_ddl, aggregate.kind
        )
        return
    jvm.arroyo.sql.ExtremeRows.register(
        spark._jsparkSession,
        aggregate.name,
        aggregate.input_ddl,
        aggregate.key,
        aggregate.largest,
    )


def register_view(spark: SparkSession, view: ViewSpec) -> None:
    if view.interval_join is not None:
        interval_join(spark, view.interval_join).createOrReplaceTempView(view.name)
    elif view.changes is not None:
        changes(spark, view.changes).createOrReplaceTempView(view.name)
    elif view.window_aggregate is not None:
        window_aggregate(spark, view.window_aggregate).createOrReplaceTempView(view.name)
    else:
        spark.sql(view.sql).createOrReplaceTempView(view.name)


def interval_join(spark: SparkSession, spec: IntervalJoinSpec) -> DataFrame:
    """The pairs of an interval join (arroyo.program.spec.IntervalJoinSpec), run in the JVM."""
    jvm = spark._jvm
    assert jvm is not None
    join = jvm.arroyo.sql.IntervalJoin
    if spec.shared_sql is not None:
        both = spark.sql(spec.shared_sql)
        left_row, right_row = both.columns[2], both.columns[6]
        args = ("__lk", "__lt", left_row, "__lon", "__rk", "__rt", right_row, "__ron")
        joined = join.joinShared(both._jdf, *args, spec.lower_us, spec.upper_us)
    else:
        left, right = spark.sql(spec.left_sql), spark.sql(spec.right_sql)
        joined = join.join(
            left._jdf, right._jdf, "__lk", "__rk", "__lt", "__rt", spec.lower_us, spec.upper_us
        )
    return DataFrame(joined, spark)


def changes(spark: SparkSession, spec: ChangesSpec) -> DataFrame:
    """An updating aggregate's changes as signed rows (arroyo.program.spec.ChangesSpec), run in
    the JVM."""
    jvm = spark._jvm
    assert jvm is not None
    input_ = spark.sql(spec.input_sql)
    result = jvm.arroyo.sql.RetractingAggregate.changes(
        input_._jdf,
        spec.keys,
        _strings(spark, spec.kinds),
        _strings(spark, spec.names),
        spec.ttl_ms,
        SIGN,
    )
    return DataFrame(result, spark)


def window_aggregate(spark: SparkSession, spec: WindowAggregateSpec) -> DataFrame:
    """The partial results of a keyed tumbling or hopping window aggregate
    (arroyo.program.spec.WindowAggregateSpec), run in the JVM; window_aggregate_results sums
    them."""
    jvm = spark._jvm
    assert jvm is not None
    input_ = spark.sql(spec.input_sql)
    result = jvm.arroyo.sql.WindowAggregate.aggregate(
        input_._jdf,
        spec.keys,
        EVENT_TIME,
        _strings(spark, spec.kinds),
        spec.width_us,
        spec.slide_us,
        spec.buckets,
    )
    return DataFrame(result, spark)


# Spark's mark of a time window's column, which window_time() requires.
_TIME_WINDOW = {"spark.timeWindow": True}


def window_aggregate_results(partials: DataFrame, spec: WindowAggregateSpec) -> DataFrame:
    """The rows of a window aggregate from its partial results (WindowAggregate.java): each
    key's and window's, as Spark's windowed aggregate gives them."""
    keys = [quote_name(c) for c in partials.columns[: spec.keys]]
    results = []
    for i, (kind, name) in enumerate(zip(spec.kinds, spec.names, strict=True)):
        value, count = F.col(f"__v{i}"), F.col(f"__n{i}")
        if kind == "count":
            result = F.sum(count)
        elif kind == "sum":
            result = F.sum(value)
        elif kind == "min":
            result = F.min(value)
        elif kind == "max":
            result = F.max(value)
        else:  # avg
            result = F.sum(value) / F.nullif(F.sum(count), F.lit(0))
        results.append(result.alias(name))
    window = F.struct(
        F.timestamp_micros("__start").alias("start"), F.timestamp_micros("__end").alias("end")
    ).alias(spec.window, metadata=_TIME_WINDOW)
    time = F.timestamp_micros(F.col("__end") - 1).alias(EVENT_TIME)
    grouped = partials.groupBy(*keys, "__start", "__end")
    rows = grouped.agg(*results) if results else grouped.count()  # no functions: distinct rows
    return rows.select(*keys, window, *(quote_name(n) for n in spec.names), time).select(
        *(quote_name(c) for c in spec.columns)
    )


def _strings(spark: SparkSession, values: list[str]) -> Any:
    """A Java String[] of ``values``."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    array = gateway.new_array(jvm.java.lang.String, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def drop_temp_views(spark: SparkSession) -> None:
    """Drop the session's temporary views (the tables and views of the last plan).

    Read from the session catalog itself: ``spark.catalog.listTables()`` also lists the
    databases' tables and looks each one up, which took 1.3 s in a fresh JVM, twice a run."""
    views = spark._jsparkSession.sessionState().catalog().listLocalTempViews("*")
    for i in range(views.size()):
        spark.catalog.dropTempView(views.apply(i).table())


def is_end_of_time(watermark: str | None) -> bool:
    return bool(watermark) and int(str(watermark)[:4]) >= _END_OF_TIME_YEAR - 1


def eoi_metric_source(metric_name: str) -> str | None:
    return metric_name[len(EOI_METRIC) :] if metric_name.startswith(EOI_METRIC) else None
