"""Readiness (``GET /api/v1/status``): whether the cluster can take a pipeline now, service by
service. ``/api/v1/ping`` is liveness: it answers while the api process serves, whatever else
is down.

How the api learns each service's state, with the calls that exist for other purposes:

- controller: it answers ``ListNodes`` within the probe's timeout. The call is made without
  ``wait_for_ready``, so a controller that cannot be reached fails it at once.
- nodes: what that ``ListNodes`` answered: ready once a node has registered and heartbeats.
  Free slots are reported but do not make the cluster unready: a job waits in Scheduling for
  one, as on a busy cluster.
- compiler: its channel connects. The compiler binds its gRPC port only after it has started
  Spark and planned its warm-up sample, so a connection means it compiles.

A service that is not ready is ``starting`` until this api has once seen it ready, and
``unavailable`` after (it was up, and went away). Every failure to learn a state is a state:
the status is always a 200.
"""

from __future__ import annotations

import asyncio

from arroyo.api import models as m
from arroyo.rpc import CompilerClient, ControllerClient, RpcError
from arroyo_rpc.v1 import controller_pb2

# How long one status request waits for each service: short, the UI polls it.
PROBE_TIMEOUT_S = 1.0


class Readiness:
    """The services' states as this api sees them. One per ``Api``, on its event loop; the only
    state it keeps is which services it has seen ready."""

    def __init__(
        self,
        compiler: CompilerClient,
        controller: ControllerClient,
        *,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self._compiler = compiler
        self._controller = controller
        self._timeout_s = probe_timeout_s
        self._seen_ready: set[str] = set()

    async def status(self) -> m.ClusterStatus:
        """Ask every service now, concurrently; takes at most about ``probe_timeout_s``."""
        compiler_up, nodes = await asyncio.gather(
            self._compiler.connected(self._timeout_s), self._list_nodes()
        )
        compiler = self._service(
            "compiler", compiler_up, "not answering: it may still be starting Spark"
        )
        if isinstance(nodes, RpcError) and nodes.retryable:
            controller = self._service("controller", False, f"not answering: {nodes.message}")
            nodes_status = m.NodesStatus(
                state="unknown",
                detail="the controller, which knows the nodes, is not answering",
                count=0,
                task_slots=0,
                free_slots=0,
            )
        else:
            # An error that is not retryable is still an answer: the controller is up.
            controller = self._service("controller", True, "")
            nodes_status = self._nodes(nodes)
        services = m.ClusterServices(controller=controller, compiler=compiler, nodes=nodes_status)
        ready = all(s.state == "ready" for s in (controller, compiler, nodes_status))
        return m.ClusterStatus(ready=ready, services=services)

    async def _list_nodes(self) -> controller_pb2.ListNodesResponse | RpcError:
        try:
            return await self._controller.list_nodes(
                controller_pb2.ListNodesRequest(), timeout_s=self._timeout_s
            )
        except RpcError as err:
            return err

    def _service(self, name: str, up: bool, why_not: str) -> m.ServiceStatus:
        if up:
            self._seen_ready.add(name)
            return m.ServiceStatus(state="ready")
        state: m.ServiceState = "unavailable" if name in self._seen_ready else "starting"
        return m.ServiceStatus(state=state, detail=why_not)

    def _nodes(self, answer: controller_pb2.ListNodesResponse | RpcError) -> m.NodesStatus:
        if isinstance(answer, RpcError):
            return m.NodesStatus(
                state="unknown",
                detail=f"the controller did not list its nodes: {answer.message}",
                count=0,
                task_slots=0,
                free_slots=0,
            )
        nodes = list(answer.nodes)
        why_not = "no node has registered with the controller"
        status = self._service("nodes", bool(nodes), why_not)
        free = sum(n.free_slots for n in nodes)
        detail = status.detail
        if nodes and not free:
            detail = "every task slot is taken: a new job waits for one"
        return m.NodesStatus(
            state=status.state,
            detail=detail,
            count=len(nodes),
            task_slots=sum(n.task_slots for n in nodes),
            free_slots=free,
        )
