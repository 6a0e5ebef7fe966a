"""The controller's node registry: spread placement with slots claimed as they are picked, and
slots of workers a controller did not start counted once their nodes register."""

from __future__ import annotations

import asyncio

from arroyo.controller.nodes import NodeRegistry


async def test_jobs_placed_at_once_spread_over_the_nodes() -> None:
    nodes = NodeRegistry(30.0)
    for name in ("c", "a", "b"):
        await nodes.register(name, f"{name}:1", 4)
    picked = await asyncio.gather(*(nodes.claim_slots(1, f"job-{n}", 1.0) for n in range(6)))
    assert sorted(n.node_id for n in picked if n) == ["a", "a", "b", "b", "c", "c"]
    assert all(n.free_slots == 2 for n in nodes.nodes.values())
    nodes.release("job-0")
    assert sum(n.free_slots for n in nodes.nodes.values()) == 7
    # Nothing fits: the claim waits, then gives up.
    assert await nodes.claim_slots(4, "big", 0.1) is None


async def test_slots_held_on_a_node_count_once_it_registers() -> None:
    nodes = NodeRegistry(30.0)
    nodes.held("a", "worker-1", 3)  # adopted from the database before node a registered
    await nodes.register("a", "a:1", 4)
    await nodes.register("b", "b:1", 4)
    assert nodes.nodes["a"].free_slots == 1
    assert (await nodes.claim_slots(2, "job", 1.0)).node_id == "b"  # type: ignore[union-attr]
    nodes.release("worker-1")
    assert nodes.nodes["a"].free_slots == 4
