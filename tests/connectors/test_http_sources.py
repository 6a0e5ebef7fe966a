"""The HTTP sources (``sse``, ``websocket``, ``polling_http``) against stand-ins of the public
feeds Arroyo's examples read, served by aiohttp on loopback in this process: a Mastodon-like
SSE feed (a 500 first, a stream closed mid-way and resumed from ``Last-Event-ID``, an event
type filtered out), a crypto ticker over WebSocket that wants a subscription message before it
ticks (closed mid-way: subscribed again; pinged: answered), and a Prometheus text endpoint
polled and parsed in SQL. Faults: a frame over ``max_message_bytes``, invalid JSON under
``bad_data`` fail and drop, a burst past ``buffer.max_bytes`` dropped and counted, or held
back without loss."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from pyspark.sql import SparkSession

from arroyo.connectors.runtime.loop import Loop
from arroyo.engine.catalog import spark_planner
from arroyo.engine.runner import PipelineRunner
from arroyo.errors import JobFailedError, PlanningError
from arroyo.testing.ports import free_port
from tests.connectors.pipelines import json_lines, start
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.http]

_SUBSCRIBE = {"type": "subscribe", "product_ids": ["BTC-USD"], "channels": ["ticker"]}
_BURST = 50


def _status(n: int) -> str:
    return json.dumps({"id": str(n), "content": f"<p>toot {n}</p>", "account": {"acct": "a"}})


def _prometheus(version: int) -> bytes:
    lines = ["# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode."]
    lines.append("# TYPE node_cpu_seconds_total counter")
    for cpu in (0, 1):
        for mode, base in (("idle", 100.0), ("user", 10.0)):
            value = base * (cpu + 1) + version
            lines.append(f'node_cpu_seconds_total{{cpu="{cpu}",mode="{mode}"}} {value}')
    lines.append(f"node_load1 {0.5 + version}")
    return ("\n".join(lines) + "\n").encode()


class _Feeds:
    """One aiohttp server for the module, each test's scenario under a key of its own; it
    records each request's headers and what the WebSocket clients sent."""

    def __init__(self) -> None:
        self.loop = Loop()
        self.port = free_port()
        self.requests: dict[str, list[dict[str, str]]] = defaultdict(list)
        self.subscriptions: dict[str, int] = defaultdict(int)
        self.pongs: dict[str, int] = defaultdict(int)
        app = web.Application()
        app.add_routes(
            [
                web.get("/mastodon/{key}", self._mastodon),
                web.get("/ticker/{key}", self._ticker),
                web.get("/metrics/{key}", self._metrics),
                web.get("/lines/{key}", self._lines),
            ]
        )
        self.runner = web.AppRunner(app, shutdown_timeout=1)
        self.loop.run(self._start(), 30)

    async def _start(self) -> None:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    def url(self, scheme: str, path: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path}"

    def close(self) -> None:
        self.loop.run(self.runner.cleanup(), 30)
        self.loop.close()

    def _seen(self, request: web.Request) -> int:
        """Records the request; how many of its key came before."""
        key = request.match_info["key"]
        self.requests[key].append(dict(request.headers))
        return len(self.requests[key]) - 1

    async def _mastodon(self, request: web.Request) -> web.StreamResponse:
        """A 500 first; then, after a byte order mark, statuses 1 and 3 (an event of another
        type between them), an id-only block (id 4) and the stream closed; then, asked from the
        last id, 5 and 6 and a stream kept open."""
        attempt = self._seen(request)
        if attempt == 0:
            return web.Response(status=500, text="try later")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if attempt == 1:
            await response.write(b"\xef\xbb\xbf")  # the mark, then an event's first line
            await response.write(f"event: update\nid: 1\ndata: {_status(1)}\n\n".encode())
            await response.write(b": welcome\n\nretry: 100\n\n")
            await response.write(b"event: delete\nid: 2\ndata: 2\n\n")
            await response.write(f"event: update\nid: 3\r\ndata: {_status(3)}\r\n\r\n".encode())
            await response.write(b"id: 4\n\n")
            return response
        first = int(request.headers.get("Last-Event-ID", "0")) + 1
        for n in (first, first + 1):
            # A status over two data lines: joined with a newline, still one JSON document.
            head, tail = _status(n).split(", ", 1)
            await response.write(
                f"event: update\nid: {n}\ndata: {head},\ndata: {tail}\n\n".encode()
            )
        with suppress(ConnectionError):
            while True:
                await asyncio.sleep(0.5)
                await response.write(b": keep-alive\n\n")
        return response

    async def _ticker(self, request: web.Request) -> web.WebSocketResponse:
        """Ticks once subscribed: 1 to 3 and a close on the first connection, then 4 to 6
        (or ``big``: one message of 3000 bytes; ``burst``: _BURST at once)."""
        key = request.match_info["key"]
        attempt = self._seen(request)
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        first = await ws.receive(timeout=10)
        if first.type != WSMsgType.TEXT or json.loads(first.data) != _SUBSCRIBE:
            await ws.close(code=1008, message=b"subscribe first")
            return ws
        self.subscriptions[key] += 1
        await ws.ping(b"alive?")
        if key.startswith("big"):
            await ws.send_str(json.dumps({"sequence": 1, "pad": "x" * 3000}))
        elif key.startswith("burst"):
            for n in range(_BURST):
                await ws.send_str(json.dumps({"sequence": n, "pad": "x" * 150}))
        else:
            for n in range(3 * attempt + 1, 3 * attempt + 4):
                tick = {"type": "ticker", "sequence": n, "product_id": "BTC-USD"}
                await ws.send_str(json.dumps({**tick, "price": f"{60000 + n}.5"}))
            if attempt == 0:
                await ws.close()
                return ws
        async for message in ws:
            if message.type == WSMsgType.PONG:
                self.pongs[key] += 1
        return ws

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        """Prometheus' text format; the counters move on at the 3rd and 6th request only. The
        body comes in two chunks, a moment apart, as a large scrape would: the source reads it
        whole."""
        version = min(self._seen(request) // 3, 2)
        body = _prometheus(version)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        half = len(body) // 2
        await response.write(body[:half])
        await asyncio.sleep(0.05)
        await response.write(body[half:])
        await response.write_eof()
        return response

    async def _lines(self, request: web.Request) -> web.Response:
        self._seen(request)
        return web.Response(text='{"n": 1}\nnot json\n{"n": 2}\n', content_type="text/plain")


@pytest.fixture(scope="module")
def feeds() -> Iterator[_Feeds]:
    server = _Feeds()
    yield server
    server.close()


@contextmanager
def _running(spark: SparkSession, sql: str, state: Path) -> Iterator[PipelineRunner]:
    """A pipeline whose progress (its metrics) is taken while it runs, stopped at the end."""
    runner = start(spark, sql, state)
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            runner.wait()
        except BaseException as err:
            failed.append(err)

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    try:
        yield runner
    finally:
        # At once: a graceful stop waits for a batch in flight, which an idle feed never ends.
        runner.stop(graceful=False)
        waiting.join(60)
    assert not failed, failed


def _sink(out: Path) -> str:
    return f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink');\n"


def test_sse_resumes_from_the_last_event_id_after_a_500_and_a_closed_stream(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    sql = (
        "CREATE TABLE mastodon (id TEXT, content TEXT, kind TEXT METADATA FROM 'event_type', "
        "event_id TEXT METADATA FROM 'event_id') WITH (connector = 'sse', "
        f"endpoint = '{feeds.url('http', 'mastodon/a')}', events = 'update', format = 'json', "
        "headers = 'Authorization: Bearer t0ken,User-Agent: arroyo-test');\n"
        + _sink(out)
        + "INSERT INTO out SELECT id, content, kind, event_id FROM mastodon;"
    )
    with _running(spark, sql, tmp_path / "state"):
        wait_until("four statuses", lambda: len(json_lines(out)) >= 4, timeout=60)
    rows = sorted(json_lines(out), key=lambda r: int(r["id"]))
    assert [r["id"] for r in rows] == ["1", "3", "5", "6"]
    assert {r["kind"] for r in rows} == {"update"}
    assert [r["event_id"] for r in rows] == ["1", "3", "5", "6"]
    assert rows[0]["content"] == "<p>toot 1</p>"
    seen = feeds.requests["a"]
    assert [h.get("Last-Event-ID") for h in seen[:3]] == [None, None, "4"]
    assert all(h["Authorization"] == "Bearer t0ken" for h in seen)


def test_websocket_subscribes_again_after_a_close_and_answers_pings(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path
) -> None:
    out = tmp_path / "out.json"
    sql = (
        "CREATE TABLE ticker (sequence BIGINT, product_id TEXT, price TEXT) WITH ("
        f"connector = 'websocket', endpoint = '{feeds.url('ws', 'ticker/t')}', format = 'json', "
        f"'subscription_messages.0' = '{json.dumps(_SUBSCRIBE)}');\n"
        + _sink(out)
        + "INSERT INTO out SELECT sequence, CAST(price AS DOUBLE) AS price FROM ticker;"
    )
    with _running(spark, sql, tmp_path / "state"):
        wait_until("six ticks", lambda: len(json_lines(out)) >= 6, timeout=60)
        wait_until("a pong", lambda: feeds.pongs["t"] >= 1, timeout=30)
    rows = sorted(json_lines(out), key=lambda r: r["sequence"])
    assert [r["sequence"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[0]["price"] == 60001.5
    assert feeds.subscriptions["t"] == 2


def test_a_websocket_message_over_the_limit_fails_the_job_naming_the_option(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path
) -> None:
    sql = (
        "CREATE TABLE ticker (sequence BIGINT) WITH (connector = 'websocket', "
        f"endpoint = '{feeds.url('ws', 'ticker/big')}', format = 'json', "
        f"max_message_bytes = '1kb', subscription_message = '{json.dumps(_SUBSCRIBE)}');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT sequence FROM ticker;"
    )
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=r"larger than max_message_bytes \(1024 bytes\)"):
        runner.wait(timeout=60)


@pytest.mark.parametrize(("overflow", "lost"), [("drop", True), ("backpressure", False)])
def test_a_burst_past_the_buffer_is_dropped_and_counted_or_held_back(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path, overflow: str, lost: bool
) -> None:
    out = tmp_path / "out.json"
    key = f"burst-{overflow}"
    sql = (
        "CREATE TABLE ticker (sequence BIGINT) WITH (connector = 'websocket', "
        f"endpoint = '{feeds.url('ws', 'ticker/' + key)}', format = 'json', "
        f"'buffer.max_bytes' = '1kb', 'buffer.overflow' = '{overflow}', "
        f"subscription_message = '{json.dumps(_SUBSCRIBE)}');\n"
        + _sink(out)
        + "INSERT INTO out SELECT sequence FROM ticker;"
    )
    with _running(spark, sql, tmp_path / "state") as runner:

        def accounted() -> bool:
            return len(json_lines(out)) + runner.progress.dropped_overflow_messages >= _BURST

        wait_until("every message read or counted", accounted, timeout=60)
    sequences = [r["sequence"] for r in json_lines(out)]
    assert len(sequences) == len(set(sequences))
    dropped = runner.progress.dropped_overflow_messages
    assert len(sequences) + dropped == _BURST
    assert (dropped > 0) == lost


def test_a_prometheus_endpoint_polled_and_parsed(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path
) -> None:
    """Arroyo's Prometheus example (its parse_prom UDF as regexp_match): each changed scrape's
    idle CPU seconds; an unchanged scrape emits nothing."""
    out = tmp_path / "out.json"
    sql = (
        "CREATE TABLE metrics (value TEXT) WITH (connector = 'polling_http', "
        f"endpoint = '{feeds.url('http', 'metrics/p')}', format = 'raw_string', "
        "framing = 'newline', emit_behavior = 'changed', poll_interval_ms = '100');\n"
        "CREATE VIEW samples AS SELECT m[1] AS name, m[2] AS labels, "
        "CAST(m[3] AS DOUBLE) AS value FROM (SELECT regexp_match(value, "
        "'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)\\})? (\\S+)$') AS m FROM metrics) "
        "WHERE m IS NOT NULL;\n"
        'CREATE VIEW cpu AS SELECT regexp_match(labels, \'cpu="([^"]*)"\')[1] AS cpu, '
        'regexp_match(labels, \'mode="([^"]*)"\')[1] AS mode, value FROM samples '
        "WHERE name = 'node_cpu_seconds_total';\n"
        + _sink(out)
        + "INSERT INTO out SELECT cpu, value AS idle FROM cpu WHERE mode = 'idle';"
    )
    with _running(spark, sql, tmp_path / "state"):
        wait_until("three scrapes' rows", lambda: len(json_lines(out)) >= 6, timeout=60)
        wait_until("more polls", lambda: len(feeds.requests["p"]) >= 12, timeout=30)
    rows = sorted((r["cpu"], r["idle"]) for r in json_lines(out))
    assert rows == [
        ("0", 100.0),
        ("0", 101.0),
        ("0", 102.0),
        ("1", 200.0),
        ("1", 201.0),
        ("1", 202.0),
    ]


@pytest.mark.parametrize("executors_read", ["true", "false"])
def test_invalid_json_is_dropped_and_counted(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path, executors_read: str
) -> None:
    """Also with the driver reading the spool's batches (as where Spark's executors are on
    other machines) rather than Spark's tasks."""
    from arroyo.connectors.runtime.spool import EXECUTORS_READ_SPOOL

    out = tmp_path / "out.json"
    sql = (
        "CREATE TABLE p (n BIGINT) WITH (connector = 'polling_http', "
        f"endpoint = '{feeds.url('http', 'lines/drop')}', format = 'json', framing = 'newline', "
        "emit_behavior = 'changed', poll_interval_ms = '50', bad_data = 'drop');\n"
        + _sink(out)
        + "INSERT INTO out SELECT n FROM p;"
    )
    spark.conf.set(EXECUTORS_READ_SPOOL, executors_read)
    try:
        with _running(spark, sql, tmp_path / "state") as runner:
            wait_until("two rows", lambda: len(json_lines(out)) >= 2, timeout=60)
            wait_until("the count", lambda: runner.progress.dropped_bad_records, timeout=30)
    finally:
        spark.conf.unset(EXECUTORS_READ_SPOOL)
    assert sorted(r["n"] for r in json_lines(out)) == [1, 2]
    assert runner.progress.dropped_bad_records == 1


def test_invalid_json_fails_the_job_naming_the_table(
    spark: SparkSession, feeds: _Feeds, tmp_path: Path
) -> None:
    sql = (
        "CREATE TABLE p (n BIGINT) WITH (connector = 'polling_http', "
        f"endpoint = '{feeds.url('http', 'lines/fail')}', format = 'json', framing = 'newline');\n"
        "CREATE TABLE out WITH (connector = 'blackhole');\nINSERT INTO out SELECT n FROM p;"
    )
    runner = start(spark, sql, tmp_path / "state")
    with pytest.raises(JobFailedError, match=r"bad data in table 'p' \(json\).*not json"):
        runner.wait(timeout=60)


@pytest.mark.parametrize(
    ("connector", "options", "message"),
    [
        ("websocket", "endpoint = 'http://127.0.0.1:1/'", "must be a ws:// or wss:// URL"),
        ("sse", "endpoint = 'ws://127.0.0.1:1/'", "must be a http:// or https:// URL"),
        ("sse", "endpoint = 'http://127.0.0.1:1/', headers = 'no colon'", "'Name: value'"),
        ("polling_http", "endpoint = 'http://127.0.0.1:1/', method = 'DELETE'", "method"),
        ("polling_http", "endpoint = 'http://h/', emit_behavior = 'some'", "emit_behavior"),
        ("polling_http", "endpoint = 'http://h/', 'buffer.overflow' = 'block'", "buffer.overflow"),
        (
            "websocket",
            "endpoint = 'ws://h/', subscription_message = 'a', 'subscription_messages.0' = 'b'",
            "not both",
        ),
    ],
)
def test_options_that_cannot_work_are_refused(
    spark: SparkSession, tmp_path: Path, connector: str, options: str, message: str
) -> None:
    sql = (
        f"CREATE TABLE src (n BIGINT) WITH (connector = '{connector}', {options}, "
        "format = 'json');\nCREATE TABLE out WITH (connector = 'blackhole');\n"
        "INSERT INTO out SELECT n FROM src;"
    )
    with pytest.raises(PlanningError) as caught:
        spark_planner(spark, state_dir=tmp_path).plan(sql)
    text = "\n".join(d.message for d in caught.value.diagnostics)
    assert message in text, text


def test_event_parser_reads_the_standard_s_line_endings_and_fields() -> None:
    from arroyo.connectors.sse.source import EventParser

    parser = EventParser(limit=64)
    got: list[Any] = []
    for chunk in (b"id: 7\nevent: a\ndata: x\r", b"\ndata: y\r\n\r", b"\n:c\ndata:z\r\r\n"):
        got += parser.feed(chunk)
    assert got == [("a", "7", b"x\ny"), ("message", "7", b"z")]
    # A byte order mark at the start is skipped, even cut between chunks; later, it is data.
    parser, got = EventParser(limit=64), []
    for chunk in (b"\xef", b"\xbb", b"\xbfdata: a\n\n", b"data: \xef\xbb\xbfb\n\n"):
        got += parser.feed(chunk)
    assert got == [("message", None, b"a"), ("message", None, b"\xef\xbb\xbfb")]
    assert EventParser(limit=64).runs(b"\xef\xbb\xbfdata: a\n\ndata: b\n\n") == [
        ("message", None, b"a\nb", 2)
    ]
    # Last-Event-ID is the id as of the last blank line: an id-only block sets it; the id of
    # an event cut off by a lost connection does not.
    parser = EventParser(limit=64, last_id="1")
    assert parser.feed(b"data: a\n\nid: 2\n\n") == [("message", "1", b"a")]
    assert parser.dispatched_id == "2"
    assert parser.feed(b"id: 3\ndata: b\n") == []
    assert parser.dispatched_id == "2"
    assert parser.feed(b"\n") == [("message", "3", b"b")]
    assert parser.dispatched_id == "3"
    # The same when the events come as a run of plain data lines (read without a line loop).
    parser = EventParser(limit=64)
    assert parser.feed(b"id: 7\n") == []
    assert parser.runs(b"data: a\n\ndata: b\n\n") == [("message", "7", b"a\nb", 2)]
    assert parser.dispatched_id == "7"
    with pytest.raises(ValueError, match="an event"):
        EventParser(limit=4).feed(b"data: 12345\n")


def test_a_stream_of_plain_data_events_is_read_alike_whole_or_line_by_line() -> None:
    """A chunk of events that are each one ``data:`` line is split at once (``_plain``); any
    other layout, cut anywhere, gives the same events as reading every line."""
    import random

    from arroyo.connectors.sse.source import EventParser

    rng = random.Random(30)
    pieces = [
        b"data: a\n\n",
        b"data:b\n\n",
        b"data: c\ndata: d\n\n",
        b"event: x\ndata: e\n\n",
        b"id: 7\n\n",
        b": comment\n\n",
        b"data: f\r\n\r\n",
        b"\n\n",
        b"data:\n\n",
        b"retry: 5\ndata: g\n\n",
        b"data: h\n",
        b"data: %s\n\n" % (b"y" * 70),
    ]
    for _ in range(300):
        stream = b"".join(rng.choice(pieces) for _ in range(30))
        cuts = sorted(rng.sample(range(len(stream)), 5))
        parser, got = EventParser(limit=64), []
        try:
            for lo, hi in zip([0, *cuts], [*cuts, len(stream)], strict=True):
                got += parser.feed(stream[lo:hi])
        except ValueError:
            got.append("too large")
        reference, want = EventParser(limit=64), []
        try:
            want = reference._lines(stream)
        except ValueError:
            want = [*want, "too large"]
        if "too large" in got or "too large" in want:
            assert ("too large" in got) == ("too large" in want)
        else:
            assert got == want
    plain = b"".join(b'data: {"n": %d}\n\n' % n for n in range(5000))
    parser, events = EventParser(limit=64), []
    for at in range(0, len(plain), 4096):
        events += parser.feed(plain[at : at + 4096])
    assert [data for _, _, data in events] == [b'{"n": %d}' % n for n in range(5000)]


def test_an_endpoint_that_stays_down_stops_the_source_naming_it(tmp_path: Path) -> None:
    """Retried with backoff, then given up (here after half a second, not two minutes): the
    reader's next read raises, which fails the query."""
    from arroyo.connectors.sse.options import SseOptions
    from arroyo.connectors.sse.source import SseSource

    endpoint = f"http://127.0.0.1:{free_port()}/events"
    options = SseOptions.model_validate({"endpoint": endpoint}).model_dump_json(by_alias=True)
    source = SseSource({"options": options, "spool": str(tmp_path / "spool"), "give_up_s": "0.5"})
    reader = source.streamReader(None)  # type: ignore[arg-type]
    try:
        assert reader.latestOffset() == {"pos": 0}

        def stopped() -> bool:
            try:
                reader.latestOffset()
            except RuntimeError as err:
                assert f"SSE endpoint {endpoint}: still failing after 0.5 s" in str(err)
                return True
            return False

        wait_until("the source to give up", stopped, timeout=30)
    finally:
        reader.stop()
