"""The message systems' connectors in the cluster: one pipeline, submitted through the REST API
and run by a worker the node starts, reads Kinesis, RabbitMQ, a NATS JetStream stream and an MQTT
topic, and writes NATS, Kinesis, Redis and MQTT; each system's own client puts the input in and
reads the output back."""

from __future__ import annotations

import json
import uuid

import pytest

from arroyo.testing.kinesis import KinesisServer
from arroyo.testing.mosquitto import Mosquitto
from arroyo.testing.nats import NatsServer
from arroyo.testing.rabbitmq import RabbitmqNode
from arroyo.testing.redis import RedisServer
from tests.cluster.harness import Cluster
from tests.connectors.test_kinesis import read_stream
from tests.connectors.test_mqtt import _Client as MqttClient
from tests.connectors.test_nats import _Client as NatsClient
from tests.connectors.test_rabbitmq import _publish as publish_to_stream

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.kinesis,
    pytest.mark.rabbitmq,
    pytest.mark.nats,
    pytest.mark.mqtt,
    pytest.mark.redis,
    pytest.mark.xdist_group("cluster"),
]


def test_message_systems_in_and_out_through_the_cluster(
    cluster: Cluster,
    kinesis: KinesisServer,
    rabbitmq: RabbitmqNode,
    nats_server: NatsServer,
    mosquitto: Mosquitto,
    redis_server: RedisServer,
) -> None:
    import redis

    tag = uuid.uuid4().hex[:8]
    k_in, k_out = f"in-{tag}", f"out-{tag}"
    kinesis.create_stream(k_in, shards=2)
    kinesis.create_stream(k_out)
    kinesis.client().put_records(
        StreamName=k_in,
        Records=[
            {"Data": json.dumps({"n": n}).encode(), "PartitionKey": str(n)} for n in range(10)
        ],
    )
    publish_to_stream(rabbitmq, f"r-{tag}", list(range(10, 20)), create=True)
    nats = NatsClient(nats_server)
    nats.stream(f"js-{tag}", [f"js.{tag}"])
    for n in range(20, 30):
        nats.publish_js(f"js.{tag}", json.dumps({"n": n}))
    nats.subscribe(f"out.{tag}")
    mqtt_out = MqttClient(mosquitto, subscribe=f"out/{tag}")
    mqtt_in = MqttClient(mosquitto)
    store = redis.Redis(redis_server.host, redis_server.port, password=redis_server.password)

    def table(name: str, options: str, kind: str) -> str:
        columns = "(n BIGINT) " if kind == "source" else ""
        return f"CREATE TABLE {name} {columns}WITH ({options}, type = '{kind}', format = 'json');\n"

    query = (
        table(
            "k_in",
            f"connector = 'kinesis', {kinesis.options()}, stream_name = '{k_in}', "
            "'source.offset' = 'earliest'",
            "source",
        )
        + table(
            "r_in",
            f"connector = 'rabbitmq', {rabbitmq.options()}, stream = 'r-{tag}', "
            "'source.offset' = 'first'",
            "source",
        )
        + table(
            "j_in", f"connector = 'nats', {nats_server.options()}, stream = 'js-{tag}'", "source"
        )
        + table(
            "m_in",
            f"connector = 'mqtt', {mosquitto.options()}, topic = 'in/{tag}', qos = 'AtLeastOnce'",
            "source",
        )
        + table(
            "n_out", f"connector = 'nats', {nats_server.options()}, subject = 'out.{tag}'", "sink"
        )
        + table(
            "k_out", f"connector = 'kinesis', {kinesis.options()}, stream_name = '{k_out}'", "sink"
        )
        + table(
            "r_out",
            f"connector = 'redis', {redis_server.options()}, target = 'list', "
            f"'target.key_prefix' = 'out-{tag}'",
            "sink",
        )
        + table("m_out", f"connector = 'mqtt', {mosquitto.options()}, topic = 'out/{tag}'", "sink")
        + "INSERT INTO n_out SELECT n FROM k_in;\nINSERT INTO k_out SELECT n FROM r_in;\n"
        "INSERT INTO r_out SELECT n FROM j_in;\nINSERT INTO m_out SELECT n FROM m_in;\n"
    )
    pid = cluster.call("POST", "/pipelines", {"name": "messaging", "query": query})["id"]
    try:
        cluster.wait_state(pid, "Running")

        def mqtt_through() -> bool:
            # The source's session starts with the pipeline: publish until it comes through.
            with mqtt_out.lock:
                if mqtt_out.received:
                    return True
            mqtt_in.publish(f"in/{tag}", json.dumps({"n": 30}))
            return False

        cluster.until("MQTT through", lambda: mqtt_through() or None)
        cluster.until("NATS out", lambda: len(nats.received) >= 10 or None)
        cluster.until("Kinesis out", lambda: len(read_stream(kinesis, k_out)) >= 10 or None)
        cluster.until("Redis out", lambda: store.llen(f"out-{tag}") >= 10 or None)
        cluster.call("PATCH", f"/pipelines/{pid}", {"stop": "checkpoint"})
        cluster.wait_state(pid, "Stopped")
    finally:
        nats.close()
        mqtt_in.close()
        mqtt_out.close()
    assert sorted(json.loads(m)["n"] for m in nats.received) == list(range(10))
    k_rows = [json.loads(r["Data"])["n"] for r in read_stream(kinesis, k_out)]
    assert sorted(k_rows) == list(range(10, 20))
    assert sorted(json.loads(v)["n"] for v in store.lrange(f"out-{tag}", 0, -1)) == list(
        range(20, 30)
    )
    with mqtt_out.lock:
        assert {json.loads(p)["n"] for _, p in mqtt_out.received} == {30}
    store.close()
