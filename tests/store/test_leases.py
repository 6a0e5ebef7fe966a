"""Leases on the store (``Store.acquire_lease``...), on SQLite and on a real PostgreSQL server:
one holder at a time, by the database's clock, handed over when it ends or is released, and
one winner when several processes try at once."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from arroyo.store import JobState, Store, open_store
from tests.store.test_store import code_of, create, database_url, job_id, opened
from tests.waiting import eventually

__all__ = ["database_url"]

SECOND = 1_000_000


async def test_one_holder_until_the_lease_ends(database_url: str) -> None:
    async with opened(database_url) as store:
        assert await store.get_lease("controller") is None
        first = await store.acquire_lease("controller", "a", 60 * SECOND)
        assert first is not None and first.holder == "a" and first.term == 1
        # The database's clock, in microseconds since the epoch, as the wall clock here.
        assert abs(first.renewed_at - time.time_ns() // 1000) < 5 * SECOND
        assert first.expires_at - first.renewed_at == 60 * SECOND
        assert await store.acquire_lease("controller", "b", 60 * SECOND) is None
        assert await store.get_lease("controller") == first

        # Renewing keeps the term and the time it was taken, and moves its end on.
        renewed = await store.acquire_lease("controller", "a", 120 * SECOND)
        assert renewed is not None
        assert (renewed.term, renewed.acquired_at) == (first.term, first.acquired_at)
        assert renewed.expires_at > first.expires_at

        # Other leases are other rows.
        other = await store.acquire_lease("other", "b", SECOND)
        assert other is not None and other.term == 1


async def test_an_ended_lease_is_taken_over_with_a_new_term(database_url: str) -> None:
    async with opened(database_url) as store:
        first = await store.acquire_lease("controller", "a", 200_000)
        assert first is not None
        assert await store.acquire_lease("controller", "b", SECOND) is None
        # Taken once it ends (0.2 s, by the database's clock), not before.
        taken = await eventually(
            "the lease to end", lambda: store.acquire_lease("controller", "b", 60 * SECOND), 30
        )
        assert taken.holder == "b" and taken.term == first.term + 1
        # The one it was taken from cannot renew it, nor release it.
        assert await store.acquire_lease("controller", "a", 60 * SECOND) is None
        assert not await store.release_lease("controller", "a")
        assert (await store.get_lease("controller")) == taken


async def test_a_released_lease_is_free_at_once(database_url: str) -> None:
    async with opened(database_url) as store:
        assert await store.acquire_lease("controller", "a", 3600 * SECOND) is not None
        assert await store.release_lease("controller", "a")
        taken = await store.acquire_lease("controller", "b", 60 * SECOND)
        assert taken is not None and taken.holder == "b" and taken.term == 2


async def test_one_winner_among_processes_that_try_at_once(database_url: str) -> None:
    async with opened(database_url):
        pass  # migrated once, before the contenders open it
    stores: list[Store] = [await open_store(database_url) for _ in range(4)]
    try:
        for _ in range(3):
            holders = [f"p{i}" for i in range(len(stores))]
            won = await asyncio.gather(
                *(s.acquire_lease("race", h, 100_000) for s, h in zip(stores, holders, strict=True))
            )
            assert sum(lease is not None for lease in won) == 1, won
            await asyncio.sleep(0.15)  # it ends: the next round is a take-over
    finally:
        for s in stores:
            await s.close()


async def test_a_lease_needs_time(database_url: str) -> None:
    async with opened(database_url) as store:
        with pytest.raises(ValueError):
            await store.acquire_lease("controller", "a", 0)


async def test_status_writes_fenced_by_a_lease_stop_when_it_is_lost(database_url: str) -> None:
    async with opened(database_url) as store:
        job = await create(store, 1)
        running = replace(job.status, state=JobState.RUNNING)
        held = await store.acquire_lease("controller", "a", 200_000)
        assert held is not None
        await store.update_job_status(job_id(1), running, fence=held)
        # Renewed: the same tenure, still good.
        assert await store.acquire_lease("controller", "a", 200_000) is not None
        await store.update_job_status(job_id(1), running, fence=held)
        # Ended (by the database's clock), then taken: the old holder writes nothing.
        await asyncio.sleep(0.3)
        failed = replace(running, state=JobState.FAILED)
        assert await code_of(store.update_job_status(job_id(1), failed, fence=held)) == (
            "lease_lost"
        )
        taken = await store.acquire_lease("controller", "b", 60 * SECOND)
        assert taken is not None
        assert await code_of(store.update_job_status(job_id(1), failed, fence=held)) == (
            "lease_lost"
        )
        stored = await store.get_job(job_id(1))
        assert stored is not None and stored.status == running
        await store.update_job_status(job_id(1), failed, fence=taken)
        missing = store.update_job_status(job_id(2), failed, fence=taken)
        assert await code_of(missing) == "not_found"
