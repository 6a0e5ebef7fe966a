"""The node: one per machine; task slots, and the worker processes that use them."""

from arroyo.node.runtime import NodeRuntime, WorkerHandle

__all__ = ["NodeRuntime", "WorkerHandle"]
