"""Queries that run per micro-batch: window functions (ROW_NUMBER, RANK...) over windowed input,
and joins of windows derived from one windowed aggregate.

Spark runs no ranking window function on a stream. Over windowed input it does not need to: a
window's rows all leave its aggregate in the micro-batch in which the watermark passes the
window's end, so ranking each batch ranks each window whole. The streaming query produces the
windowed rows; this foreachBatch function registers each batch under the name the planned query
reads and runs that query as a batch query, then writes its rows through the sink.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from arroyo.connectors.base import LineWriter
from arroyo.connectors.runtime.sinks import batch_in_flight, consume, lines_of
from arroyo.engine.build import window_aggregate_results
from arroyo.engine.session import temporary_settings
from arroyo.formats.codec import encode
from arroyo.program.spec import TableSpec, WindowAggregateSpec


class PerBatchQuery:
    """``merge``: the streaming query gives the partial results of Arroyo's window aggregate,
    which each batch sums into the windows' rows before the query reads them."""

    def __init__(
        self,
        view: str,
        sql: str,
        sink: TableSpec,
        writer: LineWriter,
        merge: WindowAggregateSpec | None = None,
    ) -> None:
        self.view = view
        self.sql = sql
        self.sink = sink
        self.writer = writer
        self.merge = merge
        self.reads_twice = sql.count(view) > 1

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with batch_in_flight():
            if self.writer.committed(batch_id):
                consume(df)
                return
            if self.merge is not None:
                df = _summed(df, self.merge)
            elif self.reads_twice:
                # Read twice by one query (a join of windows), the batch must be computed
                # once: computing it again would run its stateful operators again.
                df = df.persist()
            try:
                df.createOrReplaceTempView(self.view)
                result = df.sparkSession.sql(self.sql)
                if self.sink.format is None:
                    # A sink without records (blackhole): the rows are computed, not encoded.
                    consume(result)
                    self.writer.write(batch_id, ())
                else:
                    self.writer.write(batch_id, lines_of(encode(result, self.sink)))
            finally:
                if self.reads_twice or self.merge is not None:
                    df.unpersist()


# While a window aggregate's partial results are summed: they are nearly one row per key and
# window (a key's rows rarely fall in two panes), so summing before the shuffle as well as after
# it reduces nothing; and the sums are cached for one batch's query, which reads them a few
# times: compressing them costs more than it saves.
_SUMMING = {
    "spark.sql.execution.bypassPartialAggregation": "true",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


def _summed(partials: DataFrame, spec: WindowAggregateSpec) -> DataFrame:
    """The rows of the window aggregate's batch, summed from its partial results, cached: the
    query may read them more than once, and computing them again would run the stateful
    operator again. The settings are the streaming query's own session's (each query has its
    own) and apply as the sums are planned and cached."""
    with temporary_settings(partials.sparkSession, _SUMMING):
        rows = window_aggregate_results(partials, spec).persist()
        try:
            rows.count()
        except BaseException:
            rows.unpersist()
            raise
    return rows
