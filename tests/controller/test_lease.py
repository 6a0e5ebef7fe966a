"""The controller's lease (arroyo.controller.lease) over a real store: a standby waits, the
holder renews, and a holder that cannot renew stops acting before the database lets another
take over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from arroyo.controller.lease import LEASE_NAME, ControllerLease, holder_id
from arroyo.store import open_store
from tests.waiting import eventually


async def test_standby_takes_over_when_the_holder_stops_renewing(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'arroyo.db'}")
    await store.migrate()
    try:
        active, standby = ControllerLease(store, 0.8), ControllerLease(store, 0.8)
        lease = await active.acquire()
        assert lease.term == 1 and active.held and active.readiness() == {"lease": None}
        lost: list[str] = []

        async def on_lost(reason: str) -> None:
            lost.append(reason)

        keeping = asyncio.create_task(active.keep(on_lost))
        waiting = asyncio.create_task(standby.acquire())
        # Renewed several times over (each renewal moves its end): the standby still waits.
        ends = {lease.renewed_at}

        async def renewed() -> bool:
            ends.add(active.lease.renewed_at)
            return len(ends) >= 4

        await eventually("three renewals", renewed, 30, interval=0.05)
        assert not waiting.done() and active.held and not lost
        keeping.cancel()  # the holder stops renewing, as one killed does
        stopped_renewing = time.monotonic()
        taken = await asyncio.wait_for(waiting, 5)
        assert taken.term == 2 and standby.held
        assert time.monotonic() - stopped_renewing <= 0.8 * 1.25 + 0.5
        assert not active.held  # its own deadline passed before the database's

        # The old holder, keeping it again, finds its own time gone and says so, once.
        again = asyncio.create_task(active.keep(on_lost))
        await asyncio.wait_for(again, 5)
        assert len(lost) == 1 and not active.held
        assert active.readiness()["lease"] == lost[0]

        # A graceful stop releases it: the next taker does not wait out its time.
        await standby.release()
        third = ControllerLease(store, 60.0)
        assert (await asyncio.wait_for(third.acquire(), 2)).term == 3
        current = await store.get_lease(LEASE_NAME)
        assert current is not None and current.holder == third.holder
    finally:
        await store.close()


async def test_a_controller_started_again_in_place_takes_its_lease_back_at_once(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'arroyo.db'}")
    await store.migrate()
    try:
        assert holder_id(5116).endswith(":5116") and holder_id() != holder_id()
        killed = ControllerLease(store, 60.0, holder=holder_id(5116))
        first = await killed.acquire()
        # Not released (killed -9): the same name takes it back without waiting 60 s.
        again = ControllerLease(store, 60.0, holder=holder_id(5116))
        taken = await asyncio.wait_for(again.acquire(), 2)
        assert taken.term == first.term
        # Another name waits.
        elsewhere = asyncio.create_task(ControllerLease(store, 60.0).acquire())
        await asyncio.sleep(0.5)
        assert not elsewhere.done()
        elsewhere.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await elsewhere
    finally:
        await store.close()
