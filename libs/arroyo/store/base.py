"""The store written once: every query and the mapping between rows and the model's dataclasses.

A backend supplies only a ``Dialect`` and ``_transaction()``, a context manager yielding a
``Transaction`` that runs statements and commits when the block exits cleanly (rolls back when
it raises). Queries use PostgreSQL's ``$1`` placeholders; the SQLite backend rewrites them.
"""

from __future__ import annotations

import abc
import json
import time
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from arroyo.store.api_keys import ApiKeyQueries
from arroyo.store.connection_tables import ConnectionTableQueries
from arroyo.store.errors import Conflict, LeaseLost, NotFound, StoreError
from arroyo.store.leases import LeaseQueries
from arroyo.store.migrations import LATEST_VERSION, MIGRATIONS, SCHEMA_VERSION_TABLE, Dialect
from arroyo.store.model import (
    Checkpoint,
    ConnectionProfile,
    ConnectionProfileId,
    Job,
    JobConfig,
    JobError,
    JobId,
    JobState,
    JobStatus,
    Lease,
    Pipeline,
    PipelineId,
    StopMode,
)
from arroyo.store.udfs import UdfQueries

Row = dict[str, Any]


class Transaction(Protocol):
    async def execute(self, sql: str, *args: object) -> int:
        """Run one statement; returns the number of rows it changed."""
        ...

    async def fetch(self, sql: str, *args: object) -> list[Row]:
        """Run one query; returns its rows as column -> value."""
        ...


_PIPELINE_COLUMNS = "id, name, query, udfs, program_json, graph_json, created_at"
_CONFIG_COLUMNS = (
    "stop",
    "parallelism",
    "checkpoint_interval_micros",
    "restart_nonce",
    "restart_force",
    "ignore_state",
)
# In model.JobStatus's field order; status.restart_nonce is stored as status_restart_nonce.
_STATUS_COLUMNS = (
    "state",
    "generation",
    "restarts",
    "status_restart_nonce",
    "run_id",
    "failure_message",
    "failure_domain",
    "worker_id",
    "worker_address",
    "node_id",
    "started_at",
    "finished_at",
    "updated_at",
)
_JOB_COLUMNS = ", ".join(("id", "pipeline_id", "created_at", *_CONFIG_COLUMNS, *_STATUS_COLUMNS))
_CHECKPOINT_COLUMNS = (
    "job_id",
    "query",
    "epoch",
    "generation",
    "watermark_micros",
    "offsets_json",
    "state_rows",
    "state_bytes",
    "rows_in",
    "duration_micros",
    "finished_at",
)
_JOB_ERROR_COLUMNS = "id, job_id, generation, created_at, domain, retryable, message, details"
_PROFILE_COLUMNS = "id, name, connector, config_json, created_at"


def _placeholders(count: int, start: int = 1) -> str:
    return ", ".join(f"${i}" for i in range(start, start + count))


def _now_micros() -> int:
    return time.time_ns() // 1000


def _check_limit(limit: int) -> None:
    # Postgres refuses a negative LIMIT and SQLite takes it for none: refuse it on both.
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")


class SqlStore(ConnectionTableQueries, UdfQueries, ApiKeyQueries, LeaseQueries, abc.ABC):
    """``model.Store`` over any SQL engine; see that Protocol for the contract of each method."""

    dialect: Dialect

    @abc.abstractmethod
    def _transaction(self, *, write: bool) -> AbstractAsyncContextManager[Transaction]:
        """A transaction of its own. ``write`` says it will change rows, so an engine that
        locks per database (SQLite) takes the write lock at the start rather than upgrading a
        read lock midway, which could fail instead of waiting."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def ping(self) -> None:
        async with self._transaction(write=False) as tx:
            await tx.fetch("SELECT 1 AS one")

    def _pipeline(self, row: Row) -> Pipeline:
        return _pipeline(self._opened(row, "program_json", f"pipeline {row['id']}'s program"))

    def _profile(self, row: Row) -> ConnectionProfile:
        what = f"connection profile {row['name']}'s settings"
        return _connection_profile(self._opened(row, "config_json", what))

    async def migrate(self) -> int:
        async with self._transaction(write=True) as tx:
            if self.dialect.migration_lock is not None:
                await tx.fetch(self.dialect.migration_lock)
            # Concurrent migrators queue on the lock above, so the one behind sees what the one
            # ahead applied and applies nothing.
            await tx.execute(SCHEMA_VERSION_TABLE)
            rows = await tx.fetch("SELECT MAX(version) AS version FROM schema_version")
            current = int(rows[0]["version"] or 0)
            if current > LATEST_VERSION:
                # An older build must not write to a schema it does not know.
                raise StoreError(
                    f"the database is at schema version {current}, newer than this build's "
                    f"{LATEST_VERSION}; upgrade arroyo",
                    code="schema_too_new",
                )
            for migration in MIGRATIONS[current:]:
                for statement in migration.statements(self.dialect):
                    await tx.execute(statement)
                await tx.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
                    migration.version,
                    _now_micros(),
                )
        return LATEST_VERSION

    @staticmethod
    async def _require_job(tx: Transaction, job_id: JobId) -> None:
        """Raise NotFound for a missing job before inserting a row that refers to it. (A job
        deleted between this and the insert still fails the insert on its foreign key, which
        the backends also report as NotFound.)"""
        if not await tx.fetch("SELECT 1 AS found FROM jobs WHERE id = $1", job_id):
            raise NotFound(f"job {job_id} does not exist")

    # pipelines and their job

    async def create_pipeline(self, pipeline: Pipeline, job_id: JobId, config: JobConfig) -> Job:
        job = Job(
            id=job_id,
            pipeline_id=pipeline.id,
            config=config,
            status=JobStatus(
                state=JobState.CREATED,
                generation=0,
                restarts=0,
                # Equal to the config's: nothing to act on until the user asks for a restart.
                restart_nonce=config.restart_nonce,
                run_id=0,
                failure_message=None,
                failure_domain=None,
                worker_id=None,
                worker_address=None,
                node_id=None,
                started_at=None,
                finished_at=None,
                updated_at=pipeline.created_at,
            ),
            created_at=pipeline.created_at,
        )
        async with self._transaction(write=True) as tx:
            await tx.execute(
                f"INSERT INTO pipelines ({_PIPELINE_COLUMNS}) VALUES ({_placeholders(7)})",
                pipeline.id,
                pipeline.name,
                pipeline.query,
                pipeline.udfs,
                self._seal(pipeline.program_json),
                pipeline.graph_json,
                pipeline.created_at,
            )
            values = [job.id, job.pipeline_id, job.created_at]
            values += _config_values(job.config) + _status_values(job.status)
            await tx.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({_placeholders(len(values))})",
                *values,
            )
        return job

    async def get_pipeline(self, pipeline_id: PipelineId) -> Pipeline | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {_PIPELINE_COLUMNS} FROM pipelines WHERE id = $1", pipeline_id
            )
        return self._pipeline(rows[0]) if rows else None

    async def list_pipelines(
        self, limit: int, starting_after: PipelineId | None = None
    ) -> list[Pipeline]:
        """Newest first (by created_at, then id); raises NotFound when ``starting_after`` names
        no pipeline, since the page it would start cannot be placed."""
        _check_limit(limit)
        order = "ORDER BY created_at DESC, id DESC LIMIT $1"
        async with self._transaction(write=False) as tx:
            if starting_after is None:
                rows = await tx.fetch(f"SELECT {_PIPELINE_COLUMNS} FROM pipelines {order}", limit)
            else:
                cursor = await tx.fetch(
                    "SELECT created_at FROM pipelines WHERE id = $1", starting_after
                )
                if not cursor:
                    raise NotFound(f"pipeline {starting_after} does not exist")
                rows = await tx.fetch(
                    f"SELECT {_PIPELINE_COLUMNS} FROM pipelines "
                    "WHERE created_at < $2 OR (created_at = $2 AND id < $3) "
                    f"{order}",
                    limit,
                    cursor[0]["created_at"],
                    starting_after,
                )
        return [self._pipeline(r) for r in rows]

    async def delete_pipeline(self, pipeline_id: PipelineId) -> None:
        async with self._transaction(write=True) as tx:
            # The job, its checkpoints and errors go with it: ON DELETE CASCADE.
            deleted = await tx.execute("DELETE FROM pipelines WHERE id = $1", pipeline_id)
        if not deleted:
            raise NotFound(f"pipeline {pipeline_id} does not exist")

    async def update_job_config(
        self,
        job_id: JobId,
        *,
        stop: StopMode | None = None,
        parallelism: int | None = None,
        checkpoint_interval_micros: int | None = None,
        restart: bool = False,
        restart_force: bool = False,
        ignore_state: bool | None = None,
    ) -> Job:
        """``restart_force`` is written only with ``restart``; ``restart`` with a ``stop``
        other than none is a contradiction and raises ValueError."""
        if restart and stop not in (None, StopMode.NONE):
            raise ValueError(f"a restart cannot also stop the job ({stop})")
        changes: dict[str, object] = {}
        if stop is not None:
            changes["stop"] = stop.value
        if parallelism is not None:
            changes["parallelism"] = parallelism
        if checkpoint_interval_micros is not None:
            changes["checkpoint_interval_micros"] = checkpoint_interval_micros
        if ignore_state is not None:
            changes["ignore_state"] = ignore_state
        if restart:
            changes["stop"] = StopMode.NONE.value
            changes["restart_force"] = restart_force
        assignments = [f"{column} = ${i}" for i, column in enumerate(changes, start=2)]
        if restart:
            # Incremented in the database, so two concurrent requests make two bumps.
            assignments.append("restart_nonce = restart_nonce + 1")
        async with self._transaction(write=True) as tx:
            if assignments:
                updated = await tx.execute(
                    f"UPDATE jobs SET {', '.join(assignments)} WHERE id = $1",
                    job_id,
                    *changes.values(),
                )
                if not updated:
                    raise NotFound(f"job {job_id} does not exist")
            rows = await tx.fetch(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = $1", job_id)
        if not rows:
            raise NotFound(f"job {job_id} does not exist")
        return _job(rows[0])

    # jobs

    async def get_job(self, job_id: JobId) -> Job | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = $1", job_id)
        return _job(rows[0]) if rows else None

    async def list_jobs(self, pipeline_id: PipelineId | None = None) -> list[Job]:
        order = "ORDER BY created_at DESC, id DESC"
        async with self._transaction(write=False) as tx:
            if pipeline_id is None:
                rows = await tx.fetch(f"SELECT {_JOB_COLUMNS} FROM jobs {order}")
            else:
                rows = await tx.fetch(
                    f"SELECT {_JOB_COLUMNS} FROM jobs WHERE pipeline_id = $1 {order}", pipeline_id
                )
        return [_job(r) for r in rows]

    # the controller

    async def update_job_status(
        self, job_id: JobId, status: JobStatus, *, fence: Lease | None = None
    ) -> None:
        values: list[object] = [job_id, *_status_values(status)]
        assignments = ", ".join(f"{c} = ${i}" for i, c in enumerate(_STATUS_COLUMNS, start=2))
        sql = f"UPDATE jobs SET {assignments} WHERE id = $1"
        if fence is not None:
            n = len(values)
            sql += (
                f" AND EXISTS (SELECT 1 FROM leases WHERE name = ${n + 1} AND holder = ${n + 2}"
                f" AND term = ${n + 3} AND expires_at > {self.dialect.now_micros})"
            )
            values += [fence.name, fence.holder, fence.term]
        async with self._transaction(write=True) as tx:
            updated = await tx.execute(sql, *values)
            exists = "SELECT 1 AS found FROM jobs WHERE id = $1"
            if not updated and fence is not None and await tx.fetch(exists, job_id):
                raise LeaseLost(
                    f"job {job_id}'s status not written: the lease {fence.name} of "
                    f"{fence.holder} (term {fence.term}) is not held"
                )
        if not updated:
            raise NotFound(f"job {job_id} does not exist")

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Raises NotFound when the job does not exist."""
        columns = ", ".join(_CHECKPOINT_COLUMNS)
        key = ("job_id", "query", "epoch")
        replace = ", ".join(f"{c} = excluded.{c}" for c in _CHECKPOINT_COLUMNS if c not in key)
        async with self._transaction(write=True) as tx:
            await self._require_job(tx, checkpoint.job_id)
            await tx.execute(
                f"INSERT INTO checkpoints ({columns}) "
                f"VALUES ({_placeholders(len(_CHECKPOINT_COLUMNS))}) "
                f"ON CONFLICT (job_id, query, epoch) DO UPDATE SET {replace}",
                checkpoint.job_id,
                checkpoint.query,
                checkpoint.epoch,
                checkpoint.generation,
                checkpoint.watermark_micros,
                checkpoint.offsets_json,
                checkpoint.state_rows,
                checkpoint.state_bytes,
                checkpoint.rows_in,
                checkpoint.duration_micros,
                checkpoint.finished_at,
            )

    async def list_checkpoints(self, job_id: JobId, limit: int = 100) -> list[Checkpoint]:
        """Newest first: by finished_at, then epoch."""
        _check_limit(limit)
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {', '.join(_CHECKPOINT_COLUMNS)} FROM checkpoints WHERE job_id = $1 "
                "ORDER BY finished_at DESC, epoch DESC, query LIMIT $2",
                job_id,
                limit,
            )
        return [_checkpoint(r) for r in rows]

    async def add_job_error(
        self,
        job_id: JobId,
        *,
        generation: int,
        domain: str,
        retryable: bool,
        message: str,
        details: str = "",
    ) -> None:
        """Raises NotFound when the job does not exist."""
        async with self._transaction(write=True) as tx:
            await self._require_job(tx, job_id)
            await tx.execute(
                "INSERT INTO job_errors "
                "(job_id, generation, created_at, domain, retryable, message, details) "
                f"VALUES ({_placeholders(7)})",
                job_id,
                generation,
                _now_micros(),
                domain,
                retryable,
                message,
                details,
            )

    async def list_job_errors(self, job_id: JobId, limit: int = 100) -> list[JobError]:
        """Newest first: by id, which only grows."""
        _check_limit(limit)
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {_JOB_ERROR_COLUMNS} FROM job_errors WHERE job_id = $1 "
                "ORDER BY id DESC LIMIT $2",
                job_id,
                limit,
            )
        return [_job_error(r) for r in rows]

    # connection profiles

    async def create_connection_profile(self, profile: ConnectionProfile) -> None:
        async with self._transaction(write=True) as tx:
            # Checked first for a message that names the profile; two creators racing past the
            # check are stopped by the UNIQUE constraint, which the backends report as Conflict.
            if await tx.fetch(
                "SELECT 1 AS found FROM connection_profiles WHERE name = $1", profile.name
            ):
                raise Conflict(f"a connection profile named '{profile.name}' already exists")
            await tx.execute(
                f"INSERT INTO connection_profiles ({_PROFILE_COLUMNS}) VALUES ({_placeholders(5)})",
                profile.id,
                profile.name,
                profile.connector,
                self._seal(json.dumps(profile.config, sort_keys=True)),
                profile.created_at,
            )

    async def list_connection_profiles(self) -> list[ConnectionProfile]:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(f"SELECT {_PROFILE_COLUMNS} FROM connection_profiles")
        # Sorted here, not by ORDER BY: PostgreSQL's collation is the server's locale, and the
        # order should be the same on both engines.
        return sorted((self._profile(r) for r in rows), key=lambda p: p.name)

    async def get_connection_profile(
        self, profile_id: ConnectionProfileId
    ) -> ConnectionProfile | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {_PROFILE_COLUMNS} FROM connection_profiles WHERE id = $1", profile_id
            )
        return self._profile(rows[0]) if rows else None

    async def get_connection_profile_by_name(self, name: str) -> ConnectionProfile | None:
        async with self._transaction(write=False) as tx:
            rows = await tx.fetch(
                f"SELECT {_PROFILE_COLUMNS} FROM connection_profiles WHERE name = $1", name
            )
        return self._profile(rows[0]) if rows else None

    async def delete_connection_profile(self, profile_id: ConnectionProfileId) -> None:
        async with self._transaction(write=True) as tx:
            await self._refuse_profile_in_use(tx, profile_id)
            deleted = await tx.execute("DELETE FROM connection_profiles WHERE id = $1", profile_id)
        if not deleted:
            raise NotFound(f"connection profile {profile_id} does not exist")


# rows <-> dataclasses; the only place that knows the column names of the model's fields


def _config_values(config: JobConfig) -> list[object]:
    return [
        config.stop.value,
        config.parallelism,
        config.checkpoint_interval_micros,
        config.restart_nonce,
        config.restart_force,
        config.ignore_state,
    ]


def _status_values(status: JobStatus) -> list[object]:
    return [
        status.state.value,
        status.generation,
        status.restarts,
        status.restart_nonce,
        status.run_id,
        status.failure_message,
        status.failure_domain,
        status.worker_id,
        status.worker_address,
        status.node_id,
        status.started_at,
        status.finished_at,
        status.updated_at,
    ]


def _pipeline(row: Row) -> Pipeline:
    return Pipeline(
        id=PipelineId(row["id"]),
        name=row["name"],
        query=row["query"],
        udfs=row["udfs"],
        program_json=row["program_json"],
        graph_json=row["graph_json"],
        created_at=row["created_at"],
    )


def _job(row: Row) -> Job:
    return Job(
        id=JobId(row["id"]),
        pipeline_id=PipelineId(row["pipeline_id"]),
        config=JobConfig(
            stop=StopMode(row["stop"]),
            parallelism=row["parallelism"],
            checkpoint_interval_micros=row["checkpoint_interval_micros"],
            restart_nonce=row["restart_nonce"],
            # bool(): SQLite hands BOOLEAN columns back as 0/1.
            restart_force=bool(row["restart_force"]),
            ignore_state=bool(row["ignore_state"]),
        ),
        status=JobStatus(
            state=JobState(row["state"]),
            generation=row["generation"],
            restarts=row["restarts"],
            restart_nonce=row["status_restart_nonce"],
            run_id=row["run_id"],
            failure_message=row["failure_message"],
            failure_domain=row["failure_domain"],
            worker_id=row["worker_id"],
            worker_address=row["worker_address"],
            node_id=row["node_id"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            updated_at=row["updated_at"],
        ),
        created_at=row["created_at"],
    )


def _checkpoint(row: Row) -> Checkpoint:
    return Checkpoint(
        job_id=JobId(row["job_id"]),
        query=row["query"],
        epoch=row["epoch"],
        generation=row["generation"],
        watermark_micros=row["watermark_micros"],
        offsets_json=row["offsets_json"],
        state_rows=row["state_rows"],
        state_bytes=row["state_bytes"],
        rows_in=row["rows_in"],
        duration_micros=row["duration_micros"],
        finished_at=row["finished_at"],
    )


def _job_error(row: Row) -> JobError:
    return JobError(
        id=row["id"],
        job_id=JobId(row["job_id"]),
        generation=row["generation"],
        created_at=row["created_at"],
        domain=row["domain"],
        retryable=bool(row["retryable"]),
        message=row["message"],
        details=row["details"],
    )


def _connection_profile(row: Row) -> ConnectionProfile:
    return ConnectionProfile(
        id=ConnectionProfileId(row["id"]),
        name=row["name"],
        connector=row["connector"],
        config=json.loads(row["config_json"]),
        created_at=row["created_at"],
    )
