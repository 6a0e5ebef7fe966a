"""One active controller: the one holding the lease ``controller`` in the database.

What holds. Several controllers may run against one database; at most one acts (drives jobs,
answers workers and nodes) at a time. A controller holds the lease under its name
(``holder_id``): ``host:port`` when its gRPC port is fixed, so one killed and started again in
place takes its own lease back at once instead of waiting out its time (two processes on one
host cannot both bind that port, and a holder binds it before it acts: the second of two
with one name fails to start); ``host:pid:random`` on a port picked at start. A controller
without it is a standby: it does not bind its gRPC port (its peers dial every controller's
address and reach the one that listens, ``arroyo.rpc.channel``), its ``/status`` says
``standby`` (503), and it tries to take the lease every ``lease_ttl_s / 4``. The active one
renews the lease as often. The database's clock decides when a lease has ended
(``arroyo.store.leases``), so the controllers' clocks need not agree.

The holder's own count. A holder cannot learn from the database that its time ran out: the
database may be what it cannot reach. So it keeps a deadline of its own on its monotonic clock,
``0.8 * lease_ttl_s`` after it *sent* its last renewal that succeeded, which is before the
database's (``lease_ttl_s`` after the database *ran* it). Past that deadline, or when a renewal
finds the lease taken, it has lost: ``keep`` calls ``on_lost`` once, and the controller stops
its job drivers at once and its process exits (exit code 1: a supervisor starts it again, as a
standby). A standby can take the lease only after the database's deadline, so two controllers
never act at once as long as the holder's process is not paused past its own deadline (a
stopped VM, SIGSTOP). For that case, the jobs' statuses are fenced: a driver writes its job's
status only in a statement that checks, by the database's clock, that this lease (holder and
term) still holds (``Store.update_job_status``'s ``fence``); a refused write stops the driver.
What is not fenced: a paused holder that wakes can still make the calls a state makes before
its next status write (a node's ``StartWorker``, a worker's ``StopExecution``) and record
checkpoints and job errors, until its own deadline check, at most ``lease_ttl_s / 4`` later,
stops it; a worker it started is of a generation the new controller does not know, and is
refused.

A controller that stops gracefully (SIGTERM) releases the lease after its drivers stopped, so
a standby takes over at its next attempt rather than after the lease's time; one killed -9
is replaced within about ``1.25 * lease_ttl_s`` of its last renewal. Either way the new one
adopts the running workers and nodes as a restarted controller does
(``arroyo.controller.controller``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable

import structlog

from arroyo.store import Lease, Store

log = structlog.get_logger(__name__)

LEASE_NAME = "controller"
# The holder's own deadline, as a share of the lease's time (see the module).
_OWN_SHARE = 0.8


def holder_id(port: int = 0) -> str:
    """The name this process holds the lease under (see the module)."""
    if port:
        return f"{socket.gethostname()}:{port}"
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ControllerLease:
    """The controller service's lease. ``acquire`` (the standby's wait), then ``keep`` (a task
    of the active controller's), ``release`` at a graceful stop. On the service's loop."""

    def __init__(self, store: Store, ttl_s: float, *, holder: str | None = None) -> None:
        self.store = store
        self.holder = holder or holder_id()
        self.ttl_s = ttl_s
        self.interval_s = ttl_s / 4
        self.lease: Lease | None = None
        self.lost: str | None = None
        # Monotonic: until when this process may act (see the module).
        self._valid_until = 0.0

    @property
    def held(self) -> bool:
        return self.lost is None and time.monotonic() < self._valid_until

    def readiness(self) -> dict[str, str | None]:
        if self.held:
            return {"lease": None}
        return {"lease": self.lost or "this controller does not hold the lease"}

    def status(self) -> dict[str, object]:
        lease = self.lease
        return {
            "lease": {
                "holder": self.holder,
                "held": self.held,
                "term": lease.term if lease else None,
            }
        }

    async def acquire(self) -> Lease:
        """Wait until this process holds the lease, trying every ``interval_s``; a database
        that does not answer is waited for like a lease that is taken."""
        waiting_on: str | None = None
        while True:
            sent = time.monotonic()
            try:
                lease = await self._try()
            except Exception as err:
                log.warning("controller_lease_unreachable", error=f"{type(err).__name__}: {err}")
                lease = None
            if lease is not None:
                self._took(lease, sent)
                log.info(
                    "controller_lease_acquired",
                    holder=self.holder,
                    term=lease.term,
                    expires_at=lease.expires_at,
                )
                return lease
            current = await self._current_holder()
            if current != waiting_on:
                log.info("controller_standby", holder=self.holder, active=current)
                waiting_on = current
            await asyncio.sleep(self.interval_s)

    async def keep(self, on_lost: Callable[[str], Awaitable[None]]) -> None:
        """Renew the lease every ``interval_s`` until it is lost; then log
        ``controller_lease_lost``, await ``on_lost(reason)`` and return. Run as a task after
        ``acquire``; cancel it to stop renewing (``release`` then)."""
        while True:
            left = self._valid_until - time.monotonic()
            await asyncio.sleep(max(0.0, min(self.interval_s, left)))
            sent = time.monotonic()
            left = self._valid_until - sent
            if left <= 0:
                reason = f"the lease was not renewed within {_OWN_SHARE * self.ttl_s:g} s"
                break
            try:
                async with asyncio.timeout(left):
                    lease = await self._try()
            except TimeoutError:
                reason = f"the lease was not renewed within {_OWN_SHARE * self.ttl_s:g} s"
                break
            except Exception as err:
                log.warning("controller_lease_renew_failed", error=f"{type(err).__name__}: {err}")
                continue
            if lease is None:
                reason = f"another controller took the lease ({await self._current_holder()})"
                break
            self._took(lease, sent)
        self.lost = reason
        log.error("controller_lease_lost", holder=self.holder, reason=reason)
        await on_lost(reason)

    async def release(self) -> None:
        """Give the lease up now (a graceful stop, after the drivers stopped), so a standby
        takes it at its next try. A failure is logged: the lease then ends in its time."""
        if self.lease is None:
            return
        self._valid_until = 0.0
        try:
            released = await self.store.release_lease(LEASE_NAME, self.holder)
        except Exception as err:
            log.warning("controller_lease_release_failed", error=f"{type(err).__name__}: {err}")
            return
        if released:
            log.info("controller_lease_released", holder=self.holder, term=self.lease.term)

    async def _try(self) -> Lease | None:
        return await self.store.acquire_lease(LEASE_NAME, self.holder, int(self.ttl_s * 1e6))

    def _took(self, lease: Lease, sent: float) -> None:
        self.lease = lease
        self._valid_until = sent + _OWN_SHARE * self.ttl_s

    async def _current_holder(self) -> str | None:
        try:
            lease = await self.store.get_lease(LEASE_NAME)
        except Exception:
            return None
        return lease.holder if lease else None
