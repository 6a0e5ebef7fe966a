"""``rabbitmq``: RabbitMQ streams as sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from arroyo.connectors.base import Capabilities, Connector, ConnectorError, ReadContext
from arroyo.connectors.rabbitmq.options import RabbitmqConnection, RabbitmqOptions
from arroyo.program.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class RabbitmqConnector(Connector[RabbitmqOptions, RabbitmqConnection]):
    """Source (``source.py``): a RabbitMQ stream read over the stream protocol, its stream
    offsets kept in the query's checkpoint, so a restart resumes after the last committed
    micro-batch and a replayed batch is read again from the stream: exactly once with an
    exactly-once sink (while the stream retains the batch's messages). ``source.offset`` says
    where a new pipeline starts: ``first``, ``last``, ``next`` or a time. Event time: the
    message's stream timestamp. Metadata: ``offset``.

    No autocompletion: the stream protocol has no call that lists streams (only the
    management plugin's HTTP API has, and a profile names the stream port).
    """

    name = "rabbitmq"
    description = "RabbitMQ streams"
    capabilities = Capabilities(
        source=True, replayable=True, needs_format=True, source_time=True, state_per_query=True
    )
    options_model = RabbitmqOptions
    connection_model = RabbitmqConnection
    formats = frozenset({"json", "raw_string", "raw_bytes", "avro", "protobuf"})
    default_format = "json"
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {"offset": ("BIGINT",)}

    def test_connection(self, settings: RabbitmqConnection) -> str:
        import asyncio

        from rstream import Consumer

        async def check() -> None:
            consumer = Consumer(
                settings.host,
                settings.port,
                username=settings.username,
                password=settings.password,
                vhost=settings.virtual_host,
                max_retries=1,
            )
            await asyncio.wait_for(consumer.start(), 10)
            await consumer.close()

        try:
            asyncio.run(check())
        except Exception as err:  # rstream's and the socket's errors
            raise ConnectorError(
                f"cannot connect to RabbitMQ at {settings.host}:{settings.port}: {err}"
            ) from err
        return f"connected to RabbitMQ at {settings.host}:{settings.port}"

    def sample(self, options: RabbitmqOptions, count: int, timeout_s: float) -> list[bytes]:
        from arroyo.connectors.rabbitmq.source import RabbitmqError, newest_messages

        try:
            return newest_messages(options, count, timeout_s)
        except RabbitmqError as err:
            raise ConnectorError(str(err)) from err

    def read(self, ctx: ReadContext, table: TableSpec, options: RabbitmqOptions) -> DataFrame:
        from arroyo.connectors.rabbitmq.source import read_rabbitmq

        return read_rabbitmq(ctx, table, options)


__all__ = ["RabbitmqConnector"]
