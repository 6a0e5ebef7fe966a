"""``nats``: core NATS subjects as sources and sinks, and JetStream streams as sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import (
    Capabilities,
    Connector,
    ConnectorError,
    ReadContext,
    WriteContext,
)
from arroyo.connectors.nats.options import NatsConnection, NatsOptions
from arroyo.program.spec import Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

_SOURCE_ONLY = ("stream",)


class NatsConnector(Connector[NatsOptions, NatsConnection]):
    """Source (``source.py``), spooled in the table's state before each message is
    acknowledged, so Spark's offsets replay a micro-batch exactly. A core ``subject``: what is
    published while the pipeline is down is lost (at most once; it cannot replay those). A
    JetStream ``stream``: a durable consumer of the pipeline's own, each message spooled with
    its stream sequence and then acknowledged, and one delivered again after a crash not spooled
    twice: exactly once with an exactly-once sink, across restarts. Event time: when the message
    reached the spool. Metadata: ``subject``.

    Sink (``sink.py``): each row encoded in the table's format and published to ``subject``.
    At least once: a replayed micro-batch is published again.
    """

    name = "nats"
    description = "NATS subjects and JetStream streams"
    capabilities = Capabilities(
        source=True,
        sink=True,
        replayable=True,
        delivery="at_least_once",
        needs_format=True,
        source_time=True,
    )
    options_model = NatsOptions
    connection_model = NatsConnection
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {"subject": ("STRING",)}

    def test_connection(self, settings: NatsConnection) -> str:
        import asyncio

        from arroyo.connectors.nats.client import NatsError, connect

        async def check() -> str:
            client = await connect(settings)
            try:
                return f"connected to NATS {client.connected_server_version}"
            finally:
                await client.close()

        try:
            return asyncio.run(check())
        except NatsError as err:
            raise ConnectorError(str(err)) from err

    def autocomplete(self, settings: NatsConnection) -> dict[str, list[str]]:
        import asyncio

        from arroyo.connectors.nats.client import NatsError, connect

        async def listed() -> dict[str, list[str]]:
            import nats.errors
            import nats.js.errors

            client = await connect(settings)
            try:
                streams = await client.jetstream().streams_info()
            except (nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError):
                streams = []  # a server without JetStream has no streams to list
            except nats.errors.Error as err:
                raise ConnectorError(f"NATS at {settings.servers}: {err}") from err
            finally:
                await client.close()
            return {
                "stream": sorted(s.config.name for s in streams),
                "subject": sorted({x for s in streams for x in s.config.subjects or []}),
            }

        try:
            return asyncio.run(listed())
        except NatsError as err:
            raise ConnectorError(str(err)) from err

    def sample(self, options: NatsOptions, count: int, timeout_s: float) -> list[bytes]:
        import asyncio

        from arroyo.connectors.nats.client import NatsError, newest_messages

        try:
            return asyncio.run(newest_messages(options, count, timeout_s))
        except NatsError as err:
            raise ConnectorError(str(err)) from err

    def replayable(self, options: NatsOptions) -> bool:
        return options.stream is not None  # a core subject's messages are gone once sent

    def misplaced_options(self, options: NatsOptions, role: Role) -> list[str]:
        set_ = options.model_dump(by_alias=True, exclude_unset=True)
        if role == "sink":
            return [k for k in set_ if k in _SOURCE_ONLY or k.startswith("consumer.")]
        return []

    def read(self, ctx: ReadContext, table: TableSpec, options: NatsOptions) -> DataFrame:
        from arroyo.connectors.nats.source import read_nats

        return read_nats(ctx, table, options)

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: NatsOptions
    ) -> DataStreamWriter:
        from arroyo.connectors.nats.sink import write_nats

        return write_nats(ctx, df, table, options)


__all__ = ["NatsConnector"]
