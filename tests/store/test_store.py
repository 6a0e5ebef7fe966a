"""The Store contract (arroyo.store.model.Store), on SQLite and on a real PostgreSQL server:
every test taking ``database_url`` runs once on each, against a database of its own."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager, closing
from dataclasses import replace
from pathlib import Path

import asyncpg
import pytest

from arroyo.store import (
    Checkpoint,
    Conflict,
    ConnectionProfile,
    ConnectionProfileId,
    ConnectionTable,
    ConnectionTableId,
    DatabaseUrlError,
    Job,
    JobConfig,
    JobId,
    JobState,
    JobStatus,
    NotFound,
    Pipeline,
    PipelineId,
    SavedUdf,
    StopMode,
    Store,
    StoreError,
    UdfId,
    open_store,
)
from arroyo.store.migrations import LATEST_VERSION, MIGRATIONS
from arroyo.testing.postgres import create_database
from arroyo_cli.main import main as arroyo_main
from tests import aio


async def code_of(call: Awaitable[object]) -> str:
    """The code of the ``StoreError`` that ``call`` raises (failing when it raises none)."""
    with pytest.raises(StoreError) as raised:
        await call
    return raised.value.code


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database. SQLite's file is in a directory that does not exist yet: the store
    creates it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'arroyo.db'}"
    server: str = request.getfixturevalue("postgres_url")
    return aio.run(create_database(server, f"store_{uuid.uuid4().hex[:12]}"))


@asynccontextmanager
async def opened(url: str, *, migrate: bool = True) -> AsyncIterator[Store]:
    store = await open_store(url)
    try:
        if migrate:
            await store.migrate()
        yield store
    finally:
        await store.close()


async def schema_versions(url: str) -> list[int]:
    """What schema_version holds, read past the store."""
    sql = "SELECT version FROM schema_version ORDER BY version"
    if url.startswith("sqlite:///"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            return [row[0] for row in conn.execute(sql)]
    conn = await asyncpg.connect(url)
    try:
        return [row["version"] for row in await conn.fetch(sql)]
    finally:
        await conn.close()


def pipeline(n: int, *, created_at: int | None = None) -> Pipeline:
    return Pipeline(
        id=PipelineId(f"pl_{n}"),
        name=f"pipeline {n}",
        query=f"SELECT {n} FROM impulse",
        udfs="def f(x): return x  # with 'quotes' and $1",
        program_json='{"sources": []}',
        graph_json='{"nodes": [], "edges": []}',
        created_at=1_700_000_000_000_000 + n if created_at is None else created_at,
    )


CONFIG = JobConfig(
    stop=StopMode.NONE,
    parallelism=2,
    checkpoint_interval_micros=10_000_000,
    restart_nonce=0,
    restart_force=False,
    ignore_state=False,
)


def job_id(n: int) -> JobId:
    return JobId(f"job_{n}")


async def create(store: Store, n: int, *, created_at: int | None = None) -> Job:
    return await store.create_pipeline(pipeline(n, created_at=created_at), job_id(n), CONFIG)


def checkpoint(n: int, epoch: int, *, query: str = "q0", finished_at: int = 0) -> Checkpoint:
    return Checkpoint(
        job_id=job_id(n),
        query=query,
        epoch=epoch,
        generation=1,
        watermark_micros=None,
        offsets_json='{"src": 5}',
        state_rows=10,
        state_bytes=2048,
        rows_in=100,
        duration_micros=1500,
        finished_at=finished_at or 1_000 + epoch,
    )


# migrations


async def test_migrate_creates_the_schema_and_is_idempotent(database_url: str) -> None:
    async with opened(database_url, migrate=False) as store:
        assert await store.migrate() == LATEST_VERSION
        await create(store, 1)
        assert await store.migrate() == LATEST_VERSION
        # The second run applied nothing: the data is still there, each migration recorded once.
        assert await store.get_pipeline(PipelineId("pl_1")) == pipeline(1)
    assert await schema_versions(database_url) == [m.version for m in MIGRATIONS]


async def test_migrate_concurrently_applies_each_migration_once(database_url: str) -> None:
    stores = await asyncio.gather(*(open_store(database_url) for _ in range(4)))
    try:
        # Four connections racing on an empty database: without the lock, two would both
        # create the tables and one would fail.
        versions = await asyncio.gather(*(s.migrate() for s in stores))
    finally:
        await asyncio.gather(*(s.close() for s in stores))
    assert versions == [LATEST_VERSION] * 4
    assert await schema_versions(database_url) == [m.version for m in MIGRATIONS]


async def test_migrate_refuses_a_schema_newer_than_this_build(database_url: str) -> None:
    async with opened(database_url):
        pass
    future = LATEST_VERSION + 1
    if database_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(database_url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute("INSERT INTO schema_version VALUES (?, 0)", (future,))
    else:
        conn = await asyncpg.connect(database_url)
        await conn.execute("INSERT INTO schema_version VALUES ($1, 0)", future)
        await conn.close()
    async with opened(database_url, migrate=False) as store:
        assert await code_of(store.migrate()) == "schema_too_new"


# pipelines


async def test_create_pipeline_makes_its_job_in_state_created(database_url: str) -> None:
    async with opened(database_url) as store:
        config = replace(CONFIG, restart_nonce=3, restart_force=True, ignore_state=True)
        job = await store.create_pipeline(pipeline(1), job_id(1), config)

        assert job.id == job_id(1)
        assert job.pipeline_id == "pl_1"
        assert job.config == config
        assert job.created_at == pipeline(1).created_at
        assert job.status.state is JobState.CREATED
        assert (job.status.generation, job.status.restarts, job.status.run_id) == (0, 0, 0)
        # Nothing to act on: the controller restarts only when the config's nonce moves on.
        assert job.status.restart_nonce == config.restart_nonce
        assert job.status.failure_message is None
        assert job.status.worker_id is None
        assert job.status.started_at is None
        assert await store.get_pipeline(PipelineId("pl_1")) == pipeline(1)
        assert await store.get_job(job_id(1)) == job
        assert await store.list_jobs(PipelineId("pl_1")) == [job]


async def test_lookups_of_missing_rows_return_none(database_url: str) -> None:
    async with opened(database_url) as store:
        assert await store.get_pipeline(PipelineId("pl_nope")) is None
        assert await store.get_job(JobId("job_nope")) is None
        assert await store.list_pipelines(10) == []
        assert await store.list_jobs() == []
        assert await store.list_jobs(PipelineId("pl_nope")) == []
        assert await store.list_checkpoints(JobId("job_nope")) == []
        assert await store.list_job_errors(JobId("job_nope")) == []


async def test_create_pipeline_with_a_taken_id_conflicts_and_writes_nothing(
    database_url: str,
) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        with pytest.raises(Conflict):
            await store.create_pipeline(replace(pipeline(1), name="again"), job_id(2), CONFIG)
        # One transaction: the second pipeline's job was not left behind.
        assert await store.get_job(job_id(2)) is None
        assert await store.get_pipeline(PipelineId("pl_1")) == pipeline(1)
        with pytest.raises(Conflict):
            await store.create_pipeline(pipeline(2), job_id(1), CONFIG)
        assert await store.get_pipeline(PipelineId("pl_2")) is None


async def test_list_pipelines_pages_newest_first(database_url: str) -> None:
    async with opened(database_url) as store:
        for n in (3, 1, 5, 2):
            await create(store, n)
        # Same created_at as pl_3: the id breaks the tie, so no page skips or repeats it.
        await create(store, 4, created_at=pipeline(3).created_at)

        pages: list[list[str]] = []
        after: PipelineId | None = None
        while page := await store.list_pipelines(2, starting_after=after):
            pages.append([p.id for p in page])
            after = page[-1].id
        assert pages == [["pl_5", "pl_4"], ["pl_3", "pl_2"], ["pl_1"]]
        everything = await store.list_pipelines(10)
        assert [p.id for p in everything] == ["pl_5", "pl_4", "pl_3", "pl_2", "pl_1"]
        assert everything[0] == pipeline(5)
        assert everything[1] == pipeline(4, created_at=pipeline(3).created_at)
        assert await store.list_pipelines(0) == []
        assert await store.list_pipelines(10, starting_after=PipelineId("pl_1")) == []


async def test_list_pipelines_refuses_an_unknown_cursor_and_a_negative_limit(
    database_url: str,
) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        missing = store.list_pipelines(10, starting_after=PipelineId("pl_gone"))
        assert await code_of(missing) == "not_found"
        with pytest.raises(ValueError, match="limit"):
            await store.list_pipelines(-1)


async def test_list_jobs_newest_first_all_or_one_pipelines(database_url: str) -> None:
    async with opened(database_url) as store:
        jobs = [await create(store, n) for n in (1, 3, 2)]
        assert [j.id for j in await store.list_jobs()] == ["job_3", "job_2", "job_1"]
        assert await store.list_jobs(PipelineId("pl_2")) == [jobs[2]]


async def test_delete_pipeline_takes_its_job_checkpoints_and_errors(database_url: str) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        kept = await create(store, 2)
        for n in (1, 2):
            await store.add_checkpoint(checkpoint(n, epoch=1))
            await store.add_job_error(
                job_id(n), generation=1, domain="user", retryable=False, message="bad"
            )

        await store.delete_pipeline(PipelineId("pl_1"))

        assert await store.get_pipeline(PipelineId("pl_1")) is None
        assert await store.get_job(job_id(1)) is None
        assert await store.list_checkpoints(job_id(1)) == []
        assert await store.list_job_errors(job_id(1)) == []
        # The other pipeline is untouched.
        assert await store.list_pipelines(10) == [pipeline(2)]
        assert await store.list_jobs() == [kept]
        assert await store.list_checkpoints(job_id(2)) == [checkpoint(2, epoch=1)]
        assert len(await store.list_job_errors(job_id(2))) == 1
        assert await code_of(store.delete_pipeline(PipelineId("pl_1"))) == "not_found"


# job config (the api)


async def test_update_job_config_changes_only_the_fields_given(database_url: str) -> None:
    async with opened(database_url) as store:
        created = await create(store, 1)
        jid = job_id(1)

        job = await store.update_job_config(jid)
        assert job == created

        job = await store.update_job_config(jid, stop=StopMode.CHECKPOINT)
        assert job.config == replace(CONFIG, stop=StopMode.CHECKPOINT)
        job = await store.update_job_config(jid, parallelism=8)
        assert job.config == replace(CONFIG, stop=StopMode.CHECKPOINT, parallelism=8)
        job = await store.update_job_config(jid, checkpoint_interval_micros=5_000_000)
        expected = replace(
            CONFIG, stop=StopMode.CHECKPOINT, parallelism=8, checkpoint_interval_micros=5_000_000
        )
        assert job.config == expected
        job = await store.update_job_config(jid, ignore_state=True)
        assert job.config == replace(expected, ignore_state=True)
        job = await store.update_job_config(jid, ignore_state=False, stop=StopMode.FORCE)
        assert job.config == replace(expected, stop=StopMode.FORCE)

        # The controller's columns are not the api's to touch.
        assert job.status == created.status
        assert await store.get_job(jid) == job


async def test_restart_bumps_the_nonce_and_clears_stop(database_url: str) -> None:
    async with opened(database_url) as store:
        created = await create(store, 1)
        jid = job_id(1)
        await store.update_job_config(jid, stop=StopMode.GRACEFUL)

        job = await store.update_job_config(jid, restart=True, restart_force=True)
        assert job.config.restart_nonce == CONFIG.restart_nonce + 1
        assert job.config.stop is StopMode.NONE
        assert job.config.restart_force is True

        job = await store.update_job_config(jid, restart=True)
        assert job.config.restart_nonce == CONFIG.restart_nonce + 2
        assert job.config.restart_force is False
        # The status keeps the nonce the controller last acted on.
        assert job.status.restart_nonce == created.status.restart_nonce

        # restart_force alone is not a restart request.
        job = await store.update_job_config(jid, restart_force=True)
        assert (job.config.restart_nonce, job.config.restart_force) == (2, False)

        with pytest.raises(ValueError, match="restart"):
            await store.update_job_config(jid, restart=True, stop=StopMode.IMMEDIATE)


async def test_concurrent_restarts_each_bump_the_nonce(database_url: str) -> None:
    async with opened(database_url) as store, opened(database_url) as other:
        await create(store, 1)
        await asyncio.gather(
            *(s.update_job_config(job_id(1), restart=True) for s in [store, other] * 5)
        )
        job = await store.get_job(job_id(1))
        assert job is not None
        assert job.config.restart_nonce == 10


async def test_changing_a_missing_job_raises_not_found(database_url: str) -> None:
    async with opened(database_url) as store:
        status = (await create(store, 1)).status
        missing = JobId("job_nope")
        assert await code_of(store.update_job_config(missing)) == "not_found"
        changed = store.update_job_config(missing, parallelism=4, restart=True)
        assert await code_of(changed) == "not_found"
        assert await code_of(store.update_job_status(missing, status)) == "not_found"
        late = replace(checkpoint(1, epoch=1), job_id=missing)
        assert await code_of(store.add_checkpoint(late)) == "not_found"
        error = store.add_job_error(
            missing, generation=1, domain="user", retryable=False, message="m"
        )
        assert await code_of(error) == "not_found"
        assert await code_of(store.delete_pipeline(PipelineId("pl_nope"))) == "not_found"
        # The error says whose fault it is.
        err = NotFound("x")
        assert (err.code, err.domain, err.retryable) == ("not_found", "user", False)


# job status (the controller)


async def test_update_job_status_round_trips_every_field(database_url: str) -> None:
    async with opened(database_url) as store:
        created = await create(store, 1)
        jid = job_id(1)
        await store.update_job_config(jid, parallelism=4)

        full = JobStatus(
            state=JobState.RUNNING,
            generation=7,
            restarts=2,
            restart_nonce=5,
            run_id=3,
            failure_message="the source went away",
            failure_domain="external",
            worker_id="worker-1",
            worker_address="127.0.0.1:6000",
            node_id="node-a",
            started_at=1_700_000_000_000_001,
            finished_at=1_700_000_000_000_002,
            updated_at=1_700_000_000_000_003,
        )
        await store.update_job_status(jid, full)
        job = await store.get_job(jid)
        assert job is not None
        assert job.status == full
        # The api's columns are not the controller's to touch.
        assert job.config == replace(CONFIG, parallelism=4)

        cleared = replace(
            full,
            state=JobState.CHECKPOINT_STOPPING,
            failure_message=None,
            failure_domain=None,
            worker_id=None,
            worker_address=None,
            node_id=None,
            started_at=None,
            finished_at=None,
        )
        await store.update_job_status(jid, cleared)
        assert (await store.get_job(jid)) == replace(
            created, config=replace(CONFIG, parallelism=4), status=cleared
        )
        for state in JobState:
            await store.update_job_status(jid, replace(cleared, state=state))
            job = await store.get_job(jid)
            assert job is not None
            assert job.status.state is state


# checkpoints and errors


async def test_add_checkpoint_replaces_a_repeated_report(database_url: str) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        first = checkpoint(1, epoch=4)
        await store.add_checkpoint(first)
        again = replace(
            first,
            generation=2,
            watermark_micros=1_700_000_000_000_000,
            offsets_json='{"src": 9}',
            state_rows=11,
            state_bytes=4096,
            rows_in=200,
            duration_micros=900,
            finished_at=first.finished_at + 10,
        )
        await store.add_checkpoint(again)
        assert await store.list_checkpoints(job_id(1)) == [again]


async def test_list_checkpoints_newest_first_with_a_limit(database_url: str) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        await create(store, 2)
        reports = [
            checkpoint(1, epoch=1, finished_at=100),
            checkpoint(1, epoch=1, query="q1", finished_at=150),
            checkpoint(1, epoch=2, finished_at=200),
            checkpoint(1, epoch=3, finished_at=300),
            checkpoint(2, epoch=9, finished_at=999),
        ]
        for c in reports:
            await store.add_checkpoint(c)
        newest_first = [reports[3], reports[2], reports[1], reports[0]]
        assert await store.list_checkpoints(job_id(1)) == newest_first
        assert await store.list_checkpoints(job_id(1), limit=2) == newest_first[:2]
        assert await store.list_checkpoints(job_id(2)) == [reports[4]]


async def test_job_errors_newest_first(database_url: str) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        await create(store, 2)
        before = time.time_ns() // 1000
        await store.add_job_error(
            job_id(1), generation=1, domain="user", retryable=False, message="bad row"
        )
        await store.add_job_error(
            job_id(2), generation=1, domain="internal", retryable=True, message="other job"
        )
        await store.add_job_error(
            job_id(1),
            generation=2,
            domain="external",
            retryable=True,
            message="kafka down",
            details="Traceback ...",
        )
        after = time.time_ns() // 1000

        errors = await store.list_job_errors(job_id(1))
        assert [(e.generation, e.domain, e.retryable, e.message, e.details) for e in errors] == [
            (2, "external", True, "kafka down", "Traceback ..."),
            (1, "user", False, "bad row", ""),
        ]
        assert all(e.job_id == "job_1" for e in errors)
        assert errors[0].id > errors[1].id
        assert all(before <= e.created_at <= after for e in errors)
        assert await store.list_job_errors(job_id(1), limit=1) == errors[:1]
        assert [e.message for e in await store.list_job_errors(job_id(2))] == ["other job"]


# several stores on one database


async def test_two_stores_on_one_database_see_each_others_writes(database_url: str) -> None:
    async with opened(database_url) as api, opened(database_url) as controller:
        await create(api, 1)
        job = await controller.get_job(job_id(1))
        assert job is not None
        status = replace(job.status, state=JobState.RUNNING, generation=1)
        await controller.update_job_status(job_id(1), status)
        await api.update_job_config(job_id(1), stop=StopMode.CHECKPOINT)

        seen_by_api = await api.get_job(job_id(1))
        seen_by_controller = await controller.get_job(job_id(1))
        assert seen_by_api == seen_by_controller
        assert seen_by_api is not None
        assert seen_by_api.status == status
        assert seen_by_api.config.stop is StopMode.CHECKPOINT

        # Writers from both at once: each waits for the other's lock, none fails or is lost.
        await asyncio.gather(
            *(
                s.add_job_error(
                    job_id(1), generation=i, domain="user", retryable=False, message=f"e{i}"
                )
                for i, s in enumerate([api, controller] * 10)
            )
        )
        messages = {e.message for e in await controller.list_job_errors(job_id(1))}
        assert messages == {f"e{i}" for i in range(20)}


async def test_a_cancelled_call_leaves_the_store_usable(database_url: str) -> None:
    async with opened(database_url) as store:
        await create(store, 1)
        for steps in range(16):
            task = asyncio.create_task(
                store.add_job_error(
                    job_id(1), generation=steps, domain="user", retryable=False, message="m"
                )
            )
            # Let the call run `steps` turns of the event loop before cancelling it, so the
            # cancellation lands at a different point of its transaction each time.
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            # Whatever the call had done, the store takes the next one.
            job = await store.update_job_config(job_id(1), parallelism=steps + 1)
            assert job.config.parallelism == steps + 1
        # A cancelled call wrote its row entirely or not at all.
        errors = await store.list_job_errors(job_id(1))
        assert len({e.generation for e in errors}) == len(errors)
        assert all(e.message == "m" for e in errors)


# connection profiles


def profile(n: int, name: str | None = None) -> ConnectionProfile:
    return ConnectionProfile(
        id=ConnectionProfileId(f"cp_{n}"),
        name=f"cluster {n}" if name is None else name,
        connector="kafka",
        config={
            "bootstrap_servers": f"broker-{n}:9092",
            "auth.password": 'it\'s $1 "quoted"',
            "client_configs": "linger.ms=5, acks=all",
        },
        created_at=1_700_000_000_000_000 + n,
    )


async def test_connection_profiles_round_trip_and_list_by_name(database_url: str) -> None:
    async with opened(database_url) as store:
        for n, name in ((1, "b"), (2, "a"), (3, "C")):
            await store.create_connection_profile(profile(n, name))
        # By code point, the same on both engines whatever PostgreSQL's collation.
        assert await store.list_connection_profiles() == [
            profile(3, "C"),
            profile(2, "a"),
            profile(1, "b"),
        ]
        assert await store.get_connection_profile(ConnectionProfileId("cp_1")) == profile(1, "b")
        assert await store.get_connection_profile_by_name("a") == profile(2, "a")


async def test_connection_profile_lookups_of_missing_ones_return_none(database_url: str) -> None:
    async with opened(database_url) as store:
        assert await store.list_connection_profiles() == []
        assert await store.get_connection_profile(ConnectionProfileId("cp_nope")) is None
        assert await store.get_connection_profile_by_name("nope") is None


async def test_a_taken_connection_profile_name_or_id_conflicts(database_url: str) -> None:
    async with opened(database_url) as store:
        await store.create_connection_profile(profile(1))
        taken = store.create_connection_profile(replace(profile(2), name="cluster 1"))
        assert await code_of(taken) == "conflict"
        with pytest.raises(Conflict):
            await store.create_connection_profile(replace(profile(1), name="other"))
        assert await store.list_connection_profiles() == [profile(1)]


async def test_concurrent_creates_of_one_name_make_one_profile(database_url: str) -> None:
    async with opened(database_url) as store:
        results = await asyncio.gather(
            *(store.create_connection_profile(profile(n, "same")) for n in range(4)),
            return_exceptions=True,
        )
        assert sum(r is None for r in results) == 1
        assert all(isinstance(r, Conflict) for r in results if r is not None)
        assert len(await store.list_connection_profiles()) == 1


async def test_delete_connection_profile(database_url: str) -> None:
    async with opened(database_url) as store:
        await store.create_connection_profile(profile(1))
        await store.create_connection_profile(profile(2))
        await store.delete_connection_profile(ConnectionProfileId("cp_1"))
        assert await store.list_connection_profiles() == [profile(2)]
        assert await store.get_connection_profile_by_name("cluster 1") is None
        gone = store.delete_connection_profile(ConnectionProfileId("cp_1"))
        assert await code_of(gone) == "not_found"
        # The name is free again.
        await store.create_connection_profile(replace(profile(3), name="cluster 1"))


# connection tables


def table(n: int, *, profile_id: str | None = "cp_1", created_at: int = 0) -> ConnectionTable:
    return ConnectionTable(
        id=ConnectionTableId(f"ct_{n}"),
        name=f"table_{n}",
        connector="kafka",
        table_type="source",
        profile_id=None if profile_id is None else ConnectionProfileId(profile_id),
        config={"topic": "it's $1", "source.offset": "earliest"},
        schema={"format": "json", "fields": [{"name": "id", "type": "int64"}]},
        created_at=created_at or 1_700_000_000_000_000 + n,
    )


async def test_connection_tables_round_trip_page_newest_first_and_delete(
    database_url: str,
) -> None:
    async with opened(database_url) as store:
        await store.create_connection_profile(profile(1))
        for n in (1, 2, 3):
            await store.create_connection_table(table(n, profile_id=None if n == 2 else "cp_1"))
        assert await store.list_connection_tables() == [
            table(3),
            table(2, profile_id=None),
            table(1),
        ]
        assert await store.list_connection_tables(1) == [table(3)]
        page = await store.list_connection_tables(5, ConnectionTableId("ct_3"))
        assert page == [table(2, profile_id=None), table(1)]
        assert await code_of(store.list_connection_tables(1, ConnectionTableId("ct_9"))) == (
            "not_found"
        )
        assert await store.get_connection_table(ConnectionTableId("ct_1")) == table(1)
        assert await store.get_connection_table(ConnectionTableId("ct_9")) is None
        await store.delete_connection_table(ConnectionTableId("ct_1"))
        assert await code_of(store.delete_connection_table(ConnectionTableId("ct_1"))) == (
            "not_found"
        )


async def test_a_connection_table_needs_a_free_name_and_a_profile_that_exists(
    database_url: str,
) -> None:
    async with opened(database_url) as store:
        await store.create_connection_profile(profile(1))
        await store.create_connection_table(table(1))
        taken = store.create_connection_table(replace(table(2), name="table_1"))
        assert await code_of(taken) == "conflict"
        missing = store.create_connection_table(table(3, profile_id="cp_9"))
        assert await code_of(missing) == "not_found"
        assert await store.list_connection_tables() == [table(1)]


async def test_a_profile_a_connection_table_uses_is_not_deleted(database_url: str) -> None:
    async with opened(database_url) as store:
        await store.create_connection_profile(profile(1))
        await store.create_connection_table(table(1))
        with pytest.raises(Conflict, match="used by connection tables: table_1"):
            await store.delete_connection_profile(ConnectionProfileId("cp_1"))
        await store.delete_connection_table(ConnectionTableId("ct_1"))
        await store.delete_connection_profile(ConnectionProfileId("cp_1"))


def saved_udf(n: int, name: str | None = None) -> SavedUdf:
    return SavedUdf(
        id=UdfId(f"udf_{n}"),
        name=name or f"double_{n}",
        prefix="",
        language="python",
        definition=f"from arroyo_udf import udf\n\n@udf\ndef double_{n}(x: int) -> int:\n"
        "    return 2 * x  # it's $1\n",
        description="twice",
        created_at=1_700_000_000_000_000 - n,
        updated_at=1_700_000_000_000_000 - n,
    )


async def test_udfs_round_trip_oldest_first_with_free_names_and_delete(
    database_url: str,
) -> None:
    async with opened(database_url) as store:
        for n in (1, 2):
            await store.create_udf(saved_udf(n))
        assert await store.list_udfs() == [saved_udf(2), saved_udf(1)]
        assert await code_of(store.create_udf(saved_udf(3, name="double_1"))) == "conflict"
        assert await code_of(store.create_udf(saved_udf(4, name="DOUBLE_1"))) == "conflict"
        await store.delete_udf(UdfId("udf_1"))
        assert await code_of(store.delete_udf(UdfId("udf_1"))) == "not_found"
        assert await store.list_udfs() == [saved_udf(2)]


# opening


async def test_sqlite_file_is_in_wal_mode_with_its_directory_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "arroyo.db"
    async with opened(f"sqlite:///{path}"):
        pass
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_open_store_refuses_unknown_urls_without_echoing_them() -> None:
    with pytest.raises(DatabaseUrlError) as raised:
        await open_store("mysql://root:hunter2@db/arroyo")
    assert raised.value.code == "bad_database_url"
    # What the message says is the behaviour under test: no password, and the URLs it takes.
    assert "hunter2" not in str(raised.value)
    assert "sqlite:///" in str(raised.value)
    assert await code_of(open_store("arroyo.db")) == "bad_database_url"


async def test_open_store_reports_an_unreachable_postgres() -> None:
    with pytest.raises(StoreError) as raised:
        # Port 1 on localhost: nothing listens there, so the connection is refused at once.
        await open_store("postgresql://nobody@127.0.0.1:1/arroyo")
    assert (raised.value.code, raised.value.retryable) == ("store_error", True)
    # The code is the store's generic one: that the server was not reached, the message says
    # (what `arroyo migrate` prints).
    assert "cannot connect" in str(raised.value)


# arroyo migrate


def _write_config(tmp_path: Path, database_url: str) -> Path:
    config = tmp_path / "arroyo-test.toml"
    config.write_text(f'[database]\nurl = "{database_url}"\n')
    return config


def test_cli_migrate(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no arroyo.toml of the working directory's
    config = _write_config(tmp_path, database_url)
    assert arroyo_main(["migrate", "--config", str(config)]) == 0
    assert arroyo_main(["migrate", "--config", str(config)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"schema version {LATEST_VERSION}"] * 2
    assert aio.run(schema_versions(database_url)) == [m.version for m in MIGRATIONS]


def test_cli_migrate_from_several_processes_at_once(database_url: str, tmp_path: Path) -> None:
    config = _write_config(tmp_path, database_url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "arroyo_cli.main", "migrate", "--config", str(config)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out == f"schema version {LATEST_VERSION}\n"
    assert aio.run(schema_versions(database_url)) == [m.version for m in MIGRATIONS]


def test_cli_migrate_reports_a_bad_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = _write_config(tmp_path, "mysql://db/arroyo")
    assert arroyo_main(["migrate", "--config", str(config)]) == 1
    assert "error[bad_database_url]" in capsys.readouterr().err
