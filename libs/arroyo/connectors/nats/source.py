"""The NATS source, spooled (runtime/spool.py) as the MQTT source is:

- a core subject is subscribed to; what is published while nothing is subscribed is lost (at
  most once);
- a JetStream stream is read by a durable pull consumer of the pipeline's own
  (``arroyo-<table>-<hash of its state>``); each message is written to the spool with its
  stream sequence, then acknowledged. The consumer resumes where the acknowledgements end, and
  a message delivered again after a crash between the two (its sequence already spooled) is
  acknowledged and not spooled twice: each message once in the spool, and Spark's offsets,
  positions in it, replay a micro-batch exactly. Which sequences are spooled is a set, not the
  highest one: a message the crash cut off before it was spooled comes again once its
  ``consumer.ack_wait`` is over, after newer ones (the set forgets what is at or below the
  consumer's acknowledgement floor, which is never delivered again).

A server lost is tried again (``client.RECONNECT_ATTEMPTS``, about two minutes): one back by
then is a pause (the subscription and the consumer resume), one that is not fails the query
naming the servers and the last error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from arroyo.connectors.nats.client import RECONNECT_ATTEMPTS
from arroyo.connectors.nats.options import NatsOptions
from arroyo.connectors.runtime.spool import (
    Spool,
    SpooledReader,
    SpooledSource,
    read_spooled,
)
from arroyo.formats.arrow_json import carried

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from arroyo.connectors.base import ReadContext
    from arroyo.program.spec import TableSpec

_FETCH_WAIT_S = 1.0
# Spooled sequences kept before those the consumer's acknowledgement floor covers are forgotten.
_FORGET_AT = 10_000


def consumer_config(opts: NatsOptions, durable: str) -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ReplayPolicy

    subjects = [s.strip() for s in (opts.consumer_filter_subjects or "").split(",") if s.strip()]
    return ConsumerConfig(
        durable_name=durable,
        description=opts.consumer_description,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy(opts.consumer_ack_policy.lower()),
        ack_wait=float(opts.consumer_ack_wait),
        max_deliver=opts.consumer_max_deliver,
        filter_subjects=subjects or None,
        replay_policy=ReplayPolicy(opts.consumer_replay_policy.lower()),
        rate_limit_bps=opts.consumer_rate_limit if opts.consumer_rate_limit > 0 else None,
        sample_freq=f"{opts.consumer_sample_frequency}%"
        if opts.consumer_sample_frequency
        else None,
        max_waiting=opts.consumer_max_waiting,
        max_ack_pending=opts.consumer_max_ack_pending,
        # Set only when asked: the server deletes a durable consumer idle this long, and one
        # made again would read the stream from its start (or miss what retention dropped).
        inactive_threshold=float(opts.consumer_inactive_threshold)
        if "consumer_inactive_threshold" in opts.model_fields_set
        else None,
        num_replicas=opts.consumer_num_replicas,
    )


class _Reader(SpooledReader):
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = NatsOptions.model_validate(json.loads(options["options"]))
        self.durable = options["durable"]
        self.reconnect_attempts = int(options.get("reconnect_attempts", RECONNECT_ATTEMPTS))

    def connect(self, spool: Spool) -> Any:
        from arroyo.connectors.runtime.loop import Loop

        loop = Loop()
        try:
            loop.run(self._subscribe(spool, loop))
        except BaseException:
            loop.close()
            raise
        return loop

    async def _subscribe(self, spool: Spool, loop: Any) -> None:
        from arroyo.connectors.nats.client import NatsError, connect

        opts = self.opts
        where = f"NATS at {opts.servers}"
        # Once without reconnecting, so that a refused login fails now rather than retrying.
        await (await connect(opts)).close()
        loop.client = await connect(
            opts,
            reconnect_attempts=self.reconnect_attempts,
            closed=lambda why: self.fail(NatsError(why)),
        )
        try:
            if opts.subject:

                async def on_message(message: Any) -> None:
                    try:
                        spool.append(
                            message.subject, int(time.time() * 1000), message.data, flush=False
                        )
                    except Exception as err:  # a full disk: the next read fails the query
                        self.fail(err)

                await loop.client.subscribe(opts.subject, cb=on_message)
                return
            assert opts.stream is not None
            js = loop.client.jetstream()
            spooled = spool.sequences()
            last = max(spooled, default=-1)
            info = await js.stream_info(opts.stream)
            if info.state.last_seq < last:
                raise NatsError(
                    f"stream '{opts.stream}' ends at sequence {info.state.last_seq}, before the "
                    f"{last} this pipeline read: it was purged or made again"
                )
            await js.add_consumer(opts.stream, consumer_config(opts, self.durable))
            pull = await js.pull_subscribe_bind(durable=self.durable, stream=opts.stream)
        except NatsError:
            await loop.client.close()
            raise
        except Exception as err:  # nats-py's APIError (no such stream, JetStream off...)
            await loop.client.close()
            raise NatsError(f"cannot read stream '{opts.stream}' of {where}: {err}") from err
        loop.task = asyncio.ensure_future(self._pull(loop.client, pull, spool, spooled))
        loop.task.add_done_callback(self._ended)

    def _ended(self, task: Any) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.fail(task.exception())

    async def _pull(self, client: Any, pull: Any, spool: Spool, spooled: set[int]) -> None:
        """Fetches until cancelled. ``spooled``: the sequences in the spool, and those spooled
        since."""
        forget_at = _FORGET_AT
        while not client.is_closed:
            try:
                await self._fetch(pull, spool, spooled)
                if len(spooled) >= forget_at:
                    floor = (await pull.consumer_info()).ack_floor.stream_seq
                    spooled.difference_update([s for s in spooled if s <= floor])
                    forget_at = max(_FORGET_AT, 2 * len(spooled))
            except Exception:
                if client.is_closed:
                    return  # it gave up on the servers: its closed callback says why
                raise

    async def _fetch(self, pull: Any, spool: Spool, spooled: set[int]) -> None:
        """One fetch of the consumer's messages, each spooled unless it was, then
        acknowledged."""
        try:
            messages = await pull.fetch(self.opts.consumer_max_batch, timeout=_FETCH_WAIT_S)
        except TimeoutError:  # nats-py's and asyncio's: nothing new
            return
        fresh = False
        for message in messages:
            sequence = message.metadata.sequence.stream
            if sequence not in spooled:
                spool.append(
                    message.subject, int(time.time() * 1000), message.data, sequence, flush=False
                )
                spooled.add(sequence)
                fresh = True
        if fresh:
            spool.sync()  # durable before the server is told
        if self.opts.consumer_ack_policy != "None":
            for message in messages:
                await message.ack()

    def disconnect(self, client: Any) -> None:
        async def close() -> None:
            task = getattr(client, "task", None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await client.client.close()

        with contextlib.suppress(Exception):
            client.run(close(), timeout=10)
        client.close()


class NatsSource(SpooledSource):
    """Options: ``options`` (the table's, as JSON), ``spool`` (its directory), ``durable``;
    ``reconnect_attempts`` (tests: fewer than ``client.RECONNECT_ATTEMPTS``)."""

    reader_type = _Reader

    @classmethod
    def name(cls) -> str:
        return "arroyo_nats"


def read_nats(ctx: ReadContext, table: TableSpec, opts: NatsOptions) -> DataFrame:
    """The subject's or stream's messages as ``value``, the time each reached the spool as the
    source time, the subject as the ``subject`` metadata."""
    df = read_spooled(
        ctx,
        NatsSource,
        table,
        opts.model_dump_json(by_alias=True),
        durable="arroyo-{ident}",
    )
    subject = df["_meta_topic"].alias("_meta_subject")
    return df.select("value", "_source_time", "_eoi", subject, *carried(df.columns))
