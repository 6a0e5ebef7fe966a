"""The Kinesis source: every shard of a stream read with GetRecords, each shard's position (the
sequence number of the last record a micro-batch took) as Spark's offsets, so a micro-batch
replayed after a crash is read again from the stream itself.

Offsets: ``{"shards": {shard id: {"after": the last sequence number taken (None: none yet),
"start": where to begin when none was (TRIM_HORIZON, or for ``latest`` the time the pipeline
first started, in ms: AT_TIMESTAMP), "parents": [its parent shards],
"closed": whether it was read to its end, "from": the first sequence number this batch took}}}``.
Shard iterators expire after five minutes, so the offsets keep sequence numbers, and iterators
are made from them (AFTER_SEQUENCE_NUMBER) when needed: that is what survives a restart.

Resharding: the shards are listed again every ``_LIST_EVERY_S``; a new shard starts at its
first record (TRIM_HORIZON), and is read only once each of its parents (a split shard, or the
two merged) has been read to its end, so each partition key's records keep their order. A
closed shard that the stream no longer lists is dropped from the offsets.

The reader runs where Spark runs a simple streaming reader (one process beside the driver);
shards are read side by side on a few threads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from arroyo.connectors.kinesis.client import KinesisError, cause, client, error_code, where
from arroyo.connectors.kinesis.options import KinesisOptions
from arroyo.connectors.runtime.arrow_rows import TIMESTAMP, batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

# Kinesis allows five GetRecords calls a second on a shard.
_POLL_EVERY_S = 0.2
_LIST_EVERY_S = 1.0
_RECORDS_PER_CALL = 10_000
_BATCH_ROWS = 200_000
_THREADS = 8
REPLAY_TIMEOUT_S = 60.0

Offsets = dict[str, dict[str, Any]]
METADATA = ("shard_id", "sequence_number", "partition_key")
_SCHEMA = pa.schema(
    [
        ("value", pa.binary()),
        ("_source_time", TIMESTAMP),
        ("_eoi", pa.bool_()),
        *[(f"_{key}", pa.string()) for key in METADATA],
    ]
)


def _row(shard: str, record: dict[str, Any]) -> tuple[Any, ...]:
    arrived = record.get("ApproximateArrivalTimestamp") or datetime.now(UTC)
    return (
        bytes(record["Data"]),
        arrived,
        False,
        shard,
        record["SequenceNumber"],
        record["PartitionKey"],
    )


class _Shards:
    """The stream's client, and the calls on its shards, with errors that name the stream."""

    def __init__(self, opts: KinesisOptions) -> None:
        self.opts = opts
        self.kinesis = client(opts)

    def _fail(self, doing: str, err: BaseException) -> KinesisError:
        return KinesisError(
            f"kinesis stream '{self.opts.stream_name}' at {where(self.opts)}: {doing} failed: "
            f"{cause(err)}"
        )

    def listed(self) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        args: dict[str, Any] = {"StreamName": self.opts.stream_name}
        try:
            while True:
                page = self.kinesis.list_shards(**args)
                shards += page["Shards"]
                if not page.get("NextToken"):
                    return shards
                args = {"NextToken": page["NextToken"]}
        except Exception as err:  # botocore's ClientError, EndpointConnectionError...
            raise self._fail("listing its shards", err) from err

    def iterator(
        self, shard: str, kind: str, sequence: str | None = None, at_ms: int | None = None
    ) -> str | None:
        args: dict[str, Any] = {"StreamName": self.opts.stream_name, "ShardId": shard}
        args["ShardIteratorType"] = kind
        if sequence is not None:
            args["StartingSequenceNumber"] = sequence
        if at_ms is not None:
            args["Timestamp"] = at_ms / 1000
        try:
            found = self.kinesis.get_shard_iterator(**args)
        except Exception as err:
            raise self._fail(f"reading shard {shard}", err) from err
        iterator = found.get("ShardIterator")
        return str(iterator) if iterator else None

    def records(
        self, shard: str, iterator: str, limit: int = _RECORDS_PER_CALL
    ) -> dict[str, Any] | None:
        """One GetRecords call; None when the iterator expired and must be made again."""
        try:
            return self.kinesis.get_records(ShardIterator=iterator, Limit=limit)  # type: ignore[no-any-return]
        except Exception as err:
            if error_code(err) == "ExpiredIteratorException":
                return None
            raise self._fail(f"reading shard {shard}", err) from err


def _entry(shard: dict[str, Any], start: str | int) -> dict[str, Any]:
    """A shard's offsets before it gave a record: ``start`` is TRIM_HORIZON or the time (ms)
    the pipeline started, from which its records are read (AT_TIMESTAMP)."""
    parents = [shard.get("ParentShardId"), shard.get("AdjacentParentShardId")]
    return {
        "after": None,
        "start": start,
        "parents": [p for p in parents if p],
        "closed": False,
    }


class _Reader(SimpleDataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Pickled to the process that runs it: the client is made there.
        self.opts = KinesisOptions.model_validate(json.loads(options["options"]))
        self.max_rows = int(options.get("max_rows") or _BATCH_ROWS)
        self._shards: _Shards | None = None
        self._latest: set[str] = set()  # shards this new pipeline's reader starts at LATEST
        self._reset()

    def _reset(self) -> None:
        self._position: str | None = None  # the offsets the iterators below continue from
        self._iterators: dict[str, str | None] = {}
        self._polled: dict[str, float] = {}
        self._listed_at = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "max_rows": self.max_rows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.opts, self.max_rows = state["opts"], state["max_rows"]
        self._shards = None
        self._latest = set()
        self._reset()

    @property
    def shards(self) -> _Shards:
        if self._shards is None:
            self._shards = _Shards(self.opts)
        return self._shards

    def initialOffset(self) -> Offsets:
        # "latest" is fixed now, as a time: a shard first read after a restart, or after its
        # iterator expired, starts from it too, and loses nothing put while the pipeline was
        # down (a LATEST iterator would start at the time it is made).
        start: str | int = "TRIM_HORIZON"
        if self.opts.source_offset == "latest":
            start = int(time.time() * 1000)
        listed = self.shards.listed()
        # This first run reads them from LATEST, which is that time as near as makes no
        # difference (and kinesalite, the tests' server, never answers GetRecords of an
        # AT_TIMESTAMP iterator past a shard's last record).
        self._latest = {s["ShardId"] for s in listed} if isinstance(start, int) else set()
        self._listed_at = time.monotonic()
        return {"shards": {s["ShardId"]: _entry(s, start) for s in listed}}

    def _relist(self, shards: dict[str, dict[str, Any]]) -> bool:
        """New shards added, closed ones the stream no longer lists dropped; whether any was."""
        if time.monotonic() - self._listed_at < _LIST_EVERY_S:
            return False
        self._listed_at = time.monotonic()
        listed = {s["ShardId"]: s for s in self.shards.listed()}
        changed = False
        for shard_id, shard in listed.items():
            if shard_id not in shards:
                shards[shard_id] = _entry(shard, "TRIM_HORIZON")
                changed = True
        for shard_id in [s for s, e in shards.items() if e["closed"] and s not in listed]:
            del shards[shard_id]
            changed = True
        return changed

    def _ready(self, shards: dict[str, dict[str, Any]]) -> list[str]:
        """Open shards whose parents (where still known) have been read to their end."""
        return [
            shard_id
            for shard_id, entry in shards.items()
            if not entry["closed"]
            and all(shards.get(p, {"closed": True})["closed"] for p in entry["parents"])
        ]

    def _poll(
        self, shard_id: str, entry: dict[str, Any], limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` records from where the shard is, and whether it has ended."""
        self._polled[shard_id] = time.monotonic()
        for _ in range(2):
            iterator = self._iterators.get(shard_id)
            if iterator is None and shard_id not in self._iterators:
                if entry["after"] is not None:
                    iterator = self.shards.iterator(
                        shard_id, "AFTER_SEQUENCE_NUMBER", entry["after"]
                    )
                elif shard_id in self._latest:
                    self._latest.discard(shard_id)
                    iterator = self.shards.iterator(shard_id, "LATEST")
                elif isinstance(entry["start"], int):
                    iterator = self.shards.iterator(shard_id, "AT_TIMESTAMP", at_ms=entry["start"])
                else:
                    iterator = self.shards.iterator(shard_id, entry["start"])
                self._iterators[shard_id] = iterator
            if iterator is None:
                return [], True
            got = self.shards.records(shard_id, iterator, limit)
            if got is None:  # expired: made again from the shard's position
                del self._iterators[shard_id]
                continue
            self._iterators[shard_id] = got.get("NextShardIterator")
            return got["Records"], got.get("NextShardIterator") is None
        raise KinesisError(
            f"kinesis stream '{self.opts.stream_name}': shard {shard_id}'s iterator expired "
            "as soon as it was made"
        )

    def read(self, start: Offsets) -> tuple[Iterator[pa.RecordBatch], Offsets]:
        if json.dumps(start, sort_keys=True) != self._position:
            self._reset()  # a restart, or a reader new to these offsets
        shards = json.loads(json.dumps(start["shards"]))
        for entry in shards.values():
            entry.pop("from", None)
        changed = self._relist(shards)
        now = time.monotonic()
        due = [s for s in self._ready(shards) if now - self._polled.get(s, 0.0) >= _POLL_EVERY_S]
        rows: list[tuple[Any, ...]] = []
        # The batch's cap shared among the shards polled.
        limit = max(1, min(_RECORDS_PER_CALL, self.max_rows // max(1, len(due))))
        with ThreadPoolExecutor(min(_THREADS, max(1, len(due)))) as pool:
            polled = list(pool.map(lambda s: (s, self._poll(s, shards[s], limit)), due))
        for shard_id, (records, ended) in polled:
            entry = shards[shard_id]
            if records:
                entry["from"] = records[0]["SequenceNumber"]
                entry["after"] = records[-1]["SequenceNumber"]
                rows += [_row(shard_id, r) for r in records]
                changed = True
            if ended:
                entry["closed"] = True
                changed = True
        end = {"shards": shards} if changed else start
        self._position = json.dumps(end, sort_keys=True)
        return batches(_SCHEMA, rows), end

    def readBetweenOffsets(self, start: Offsets, end: Offsets) -> Iterator[pa.RecordBatch]:
        rows: list[tuple[Any, ...]] = []
        for shard_id, entry in end["shards"].items():
            if "from" in entry:
                rows += self._replay(shard_id, entry["from"], entry["after"])
        return batches(_SCHEMA, rows)

    def _replay(self, shard_id: str, first: str, last: str) -> list[tuple[Any, ...]]:
        """The shard's records from sequence number ``first`` to ``last``, read again."""
        rows: list[tuple[Any, ...]] = []
        iterator = self.shards.iterator(shard_id, "AT_SEQUENCE_NUMBER", first)
        deadline = time.monotonic() + REPLAY_TIMEOUT_S
        while iterator is not None and time.monotonic() < deadline:
            got = self.shards.records(shard_id, iterator)
            if got is None:
                after = rows[-1][4] if rows else None
                iterator = (
                    self.shards.iterator(shard_id, "AFTER_SEQUENCE_NUMBER", after)
                    if after
                    else self.shards.iterator(shard_id, "AT_SEQUENCE_NUMBER", first)
                )
                continue
            for record in got["Records"]:
                rows.append(_row(shard_id, record))
                if int(record["SequenceNumber"]) >= int(last):
                    return rows
            iterator = got.get("NextShardIterator")
            if not got["Records"]:
                time.sleep(_POLL_EVERY_S)
        raise KinesisError(
            f"kinesis stream '{self.opts.stream_name}': shard {shard_id} no longer gives records "
            f"{first} to {last}, which a micro-batch took (past the stream's retention?)"
        )


class KinesisSource(DataSource):
    """Options: ``options`` (the table's, as JSON), ``max_rows`` (a micro-batch's cap)."""

    @classmethod
    def name(cls) -> str:
        return "arroyo_kinesis"

    def schema(self) -> str:
        return (
            "`value` BINARY, `_source_time` TIMESTAMP, `_eoi` BOOLEAN, `_shard_id` STRING, "
            "`_sequence_number` STRING, `_partition_key` STRING"
        )  # _SCHEMA's columns

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return _Reader(dict(self.options))


def read_kinesis(ctx: ReadContext, table: TableSpec, opts: KinesisOptions) -> DataFrame:
    """The stream's records as ``value``, each one's arrival time as the source time, and its
    shard, sequence number and partition key as metadata."""
    ctx.spark.dataSource.register(KinesisSource)
    df = (
        ctx.spark.readStream.format(KinesisSource.name())
        .option("options", opts.model_dump_json(by_alias=True))
        .option("max_rows", str(ctx.max_records_per_batch or _BATCH_ROWS))
        .load()
    )
    return df.select(
        "value",
        "_source_time",
        "_eoi",
        *[df[f"_{key}"].alias(f"_meta_{key}") for key in METADATA],
    )
