"""What each REST endpoint does: the api's logic over the store, the compiler and the controller.

The api writes pipelines, what the user wants of their jobs (``JobConfig``) and connection
profiles; it never writes a job's status, which is the controller's. After every change to a
job it nudges the controller (``JobsChanged``) so the change is acted on now rather than at the
controller's next poll of the database; the nudge is best effort, because the poll picks the
change up anyway, and a controller that is down must not fail a request whose change is already
stored.

Routes and their statuses are in ``arroyo.api.routes``; the request and response bodies in
``arroyo.api.models``. Handler docstrings become the operations' descriptions in the OpenAPI
document, so they are written for the API's users.

Connection profiles hold secrets (the options their connector's ``connection_model`` marks
secret). They are stored as given and sent to the compiler with every compile, but no response
carries them (they read ``REDACTED``) and no log line carries a profile's config.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import structlog
from aiohttp import web
from pydantic import BaseModel, ValidationError

from arroyo.api import models as m
from arroyo.api.connection_table_handlers import ConnectionTableHandlers
from arroyo.api.connection_tables import statement
from arroyo.api.errors import (
    BadRequestError,
    InvalidQueryError,
    ResourceNotFoundError,
    ServiceUnavailableError,
    StateConflictError,
    from_rpc,
)
from arroyo.api.ids import new_id, now_micros
from arroyo.api.metrics_handlers import CONTROLLER_TIMEOUT_S, MetricsHandlers
from arroyo.api.readiness import Readiness
from arroyo.api.routing import EVENT_STREAM, Call, describe
from arroyo.api.udf_handlers import UdfHandlers
from arroyo.connectors import CONNECTORS, AnyConnector, ConnectorError, connector
from arroyo.connectors.base import ConnectorOptions, secret_fields
from arroyo.errors import ArroyoError
from arroyo.rpc import CompilerClient, ControllerClient, RpcError
from arroyo.store.errors import NotFound
from arroyo.store.model import (
    Checkpoint,
    ConnectionProfile,
    ConnectionProfileId,
    Job,
    JobConfig,
    JobError,
    JobId,
    JobState,
    Pipeline,
    PipelineId,
    StopMode,
    Store,
)
from arroyo.udfs import with_saved
from arroyo_rpc.v1 import common_pb2, compiler_pb2, controller_pb2

log = structlog.get_logger(__name__)

# Compiling plans the query with Spark's analyser: ~0.2 s warm, a few seconds on a cold JVM.
COMPILE_TIMEOUT_S = 30.0
# How long a compiling request waits for a compiler that does not answer (still starting).
COMPILER_WAIT_S = 60.0
# Short: the nudge is best effort, and a request should not wait long on it.
JOBS_CHANGED_TIMEOUT_S = 2.0
# Seconds without an output event after which the event stream gets a comment line.
KEEPALIVE_S = 15.0


class Api(ConnectionTableHandlers, UdfHandlers, MetricsHandlers):
    """The handlers of every route, over one store and one client per service.

    Made by ``arroyo.api.app.create_app`` on the event loop that serves it; holds no state of
    its own between requests, so any number of api processes can serve one database.
    """

    def __init__(
        self,
        store: Store,
        compiler: CompilerClient,
        controller: ControllerClient,
        *,
        openapi: Mapping[str, Any],
        compiler_wait_s: float = COMPILER_WAIT_S,
    ) -> None:
        self._store = store
        self._compiler = compiler
        self._controller = controller
        self._openapi = openapi
        self._compiler_wait_s = compiler_wait_s
        self._readiness = Readiness(compiler, controller)
        # Set when the server shuts down: long-lived streams end, so the drain is not held up
        # by them (an EventSource reconnects, to another replica or to this one restarted).
        self.draining = asyncio.Event()
        self._connectors = m.ConnectorList(data=[_connector_out(c) for c in CONNECTORS])

    # meta

    async def ping(self, call: Call[None]) -> m.Pong:
        """Answers as long as the api process serves requests; checks no other service."""
        return m.Pong()

    async def cluster_status(self, call: Call[None]) -> m.ClusterStatus:
        """Readiness: whether a pipeline can be created and scheduled now (``ready``), and the
        state of each service the api needs: the controller, the compiler, and the nodes with
        their task slots. Always a 200, whatever is down; each service not ready says why in
        ``detail``. Requests that compile wait for a compiler that is still starting, so
        waiting here first is optional."""
        return await self._readiness.status()

    async def openapi(self, call: Call[None]) -> web.Response:
        """This API's OpenAPI 3.1 document."""
        return web.json_response(self._openapi)

    # pipelines

    async def validate_query(self, call: Call[m.ValidateQueryRequest]) -> m.ValidateQueryResponse:
        """Compile a query (and its UDFs) without storing anything. A query with errors is a
        successful validation: the answer is 200 with the errors listed, each with its line
        and column."""
        response = await self._compile(call.input.query, call.input.udfs, parallelism=1)
        return m.ValidateQueryResponse(
            graph=_graph(response),
            tables=[_table(t) for t in response.tables],
            errors=[_diagnostic(d) for d in response.diagnostics],
            warnings=list(response.warnings),
            functions=list(response.functions),
        )

    async def create_pipeline(self, call: Call[m.CreatePipelineRequest]) -> m.PipelineOut:
        """Compile the query and, when it compiles, store the pipeline and its job, which the
        controller then starts. A query that does not compile is a 400 with its diagnostics,
        and nothing is stored."""
        body = call.input
        return await self._create(
            PipelineId(new_id("pl")),
            body.name,
            body.query,
            body.udfs,
            parallelism=body.parallelism,
            checkpoint_interval_micros=body.checkpoint_interval_micros,
        )

    async def preview_pipeline(self, call: Call[m.PreviewPipelineRequest]) -> m.PipelineOut:
        """Create a preview: a pipeline (parallelism 1, named ``preview-<id>``, ``preview``
        true) whose output is read from its job's ``output`` event stream."""
        pipeline_id = PipelineId(new_id("pl"))
        return await self._create(
            pipeline_id,
            f"{m.PREVIEW_PREFIX}{pipeline_id}",
            call.input.query,
            call.input.udfs,
            parallelism=1,
            checkpoint_interval_micros=m.DEFAULT_CHECKPOINT_INTERVAL_MICROS,
        )

    async def list_pipelines(self, call: Call[m.ListPipelinesQuery]) -> m.PipelinePage:
        """Newest first, ``limit`` at a time; pass the last id of a page as ``starting_after``
        for the next one. ``has_more`` says whether there is one."""
        query = call.input
        cursor = PipelineId(query.starting_after) if query.starting_after else None
        try:
            pipelines = await self._store.list_pipelines(query.limit + 1, cursor)
        except NotFound as err:
            raise BadRequestError(
                f"query.starting_after: pipeline {query.starting_after} does not exist"
            ) from err
        data = []
        # One look-up per pipeline: a page is small, and the store has no join for it.
        for pipeline in pipelines[: query.limit]:
            job = await self._job_of(pipeline.id)
            # None: deleted since the page was read.
            if job is not None:
                data.append(_pipeline_out(pipeline, job))
        return m.PipelinePage(data=data, has_more=len(pipelines) > query.limit)

    async def get_pipeline(self, call: Call[None]) -> m.PipelineOut:
        """The pipeline and a summary of its job: its state, failure and the action a user can
        take on it now."""
        pipeline, job = await self._pipeline(call.path("pipeline_id"))
        return _pipeline_out(pipeline, job)

    async def update_pipeline(self, call: Call[m.UpdatePipelineRequest]) -> m.PipelineOut:
        """Change what the job should do. ``stop``: a mode stops the job that way, ``none``
        runs a stopped one again (a finished or failed job needs a restart instead).
        ``parallelism``: a running job restarts with it. ``checkpoint_interval_micros``: from
        the next run. Absent (or null) fields stay as they are."""
        pipeline, job = await self._pipeline(call.path("pipeline_id"))
        body = call.input
        if (
            body.stop is None
            and body.parallelism is None
            and body.checkpoint_interval_micros is None
        ):
            return _pipeline_out(pipeline, job)
        job = await self._store.update_job_config(
            job.id,
            stop=body.stop,
            parallelism=body.parallelism,
            checkpoint_interval_micros=body.checkpoint_interval_micros,
        )
        log.info(
            "job_config_updated",
            pipeline_id=pipeline.id,
            job_id=job.id,
            stop=None if body.stop is None else str(body.stop),
            parallelism=body.parallelism,
            checkpoint_interval_micros=body.checkpoint_interval_micros,
        )
        await self._nudge_controller()
        return _pipeline_out(pipeline, job)

    async def delete_pipeline(self, call: Call[None]) -> None:
        """Delete a pipeline with its job, checkpoints and errors. Only a stopped, finished or
        failed one: stop a live pipeline first (PATCH it with a ``stop`` mode), else 409."""
        pipeline, job = await self._pipeline(call.path("pipeline_id"))
        state = job.status.state
        if not state.terminal:
            raise StateConflictError(
                f"pipeline {pipeline.id} is {state}; stop it first "
                f'(PATCH {{"stop": "checkpoint"}}) and delete it once it is Stopped'
            )
        if _starting(job):
            raise StateConflictError(
                f"pipeline {pipeline.id} is starting; stop it first "
                f'(PATCH {{"stop": "immediate"}}) and delete it once it is Stopped'
            )
        await self._store.delete_pipeline(pipeline.id)
        log.info("pipeline_deleted", pipeline_id=pipeline.id, job_id=job.id)
        await self._nudge_controller()

    async def restart_pipeline(self, call: Call[m.RestartPipelineRequest]) -> m.PipelineOut:
        """Restart the job: a running one stops with a checkpoint (or is killed with
        ``force``) and starts again; a stopped, finished or failed one starts. ``ignore_state``
        starts from nothing rather than the last checkpoint."""
        pipeline, job = await self._pipeline(call.path("pipeline_id"))
        job = await self._store.update_job_config(
            job.id,
            restart=True,
            restart_force=call.input.force,
            ignore_state=call.input.ignore_state,
        )
        log.info(
            "job_restart_requested",
            pipeline_id=pipeline.id,
            job_id=job.id,
            force=call.input.force,
            ignore_state=call.input.ignore_state,
        )
        await self._nudge_controller()
        return _pipeline_out(pipeline, job)

    # jobs

    async def list_pipeline_jobs(self, call: Call[None]) -> m.JobList:
        """The pipeline's jobs (today, always one)."""
        pipeline, _ = await self._pipeline(call.path("pipeline_id"))
        return m.JobList(data=[_job_out(j) for j in await self._store.list_jobs(pipeline.id)])

    async def list_jobs(self, call: Call[None]) -> m.JobList:
        """Every job of every pipeline, newest first."""
        return m.JobList(data=[_job_out(j) for j in await self._store.list_jobs()])

    async def list_checkpoints(self, call: Call[m.ListQuery]) -> m.CheckpointList:
        """The job's committed micro-batches (one per query and epoch), newest first."""
        job = await self._job(call)
        checkpoints = await self._store.list_checkpoints(job.id, call.input.limit)
        return m.CheckpointList(data=[_checkpoint_out(c) for c in checkpoints])

    async def list_job_errors(self, call: Call[m.ListQuery]) -> m.JobErrorList:
        """Errors the job's runs reported, fatal or not, newest first."""
        job = await self._job(call)
        errors = await self._store.list_job_errors(job.id, call.input.limit)
        return m.JobErrorList(data=[_job_error_out(e) for e in errors])

    async def stream_output(self, call: Call[None]) -> web.StreamResponse:
        """The rows the job's sinks produce, as server-sent events: one ``data: <row as a JSON
        object>`` event per row; then ``event: done`` when the job has no more output, or
        ``event: error`` (``data: {"error": ...}``) when the controller's stream broke. A 503
        before any event when the controller cannot be reached."""
        job = await self._job(call)
        await self._check_controller(job.id)
        response = web.StreamResponse(
            headers={
                "Content-Type": EVENT_STREAM,
                "Cache-Control": "no-cache",
                # Tell a buffering reverse proxy (nginx) to pass events on as they come.
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(call.request)
        stream = self._controller.subscribe_to_output(
            controller_pb2.SubscribeToOutputRequest(job_id=job.id)
        )
        events = _with_keepalive(_output_events(stream, job.id), self.draining)
        try:
            async for event in events:
                await response.write(event)
            await response.write_eof()
        except ConnectionResetError:
            log.info("output_client_gone", job_id=job.id)
        finally:
            await events.aclose()
            # Closing the controller's stream cancels its call, so it stops sending.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return response

    # connectors and connection profiles

    async def list_connectors(self, call: Call[None]) -> m.ConnectorList:
        """Every connector: its roles, formats and metadata keys, the JSON schema of a table's
        options (``options_schema``) and of a connection profile's ``config``
        (``connection_schema``, null for a connector that takes no profiles). Options marked
        ``"secret": true`` are never returned by the API."""
        return self._connectors

    async def test_connection(self, call: Call[m.ConnectionTestRequest]) -> m.ConnectionTestResult:
        """Check a profile's settings against the system they point at (listing a Kafka
        cluster's topics, say), without saving them; it may take ten seconds or so. Settings
        the connector refuses are a 400; a system that cannot be reached, or refuses the
        credentials, is a 200 with ``ok`` false and the reason in ``message``."""
        conn, options = _connection(call.input.connector, call.input.config)
        try:
            # Blocking, for as long as the client's own timeout: off the event loop.
            message = await asyncio.to_thread(conn.test_connection, options)
        except ConnectorError as err:
            log.info("connection_test_failed", connector=conn.name, code=err.code)
            return m.ConnectionTestResult(ok=False, message=err.message)
        except Exception as err:
            # The client library refused a setting it alone knows (a misspelt key in
            # client_configs, say): the user's to fix. Only the type is logged: a client's
            # message may quote the settings it was given.
            log.warning(
                "connection_test_raised", connector=conn.name, error_type=type(err).__name__
            )
            return m.ConnectionTestResult(ok=False, message=f"{type(err).__name__}: {err}")
        return m.ConnectionTestResult(ok=True, message=message)

    async def create_connection_profile(
        self, call: Call[m.CreateConnectionProfileRequest]
    ) -> m.ConnectionProfileOut:
        """Save connection settings (a Kafka cluster's address and credentials) under a name
        that tables use with ``connection_profile = 'name'`` in their WITH clause. ``config``
        is checked against the connector's ``connection_schema`` (a 400 names the option); a
        name already taken is a 409. Secret options are stored as given and never returned.
        Pipelines compiled from then on can name it."""
        body = call.input
        _connection(body.connector, body.config)
        profile = ConnectionProfile(
            id=ConnectionProfileId(new_id("cp")),
            name=body.name,
            connector=body.connector,
            config=dict(body.config),
            created_at=now_micros(),
        )
        await self._store.create_connection_profile(profile)
        log.info(
            "connection_profile_created",
            profile_id=profile.id,
            name=profile.name,
            connector=profile.connector,
        )
        return _profile_out(profile)

    async def list_connection_profiles(self, call: Call[None]) -> m.ConnectionProfileList:
        """Every connection profile, by name, with secret options redacted."""
        profiles = await self._store.list_connection_profiles()
        return m.ConnectionProfileList(data=[_profile_out(p) for p in profiles])

    async def get_connection_profile(self, call: Call[None]) -> m.ConnectionProfileOut:
        """The profile, with secret options redacted."""
        profile_id = call.path("profile_id")
        profile = await self._store.get_connection_profile(ConnectionProfileId(profile_id))
        if profile is None:
            raise ResourceNotFoundError.connection_profile(profile_id)
        return _profile_out(profile)

    async def delete_connection_profile(self, call: Call[None]) -> None:
        """Delete a profile. Pipelines already created with it keep the settings they were
        compiled with; queries naming it no longer compile."""
        profile_id = ConnectionProfileId(call.path("profile_id"))
        try:
            await self._store.delete_connection_profile(profile_id)
        except NotFound as err:
            raise ResourceNotFoundError.connection_profile(profile_id) from err
        log.info("connection_profile_deleted", profile_id=profile_id)

    # helpers

    async def _compiler_ready(self) -> None:
        # A compiler that is starting (Spark takes a while) is waited for rather than refused,
        # so a request sent the moment the cluster starts succeeds.
        if not await self._compiler.connected(self._compiler_wait_s):
            raise ServiceUnavailableError(
                f"the compiler is unavailable: it did not answer within "
                f"{self._compiler_wait_s:g} s (it may still be starting; GET /api/v1/status "
                "shows each service's state)"
            )

    async def _compile(
        self, query: str, udfs: str, *, parallelism: int
    ) -> compiler_pb2.CompileResponse:
        await self._compiler_ready()
        # Every profile and saved table, not only those the query names: finding those would
        # mean parsing the SQL here, and there are few.
        saved_profiles = await self._store.list_connection_profiles()
        profiles = [
            compiler_pb2.ConnectionProfile(name=p.name, connector=p.connector, config=p.config)
            for p in saved_profiles
        ]
        names = {p.id: p.name for p in saved_profiles}
        tables = [
            compiler_pb2.ConnectionTable(
                name=t.name, ddl=statement(t, names.get(t.profile_id) if t.profile_id else None)
            )
            for t in await self._store.list_connection_tables()
        ]
        request = compiler_pb2.CompileRequest(
            query=query,
            # The saved UDFs the query calls, after the pipeline's own (which win a name they
            # share).
            udfs=with_saved(
                udfs, {u.name: u.definition for u in await self._store.list_udfs()}, query
            ),
            parallelism=parallelism,
            connection_profiles=profiles,
            connection_tables=tables,
        )
        try:
            # wait_for_ready: a compiler restarting between the check and this call is waited
            # for, within the compile's deadline.
            return await self._compiler.compile(
                request, timeout_s=COMPILE_TIMEOUT_S, wait_for_ready=True
            )
        except RpcError as err:
            raise from_rpc("compiler", err) from err

    async def _create(
        self,
        pipeline_id: PipelineId,
        name: str,
        query: str,
        udfs: str,
        *,
        parallelism: int,
        checkpoint_interval_micros: int,
    ) -> m.PipelineOut:
        compiled = await self._compile(query, udfs, parallelism=parallelism)
        if compiled.diagnostics:
            diagnostics = [_diagnostic(d) for d in compiled.diagnostics]
            more = len(diagnostics) - 1
            raise InvalidQueryError(
                f"the query does not compile: {_render(diagnostics[0])}"
                + (f" (and {more} more)" if more else ""),
                diagnostics,
            )
        pipeline = Pipeline(
            id=pipeline_id,
            name=name,
            query=query,
            udfs=udfs,
            program_json=compiled.program_json,
            graph_json=_graph(compiled).model_dump_json(),
            created_at=now_micros(),
        )
        config = JobConfig(
            stop=StopMode.NONE,
            parallelism=parallelism,
            checkpoint_interval_micros=checkpoint_interval_micros,
            restart_nonce=0,
            restart_force=False,
            ignore_state=False,
        )
        job = await self._store.create_pipeline(pipeline, JobId(new_id("job")), config)
        log.info("pipeline_created", pipeline_id=pipeline.id, job_id=job.id, name=name)
        await self._nudge_controller()
        return _pipeline_out(pipeline, job)

    async def _pipeline(self, pipeline_id: str) -> tuple[Pipeline, Job]:
        pipeline = await self._store.get_pipeline(PipelineId(pipeline_id))
        job = None if pipeline is None else await self._job_of(pipeline.id)
        if pipeline is None or job is None:
            raise ResourceNotFoundError.pipeline(pipeline_id)
        return pipeline, job

    async def _job_of(self, pipeline_id: PipelineId) -> Job | None:
        jobs = await self._store.list_jobs(pipeline_id)
        return jobs[0] if jobs else None

    async def _job(self, call: Call[Any]) -> Job:
        """The job of a ``/pipelines/{pipeline_id}/jobs/{job_id}/...`` path; 404 unless it
        exists and belongs to that pipeline."""
        pipeline_id, job_id = call.path("pipeline_id"), call.path("job_id")
        job = await self._store.get_job(JobId(job_id))
        if job is None or job.pipeline_id != pipeline_id:
            raise ResourceNotFoundError.job(pipeline_id, job_id)
        return job

    async def _nudge_controller(self) -> None:
        try:
            await self._controller.jobs_changed(
                controller_pb2.JobsChangedRequest(), timeout_s=JOBS_CHANGED_TIMEOUT_S
            )
        except RpcError as err:
            # The controller polls the database too; it will see the change without the nudge.
            log.warning("controller_nudge_failed", code=err.code, error=err.message)

    async def _check_controller(self, job_id: JobId) -> None:
        """503 now, while a status can still be sent, when the controller is unreachable;
        once an event stream has started its status is fixed at 200."""
        request = controller_pb2.GetJobStatusRequest(job_id=job_id)
        try:
            await self._controller.get_job_status(request, timeout_s=CONTROLLER_TIMEOUT_S)
        except RpcError as err:
            # Not knowing the job (yet) is the stream's to report, not a reason to refuse.
            if err.retryable:
                raise from_rpc("controller", err) from err


async def _output_events(
    stream: AsyncIterator[controller_pb2.SubscribeToOutputResponse], job_id: JobId
) -> AsyncGenerator[bytes, None]:
    try:
        async for message in stream:
            for row in message.rows:
                yield _event(row)
            if message.done:
                yield _event("{}", name="done")
                return
    except RpcError as err:
        log.warning("output_stream_failed", job_id=job_id, code=err.code, error=err.message)
        yield _event(
            json.dumps({"error": f"the controller's output stream failed: {err}"}), "error"
        )


async def _with_keepalive(
    events: AsyncGenerator[bytes, None], stop: asyncio.Event
) -> AsyncGenerator[bytes, None]:
    """``events``, with an SSE comment whenever none came for KEEPALIVE_S: it keeps proxies from
    closing an idle stream, and writing it is how a client that went away is noticed. Ends
    when ``stop`` is set."""
    pending = asyncio.ensure_future(anext(events))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        while True:
            done, _ = await asyncio.wait(
                {pending, stopping}, timeout=KEEPALIVE_S, return_when=asyncio.FIRST_COMPLETED
            )
            if stopping in done:
                return
            if not done:
                yield b": keepalive\n\n"
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            yield event
            pending = asyncio.ensure_future(anext(events))
    finally:
        # Cancelling a read in flight cancels the controller's call beneath it; waiting for it
        # lets the caller close that call's iterator, which must not be running then.
        stopping.cancel()
        pending.cancel()
        await asyncio.wait({pending})
        await events.aclose()


def _event(data: str, name: str | None = None) -> bytes:
    # A line break inside the data would end the field: each line goes in a data field of its
    # own, which the client joins back with line breaks.
    lines = [f"event: {name}"] if name else []
    lines += [f"data: {line}" for line in data.splitlines() or [""]]
    return ("\n".join(lines) + "\n\n").encode()


def _starting(job: Job) -> bool:
    """The controller has yet to act on a start the user asked for."""
    restart_pending = job.config.restart_nonce != job.status.restart_nonce
    resume_pending = job.status.state == JobState.STOPPED and job.config.stop == StopMode.NONE
    return restart_pending or resume_pending


def _connection(name: str, config: Mapping[str, str]) -> tuple[AnyConnector, ConnectorOptions]:
    """The connector named ``name`` and ``config`` validated as its connection settings; a
    BadRequestError naming the field or option when either is refused."""
    conn = connector(name)
    with_profiles = ", ".join(c.name for c in CONNECTORS if c.connection_model is not None)
    if conn is None:
        raise BadRequestError(
            f"body.connector: unknown connector '{name}' (those with connection profiles: "
            f"{with_profiles})"
        )
    if conn.connection_model is None:
        raise BadRequestError(
            f"body.connector: connector '{name}' takes no connection profiles (those that "
            f"do: {with_profiles})"
        )
    try:
        options = conn.connection_model.model_validate(config)
    except ValidationError as err:
        raise BadRequestError(describe(err, "body.config")) from err
    return conn, options


def _secret_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys under which a config may hold a secret: a secret field's alias
    (``auth.password``) and its Python name (``auth_password``), which options accept too."""
    aliases = secret_fields(model)
    names = {n for n, info in model.model_fields.items() if (info.alias or n) in aliases}
    return aliases | names


def _redacted(connector_name: str, config: Mapping[str, str]) -> dict[str, str]:
    conn = connector(connector_name)
    if conn is None or conn.connection_model is None:
        # A connector gone from this build (or no longer taking profiles): which options are
        # secret is unknown, so none is shown.
        return dict.fromkeys(config, m.REDACTED)
    secret = _secret_keys(conn.connection_model)
    return {k: m.REDACTED if k in secret else v for k, v in config.items()}


# records and messages -> response models


def _connector_out(c: AnyConnector) -> m.ConnectorOut:
    return m.ConnectorOut(
        name=c.name,
        description=c.description,
        roles=sorted(c.roles),
        formats=sorted(c.formats),
        default_format=c.default_format,
        metadata_keys={key: list(types) for key, types in c.metadata_keys.items()},
        options_schema=c.options_model.model_json_schema(by_alias=True),
        connection_schema=(
            None
            if c.connection_model is None
            else c.connection_model.model_json_schema(by_alias=True)
        ),
    )


def _profile_out(p: ConnectionProfile) -> m.ConnectionProfileOut:
    return m.ConnectionProfileOut(
        id=p.id,
        name=p.name,
        connector=p.connector,
        config=_redacted(p.connector, p.config),
        created_at=p.created_at,
    )


def _diagnostic(d: common_pb2.Diagnostic) -> m.Diagnostic:
    return m.Diagnostic(
        code=d.code, message=d.message, line=d.line or None, column=d.column or None
    )


def _render(d: m.Diagnostic) -> str:
    where = f"{d.line}:{d.column}: " if d.line else ""
    return f"{where}{d.message}"


def _graph(response: compiler_pb2.CompileResponse) -> m.Graph:
    return m.Graph(
        nodes=[m.GraphNode(id=n.id, kind=n.kind, label=n.label) for n in response.nodes],
        edges=[m.GraphEdge(source=e.source, target=e.target) for e in response.edges],
    )


def _table(t: compiler_pb2.TableSchema) -> m.TableSchema:
    return m.TableSchema(
        name=t.name,
        role=t.role,
        connector=t.connector,
        columns=[m.Column(name=c.name, type=c.type, nullable=c.nullable) for c in t.columns],
    )


def _pipeline_out(pipeline: Pipeline, job: Job) -> m.PipelineOut:
    terminal = job.status.state.terminal
    return m.PipelineOut(
        id=pipeline.id,
        name=pipeline.name,
        query=pipeline.query,
        udfs=pipeline.udfs,
        preview=pipeline.name.startswith(m.PREVIEW_PREFIX),
        parallelism=job.config.parallelism,
        checkpoint_interval_micros=job.config.checkpoint_interval_micros,
        stop=job.config.stop,
        created_at=pipeline.created_at,
        graph=m.Graph.model_validate_json(pipeline.graph_json),
        job_id=job.id,
        state=job.status.state,
        failure_message=job.status.failure_message,
        action="start" if terminal else "stop",
        action_in_progress=_starting(job) if terminal else job.config.stop != StopMode.NONE,
    )


def _job_out(job: Job) -> m.JobOut:
    s = job.status
    return m.JobOut(
        id=job.id,
        pipeline_id=job.pipeline_id,
        state=s.state,
        stop=job.config.stop,
        parallelism=job.config.parallelism,
        checkpoint_interval_micros=job.config.checkpoint_interval_micros,
        generation=s.generation,
        restarts=s.restarts,
        run_id=s.run_id,
        failure_message=s.failure_message,
        failure_domain=s.failure_domain,
        worker_id=s.worker_id,
        node_id=s.node_id,
        created_at=job.created_at,
        started_at=s.started_at,
        finished_at=s.finished_at,
    )


def _checkpoint_out(c: Checkpoint) -> m.CheckpointOut:
    try:
        offsets = json.loads(c.offsets_json) if c.offsets_json else {}
    except json.JSONDecodeError as err:
        raise ArroyoError(f"checkpoint {c.job_id}/{c.query}/{c.epoch}: bad offsets") from err
    return m.CheckpointOut(
        job_id=c.job_id,
        query=c.query,
        epoch=c.epoch,
        generation=c.generation,
        watermark_micros=c.watermark_micros,
        offsets=offsets,
        state_rows=c.state_rows,
        state_bytes=c.state_bytes,
        rows_in=c.rows_in,
        duration_micros=c.duration_micros,
        finished_at=c.finished_at,
    )


def _job_error_out(e: JobError) -> m.JobErrorOut:
    return m.JobErrorOut(
        id=e.id,
        job_id=e.job_id,
        generation=e.generation,
        created_at=e.created_at,
        domain=e.domain,
        retryable=e.retryable,
        message=e.message,
        details=e.details,
    )
