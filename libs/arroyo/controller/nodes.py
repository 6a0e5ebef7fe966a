"""The nodes the controller knows, their slots, and which workers run where."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger(__name__)


@dataclass
class Node:
    node_id: str
    address: str
    task_slots: int
    last_heartbeat: float = field(default_factory=time.monotonic)
    # worker id -> slots it holds, as assigned by this controller
    assigned: dict[str, int] = field(default_factory=dict)
    # workers the node said it runs, at its last heartbeat
    reported: set[str] = field(default_factory=set)
    # The node that registered at this one's address, once one has: this one is gone.
    replaced_by: str | None = None

    @property
    def free_slots(self) -> int:
        return self.task_slots - sum(self.assigned.values())


class NodeRegistry:
    """Live nodes. Nodes register and heartbeat; one silent past the timeout is dropped, and so
    is one whose address a newly registered node took: two live processes cannot listen on one
    address, so the old one is gone (a node restarted in place, with a new id). Its workers are
    not gone with it: the new node adopts those still alive and lists them when it registers
    (the controller moves their jobs onto it). Dropped nodes are remembered in ``lost``, so
    that no one waits for them."""

    def __init__(self, heartbeat_timeout_s: float) -> None:
        self.timeout = heartbeat_timeout_s
        self.nodes: dict[str, Node] = {}
        self.lost: set[str] = set()
        self._replaced: list[Node] = []
        # Slots workers hold on nodes not registered yet (a controller that took over).
        self._held: dict[str, dict[str, int]] = {}
        self._changed = asyncio.Condition()

    async def register(self, node_id: str, address: str, task_slots: int) -> None:
        node = self.nodes.get(node_id)
        if node is None:
            for other in [n for n in self.nodes.values() if n.address == address]:
                del self.nodes[other.node_id]
                self.lost.add(other.node_id)
                other.replaced_by = node_id
                self._replaced.append(other)
                log.warning("node_replaced", node_id=other.node_id, by=node_id, address=address)
            node = Node(node_id, address, task_slots)
            node.assigned.update(self._held.pop(node_id, {}))
            self.nodes[node_id] = node
            self.lost.discard(node_id)
            log.info("node_registered", node_id=node_id, address=address, slots=task_slots)
        else:
            node.address, node.task_slots = address, task_slots
            node.last_heartbeat = time.monotonic()
        async with self._changed:
            self._changed.notify_all()

    def heartbeat(self, node_id: str, worker_ids: list[str]) -> Node | None:
        node = self.nodes.get(node_id)
        if node is not None:
            node.last_heartbeat = time.monotonic()
            node.reported = set(worker_ids)
        return node

    def expired(self) -> list[Node]:
        """Remove and return the nodes whose heartbeats stopped, and return those replaced by
        a new node at their address since the last call."""
        now = time.monotonic()
        dead = [n for n in self.nodes.values() if now - n.last_heartbeat > self.timeout]
        for node in dead:
            del self.nodes[node.node_id]
            self.lost.add(node.node_id)
            log.warning("node_lost", node_id=node.node_id)
        replaced, self._replaced = self._replaced, []
        return dead + replaced

    def assign(self, node_id: str, worker_id: str, slots: int) -> None:
        if node_id in self.nodes:
            self.nodes[node_id].assigned[worker_id] = slots

    def held(self, node_id: str, worker_id: str, slots: int) -> None:
        """``worker_id`` holds ``slots`` on ``node_id``, registered or about to register."""
        if node_id in self.nodes:
            self.assign(node_id, worker_id, slots)
        else:
            self._held.setdefault(node_id, {})[worker_id] = slots

    def release(self, worker_id: str) -> None:
        for node in self.nodes.values():
            node.assigned.pop(worker_id, None)
        for held in self._held.values():
            held.pop(worker_id, None)

    async def claim_slots(self, slots: int, claimant: str, timeout: float) -> Node | None:
        """Spread placement: the node with the most free slots that has ``slots`` free (ties
        to the lowest node id), waiting for one to come. Its slots are taken at once under
        ``claimant`` (release them, or ``assign`` them to the worker started there), so jobs
        scheduled at the same moment go to different nodes rather than all to the freest."""

        def pick() -> Node | None:
            fits = [n for n in self.nodes.values() if n.free_slots >= slots]
            return min(fits, key=lambda n: (-n.free_slots, n.node_id), default=None)

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(pick), timeout)
            except TimeoutError:
                return None
            node = pick()
            assert node is not None
            node.assigned[claimant] = slots
            return node

    async def wait_for(self, node_id: str, timeout: float) -> Node | None:
        """The node once it is registered (after a controller restart it registers again)."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: node_id in self.nodes), timeout
                )
            except TimeoutError:
                return None
            return self.nodes[node_id]
