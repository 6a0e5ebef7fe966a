"""The node registry: a node restarted in place (a new id at the old one's address) replaces the
old one at once, rather than after the heartbeat timeout, and nothing waits for a node known
to be gone (found by the chaos run: a killed node cost two heartbeat timeouts)."""

from __future__ import annotations

import time
from typing import Any, cast

from arroyo.config import ControllerConfig
from arroyo.controller.context import JobContext
from arroyo.controller.nodes import NodeRegistry
from arroyo.store import JobConfig, JobId, JobState, JobStatus, PipelineId, StopMode, Store


async def test_a_node_at_a_taken_address_replaces_the_old_one() -> None:
    registry = NodeRegistry(heartbeat_timeout_s=60)
    await registry.register("node_a", "127.0.0.1:5118", 4)
    await registry.register("node_b", "127.0.0.1:5119", 4)
    assert registry.expired() == []

    await registry.register("node_c", "127.0.0.1:5118", 4)  # node_a restarted in place
    assert set(registry.nodes) == {"node_b", "node_c"}
    assert [n.node_id for n in registry.expired()] == ["node_a"]
    assert registry.expired() == []  # reported once
    assert registry.lost == {"node_a"}

    # A node that comes back under its old id is live again.
    await registry.register("node_a", "127.0.0.1:5120", 4)
    assert "node_a" in registry.nodes and "node_a" not in registry.lost


async def test_killing_a_worker_on_a_lost_node_does_not_wait_for_the_node() -> None:
    settings = ControllerConfig(heartbeat_timeout_s=30)
    registry = NodeRegistry(settings.heartbeat_timeout_s)
    await registry.register("node_a", "127.0.0.1:5118", 4)
    registry.assign("node_a", "worker_1", 1)
    await registry.register("node_b", "127.0.0.1:5118", 4)
    registry.expired()
    status = JobStatus(
        JobState.RECOVERING, 1, 0, 0, 0, None, None, "worker_1", "127.0.0.1:1", "node_a", None,
        None, 0,
    )  # fmt: skip
    ctx = JobContext(
        JobId("job_1"),
        PipelineId("pl_1"),
        JobConfig(StopMode.NONE, 1, 0, 0, False, False),
        status,
        cast(Store, cast(Any, None)),
        registry,
        settings,
        "/tmp/unused",
    )
    started = time.monotonic()
    await ctx.kill_worker()
    assert time.monotonic() - started < 1
