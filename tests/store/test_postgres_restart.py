"""The store while its PostgreSQL server restarts: a transaction begun while the server is down
waits for it (up to ``RECONNECT_S``) and runs once it is back, rather than failing (found by the
chaos run: a restart failed the controller's next checkpoint record, which restarted a healthy
job)."""

from __future__ import annotations

import asyncio

from arroyo.store import JobConfig, JobId, Pipeline, PipelineId, StopMode, open_store
from arroyo.testing.postgres import running_postgres_server


def test_a_transaction_waits_for_the_server_to_come_back() -> None:
    with running_postgres_server() as server:

        async def scenario() -> None:
            store = await open_store(server.url)
            try:
                await store.migrate()
                await store.create_pipeline(
                    Pipeline(PipelineId("pl_1"), "p", "SELECT 1", "", "{}", "{}", 0),
                    JobId("job_1"),
                    JobConfig(StopMode.NONE, 1, 0, 0, False, False),
                )
                await asyncio.to_thread(server.stop)
                # Begun while the server is down (its pooled connections gone with it).
                read = asyncio.create_task(store.get_job(JobId("job_1")))
                await asyncio.sleep(1.0)
                assert not read.done()
                await asyncio.to_thread(server.start)
                job = await asyncio.wait_for(read, 30)
                assert job is not None
                await store.update_job_status(job.id, job.status)
            finally:
                await store.close()

        asyncio.run(scenario())
