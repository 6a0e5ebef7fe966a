"""What the control plane keeps in its database, and the one interface over it.

The api writes pipelines and what the user wants of their jobs (``JobConfig``: stop mode,
parallelism, checkpoint interval, restart requests); the controller writes what actually happens
(``JobStatus``: state, generation, failures) and the checkpoints and errors it hears of. Neither
writes the other's columns, so they never race on a row. The api also keeps the connection
profiles that tables name and hands them to the compiler at every compile. Times are
microseconds since the Unix epoch, UTC.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NewType, Protocol

PipelineId = NewType("PipelineId", str)
JobId = NewType("JobId", str)
ConnectionProfileId = NewType("ConnectionProfileId", str)
ConnectionTableId = NewType("ConnectionTableId", str)
UdfId = NewType("UdfId", str)
ApiKeyId = NewType("ApiKeyId", str)


class StopMode(enum.StrEnum):
    """What the user asked of a job: keep running (``none``) or stop in one of four ways."""

    NONE = "none"
    CHECKPOINT = "checkpoint"  # stop after a final checkpoint
    GRACEFUL = "graceful"  # stop after the in-flight batch commits
    IMMEDIATE = "immediate"  # stop the queries now
    FORCE = "force"  # kill the worker process


class JobState(enum.StrEnum):
    """The controller's states for a job, as Arroyo names them."""

    CREATED = "Created"
    COMPILING = "Compiling"
    SCHEDULING = "Scheduling"
    RUNNING = "Running"
    CHECKPOINT_STOPPING = "CheckpointStopping"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    RESTARTING = "Restarting"
    RECOVERING = "Recovering"
    FINISHING = "Finishing"
    FINISHED = "Finished"
    FAILING = "Failing"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        """No worker runs and none will until the user asks again."""
        return self in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)


@dataclass(frozen=True, slots=True)
class Pipeline:
    id: PipelineId
    name: str
    query: str
    udfs: str  # a Python UDF file, "" for none
    program_json: str  # arroyo.program.spec.PipelineProgram
    graph_json: str  # the dataflow graph for the UI: {"nodes": [...], "edges": [...]}
    created_at: int


@dataclass(frozen=True, slots=True)
class JobConfig:
    """The job as the user wants it; written by the api."""

    stop: StopMode
    parallelism: int
    checkpoint_interval_micros: int
    # Bumped by every restart request; the controller acts when it differs from the status's.
    restart_nonce: int
    restart_force: bool
    # Start the next run from nothing rather than the last checkpoint.
    ignore_state: bool


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The job as it is; written by the controller."""

    state: JobState
    # Incremented at every (re)scheduling; worker messages carry it.
    generation: int
    # Consecutive failed runs since the last healthy one (bounded by the restart policy).
    restarts: int
    # The restart_nonce the controller last acted on.
    restart_nonce: int
    # Which state directory the job's checkpoints live in; bumped by ignore_state.
    run_id: int
    failure_message: str | None
    failure_domain: str | None
    worker_id: str | None
    worker_address: str | None
    node_id: str | None
    started_at: int | None
    finished_at: int | None
    updated_at: int


@dataclass(frozen=True, slots=True)
class Job:
    id: JobId
    pipeline_id: PipelineId
    config: JobConfig
    status: JobStatus
    created_at: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One committed micro-batch (``epoch``) of one of the job's queries."""

    job_id: JobId
    query: str
    epoch: int
    generation: int
    watermark_micros: int | None
    offsets_json: str  # {"source": offset, ...}
    state_rows: int
    state_bytes: int
    rows_in: int
    duration_micros: int
    finished_at: int


@dataclass(frozen=True, slots=True)
class JobError:
    id: int
    job_id: JobId
    generation: int
    created_at: int
    domain: str  # user | internal | external
    retryable: bool
    message: str
    details: str


@dataclass(frozen=True, slots=True)
class ConnectionProfile:
    """Saved connection settings that a table names with ``connection_profile = 'name'`` (the
    planner's ``arroyo.connectors.base.ConnectionProfile`` is this without id and time).

    ``config`` holds the options as the user gave them, secrets included: whoever shows or logs
    a profile redacts the fields its connector's ``connection_model`` marks secret.
    """

    id: ConnectionProfileId
    name: str  # unique
    connector: str
    config: dict[str, str]
    created_at: int


@dataclass(frozen=True, slots=True)
class ConnectionTable:
    """A saved table (Arroyo's connection table) that queries read or write by ``name`` with no
    CREATE TABLE: a connector, its options (``config``, as the SQL names them, secrets
    included), the profile whose settings they add to, and ``schema``, the api's expanded
    connection schema (its fields, format, bad data and framing) as JSON."""

    id: ConnectionTableId
    name: str  # unique
    connector: str
    table_type: str  # source | sink
    profile_id: ConnectionProfileId | None
    config: dict[str, str]
    schema: dict[str, Any]
    created_at: int


@dataclass(frozen=True, slots=True)
class SavedUdf:
    """A Python UDF saved for every pipeline (Arroyo's global UDF): ``definition`` is a UDF
    file defining exactly one UDF, ``name``, checked by the compiler when it was saved."""

    id: UdfId
    name: str  # unique
    prefix: str
    language: str  # python
    definition: str
    description: str
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class ApiKey:
    """A key to the REST API (``arroyo keys create``). Only the SHA-256 of its secret is kept:
    the secret is 32 random bytes, so a digest cannot be reversed by guessing, and a slow,
    salted hash (made for passwords people choose) would add nothing but time to each
    request."""

    id: ApiKeyId
    name: str
    secret_sha256: str  # hex
    created_at: int
    revoked_at: int | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """Who holds ``name`` (the controller's: ``"controller"``) and until when, by the
    database's clock (``arroyo.store.leases``)."""

    name: str
    holder: str
    # Plus one at every change of holder: which tenure this is.
    term: int
    acquired_at: int
    renewed_at: int
    expires_at: int


class Store(Protocol):
    """The control plane's database. One implementation per engine (SQLite, PostgreSQL), one
    schema and one list of migrations for both.

    Every method is a coroutine and a transaction of its own; callers hold no connection. Methods
    that look a row up return ``None`` when it does not exist; methods that change one raise
    ``arroyo.store.NotFound`` when it does not.
    """

    async def migrate(self) -> int:
        """Bring the schema up to date; returns the schema version. Safe to run concurrently
        from several processes and again on an up-to-date database."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise when the database does not answer a query (a service's readiness)."""
        ...

    # pipelines and their job (the api)
    async def create_pipeline(self, pipeline: Pipeline, job_id: JobId, config: JobConfig) -> Job:
        """The pipeline and its one job (state Created), in one transaction."""
        ...

    async def get_pipeline(self, pipeline_id: PipelineId) -> Pipeline | None: ...

    async def list_pipelines(
        self, limit: int, starting_after: PipelineId | None = None
    ) -> list[Pipeline]:
        """Newest first; ``starting_after`` is the last id of the previous page."""
        ...

    async def delete_pipeline(self, pipeline_id: PipelineId) -> None:
        """With its job, checkpoints and errors."""
        ...

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
        """Change what the user wants; ``restart`` bumps restart_nonce (and sets stop=none)."""
        ...

    # jobs (both)
    async def get_job(self, job_id: JobId) -> Job | None: ...

    async def list_jobs(self, pipeline_id: PipelineId | None = None) -> list[Job]:
        """Newest first; every job, or the jobs of one pipeline."""
        ...

    # the controller
    async def update_job_status(
        self, job_id: JobId, status: JobStatus, *, fence: Lease | None = None
    ) -> None:
        """Replace the job's status (the controller owns it). With ``fence``, only while that
        lease is held as it says (name, holder, term) and has not ended by the database's
        clock; else ``LeaseLost``, and nothing changed: a controller that lost its lease
        cannot write over the statuses of the one that took it."""
        ...

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Idempotent on (job_id, query, epoch): a repeated report replaces the row."""
        ...

    async def list_checkpoints(self, job_id: JobId, limit: int = 100) -> list[Checkpoint]:
        """Newest first."""
        ...

    async def add_job_error(
        self,
        job_id: JobId,
        *,
        generation: int,
        domain: str,
        retryable: bool,
        message: str,
        details: str = "",
    ) -> None: ...

    async def list_job_errors(self, job_id: JobId, limit: int = 100) -> list[JobError]:
        """Newest first."""
        ...

    # connection profiles (the api)
    async def create_connection_profile(self, profile: ConnectionProfile) -> None:
        """Raises ``arroyo.store.Conflict`` when a profile of that name (or id) exists."""
        ...

    async def list_connection_profiles(self) -> list[ConnectionProfile]:
        """Every profile, by name."""
        ...

    async def get_connection_profile(
        self, profile_id: ConnectionProfileId
    ) -> ConnectionProfile | None: ...

    async def get_connection_profile_by_name(self, name: str) -> ConnectionProfile | None: ...

    async def delete_connection_profile(self, profile_id: ConnectionProfileId) -> None:
        """Pipelines compiled with it keep the settings they were compiled with. Raises
        ``arroyo.store.Conflict`` naming the connection tables that use it."""
        ...

    # connection tables (the api)
    async def create_connection_table(self, table: ConnectionTable) -> None:
        """Raises ``arroyo.store.Conflict`` when a table of that name (or id) exists, and
        ``arroyo.store.NotFound`` when its profile does not."""
        ...

    async def list_connection_tables(
        self, limit: int | None = None, starting_after: ConnectionTableId | None = None
    ) -> list[ConnectionTable]:
        """Newest first; ``limit`` None: every one. ``starting_after`` is the last id of the
        previous page (NotFound when it names no table)."""
        ...

    async def get_connection_table(self, table_id: ConnectionTableId) -> ConnectionTable | None: ...

    async def delete_connection_table(self, table_id: ConnectionTableId) -> None:
        """Pipelines compiled with it keep the table as it was when they were compiled."""
        ...

    async def create_udf(self, udf: SavedUdf) -> None:
        """Conflict when a UDF of that name is saved."""
        ...

    async def list_udfs(self) -> list[SavedUdf]:
        """Oldest first: the order their definitions are added to a pipeline's UDFs."""
        ...

    async def delete_udf(self, udf_id: UdfId) -> None:
        """Pipelines compiled with it keep it as it was when they were compiled."""
        ...

    # API keys (the CLI writes them, the api reads them)
    async def create_api_key(self, key: ApiKey) -> None:
        """Conflict when a key of that name (not revoked) exists."""
        ...

    async def put_bootstrap_api_key(self, key: ApiKey) -> None:
        """Store ``key`` as it is, replacing any of its id (a bootstrap key set in config)."""
        ...

    async def list_api_keys(self) -> list[ApiKey]:
        """Oldest first, revoked ones included."""
        ...

    async def revoke_api_key(self, key_id: ApiKeyId) -> ApiKey:
        """NotFound when no key has that id; revoking a revoked key changes nothing."""
        ...

    # leases (the controller: one active at a time)
    async def acquire_lease(self, name: str, holder: str, ttl_micros: int) -> Lease | None:
        """Take the lease ``name`` for ``holder`` when no one holds it or its holder's time
        ran out, or renew it when ``holder`` holds it; either way it then runs until
        ``ttl_micros`` after the database's now. None (and nothing changed) while another
        holder's lease runs."""
        ...

    async def release_lease(self, name: str, holder: str) -> bool:
        """End ``holder``'s lease now, so another may take it at once; False when ``holder``
        does not hold it."""
        ...

    async def get_lease(self, name: str) -> Lease | None:
        """The lease as it stands, ended or not; None when it was never taken."""
        ...
