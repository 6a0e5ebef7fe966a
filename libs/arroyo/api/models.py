"""Every JSON body the REST API reads or writes, as pydantic models.

These models are the single source of truth for the wire format: request bodies and query
strings are validated with them (unknown fields are refused), responses are serialised from
them, and the OpenAPI document (``arroyo.api.openapi``) is generated from their JSON schemas.
Times are microseconds since the Unix epoch, UTC, as in the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from arroyo.store.model import JobState, StopMode

MAX_PARALLELISM = 64
# One day: longer trigger intervals are almost certainly a unit mistake (seconds for micros).
MAX_CHECKPOINT_INTERVAL_MICROS = 86_400_000_000
# 0: the next micro-batch starts as soon as the last one commits. A micro-batch commit *is* a
# checkpoint on Spark, so a longer interval would add that much latency to every row; Arroyo's
# 10 s default (checkpoints apart from emitting) does not carry over.
DEFAULT_CHECKPOINT_INTERVAL_MICROS = 0
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
# Previews are ordinary pipelines whose name carries this prefix; user pipelines may not use it.
PREVIEW_PREFIX = "preview-"
# What a secret option's value reads as in every response.
REDACTED = "********"


class _Request(BaseModel):
    """A request body or query string: unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Response(BaseModel):
    model_config = ConfigDict(frozen=True)


# requests


class ValidateQueryRequest(_Request):
    query: str = Field(description="Arroyo-dialect SQL: CREATE TABLE statements and queries")
    udfs: str = Field(default="", description="a Python UDF file; empty for none")


class CreateUdfRequest(_Request):
    prefix: str = Field(default="", max_length=255, description="a path to group UDFs under")
    language: Literal["python"] = Field(default="python", description="only Python UDFs")
    definition: str = Field(
        min_length=1, description="a Python UDF file (see arroyo_udf) that defines one UDF"
    )
    description: str = Field(default="", max_length=10_000)


class ValidateUdfRequest(_Request):
    definition: str = Field(description="a Python UDF file (see arroyo_udf)")
    language: Literal["python"] = "python"


class CreatePipelineRequest(_Request):
    name: str = Field(min_length=1, max_length=255)
    query: str = Field(min_length=1)
    udfs: str = Field(default="", description="a Python UDF file; empty for none")
    parallelism: int = Field(default=1, ge=1, le=MAX_PARALLELISM)
    checkpoint_interval_micros: int = Field(
        default=DEFAULT_CHECKPOINT_INTERVAL_MICROS,
        ge=0,
        le=MAX_CHECKPOINT_INTERVAL_MICROS,
        description="micro-batch trigger interval (each committed batch is a checkpoint); "
        "0 starts the next batch as soon as the last one commits",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not name.strip():
            raise PydanticCustomError("blank_name", "must not be blank")
        if name.startswith(PREVIEW_PREFIX):
            raise PydanticCustomError(
                "reserved_name", "names starting with 'preview-' are reserved for previews"
            )
        return name


class PreviewPipelineRequest(_Request):
    query: str = Field(min_length=1)
    udfs: str = Field(default="", description="a Python UDF file; empty for none")


class UpdatePipelineRequest(_Request):
    """Absent fields are left as they are."""

    stop: StopMode | None = Field(
        default=None, description="none runs the job; the others stop it in that way"
    )
    parallelism: int | None = Field(default=None, ge=1, le=MAX_PARALLELISM)
    checkpoint_interval_micros: int | None = Field(
        default=None, ge=0, le=MAX_CHECKPOINT_INTERVAL_MICROS
    )


class RestartPipelineRequest(_Request):
    force: bool = Field(
        default=False, description="kill the running worker instead of stopping at a checkpoint"
    )
    ignore_state: bool = Field(
        default=False, description="start from nothing rather than the last checkpoint"
    )


class ListPipelinesQuery(_Request):
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    starting_after: str | None = Field(
        default=None, description="the last pipeline id of the previous page"
    )


class ListQuery(_Request):
    limit: int = Field(default=100, ge=1, le=MAX_PAGE_SIZE)


class CreateConnectionProfileRequest(_Request):
    name: str = Field(
        min_length=1,
        max_length=255,
        description="unique; tables name it with connection_profile = 'name'",
    )
    connector: str = Field(description="a connector that takes profiles (GET /connectors)")
    config: dict[str, str] = Field(
        default_factory=dict,
        description="options as the SQL names them, checked against the connector's "
        "connection_schema",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not name.strip():
            raise PydanticCustomError("blank_name", "must not be blank")
        return name


class ConnectionTestRequest(_Request):
    connector: str
    config: dict[str, str] = Field(default_factory=dict)


class SchemaField(_Request):
    """A column of a saved table, as Arroyo's ``SourceField``: its ``type`` is one of
    Arroyo's field types (``int32``, ``int64``, ``uint32``, ``uint64``, ``f32``, ``f64``,
    ``bool``, ``string``, ``bytes``, ``timestamp`` with a ``unit``, ``json``, ``struct`` with
    ``fields``, ``list`` with ``items``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1)
    type: str
    required: bool = False
    unit: str | None = Field(default=None, description="a timestamp's: second ... nanosecond")
    fields: list[SchemaField] | None = Field(default=None, description="a struct's")
    items: SchemaField | None = Field(default=None, description="a list's")
    metadata_key: str | None = Field(
        default=None, alias="metadataKey", description="METADATA FROM this key"
    )
    sql_name: str | None = Field(
        default=None, alias="sqlName", description="ignored: the type's SQL name, as returned"
    )


class SchemaDefinition(_Request):
    """The schema a table's fields are read from: ``json_schema``, ``avro_schema`` or
    ``protobuf_schema`` (Arroyo's camelCase names are taken too)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    type: str
    schema_: str = Field(alias="schema", description="the schema's text")
    dependencies: dict[str, str] = Field(default_factory=dict)


class ConnectionSchemaIn(_Request):
    """A saved table's schema, as Arroyo's ``ConnectionSchema``: ``format`` a name, or
    Arroyo's ``{"json": {options}}``; ``bad_data`` ``fail`` or ``drop`` (or ``{"drop": {}}``);
    ``framing`` ``newline`` (or ``{"method": {"newline": {"maxLineLength": n}}}``); the
    columns as ``fields``, or a ``definition`` they are read from."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    format: str | dict[str, dict[str, Any] | None] | None = None
    bad_data: str | dict[str, Any] | None = Field(default=None, alias="badData")
    framing: str | dict[str, Any] | None = None
    fields: list[SchemaField] = Field(default_factory=list)
    definition: SchemaDefinition | None = None
    inferred: bool | None = None
    primary_keys: list[str] = Field(default_factory=list, alias="primaryKeys")


class CreateConnectionTableRequest(_Request):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="unique; queries read or write the table by this name",
    )
    connector: str = Field(description="a connector (GET /connectors)")
    connection_profile_id: str | None = Field(
        default=None,
        alias="connectionProfileId",
        description="a saved profile of the connector whose settings the table takes",
    )
    config: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="the table's options as the SQL names them (type = source or sink)",
    )
    schema_: ConnectionSchemaIn | None = Field(default=None, alias="schema")


class ListConnectionTablesQuery(_Request):
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    starting_after: str | None = Field(
        default=None, description="the last connection table id of the previous page"
    )


# responses


class Diagnostic(_Response):
    code: str = Field(description="stable, for matching; the message is for people")
    message: str
    line: int | None = Field(description="1-based; null when the problem has no position")
    column: int | None = Field(description="1-based; null when the problem has no position")


class ErrorBody(_Response):
    """Every error response: 4xx and 5xx alike."""

    error: str = Field(description="what went wrong and where (the field, the id)")
    diagnostics: list[Diagnostic] | None = Field(
        default=None, description="the query's problems, when it did not compile"
    )

    def to_json(self) -> bytes:
        """The body as sent: ``diagnostics`` left out when there are none, but a diagnostic's
        null ``line`` and ``column`` kept (its schema requires them)."""
        omit = {"diagnostics"} if self.diagnostics is None else None
        return self.model_dump_json(exclude=omit).encode()


class Pong(_Response):
    pong: Literal[True] = True


ServiceState = Literal["ready", "starting", "unavailable", "unknown"]
_STATE_DESCRIPTION = (
    "ready; starting: not yet seen ready by this api (still starting, or never came up); "
    "unavailable: was ready, no longer answers; unknown: cannot be told (the nodes, while the "
    "controller does not answer)"
)


class ServiceStatus(_Response):
    state: ServiceState = Field(description=_STATE_DESCRIPTION)
    detail: str | None = Field(
        default=None, description="why it is not ready, or what else to know; null if nothing"
    )


class NodesStatus(ServiceStatus):
    """The nodes the controller knows: ready once one has registered. A node without free
    slots does not make the cluster unready: a new job waits in Scheduling for a slot."""

    count: int = Field(description="nodes registered and heartbeating")
    task_slots: int = Field(description="task slots of all nodes")
    free_slots: int = Field(description="task slots no job holds")


class ClusterServices(_Response):
    controller: ServiceStatus
    compiler: ServiceStatus
    nodes: NodesStatus


class ClusterStatus(_Response):
    ready: bool = Field(
        description="every service is ready: a pipeline can be created and scheduled now"
    )
    services: ClusterServices


class GraphNode(_Response):
    id: str
    kind: str = Field(description="source | view | sink")
    label: str


class GraphEdge(_Response):
    source: str
    target: str


class Graph(_Response):
    nodes: list[GraphNode]
    edges: list[GraphEdge]


class Column(_Response):
    name: str
    type: str = Field(description="the Spark SQL type")
    nullable: bool


class TableSchema(_Response):
    name: str
    role: str = Field(description="source | sink | lookup")
    connector: str
    columns: list[Column]


class ValidateQueryResponse(_Response):
    graph: Graph
    tables: list[TableSchema]
    errors: list[Diagnostic] = Field(description="empty when the query is valid")
    warnings: list[str]
    functions: list[str] = Field(
        description="the functions a query may call (Spark's, Arroyo's, the windows, the "
        "UDFs), sorted: for completion in an editor; there whether the query is valid or not"
    )


class JobOut(_Response):
    id: str
    pipeline_id: str
    state: JobState
    stop: StopMode = Field(description="what the user asked: none keeps the job running")
    parallelism: int
    checkpoint_interval_micros: int
    generation: int = Field(description="incremented at every (re)scheduling")
    restarts: int = Field(description="consecutive failed runs since the last healthy one")
    run_id: int = Field(description="which state directory the checkpoints live in")
    failure_message: str | None
    failure_domain: str | None
    worker_id: str | None
    node_id: str | None
    created_at: int
    started_at: int | None
    finished_at: int | None


class PipelineOut(_Response):
    id: str
    name: str
    query: str
    udfs: str
    preview: bool = Field(description="made by POST /pipelines/preview")
    parallelism: int
    checkpoint_interval_micros: int
    stop: StopMode
    created_at: int
    graph: Graph
    job_id: str
    state: JobState = Field(description="the state of the pipeline's job")
    failure_message: str | None
    action: Literal["stop", "start"] = Field(
        description="what a user can ask of the job now: stop a live one, start a stopped one"
    )
    action_in_progress: bool = Field(
        description="a stop or a start was asked for and the controller has not finished it"
    )


class PipelinePage(_Response):
    data: list[PipelineOut]
    has_more: bool


class JobList(_Response):
    data: list[JobOut]


class CheckpointOut(_Response):
    job_id: str
    query: str = Field(description="the streaming query (one per sink)")
    epoch: int = Field(description="the committed micro-batch id")
    generation: int
    watermark_micros: int | None
    offsets: dict[str, Any] = Field(description="source name -> Spark's offset for it")
    state_rows: int = Field(description="rows in keyed state; -1: not counted (RocksDB)")
    state_bytes: int
    rows_in: int
    duration_micros: int
    finished_at: int


class CheckpointList(_Response):
    data: list[CheckpointOut]


class JobErrorOut(_Response):
    id: int
    job_id: str
    generation: int
    created_at: int
    domain: str = Field(description="user | internal | external")
    retryable: bool
    message: str
    details: str


class JobErrorList(_Response):
    data: list[JobErrorOut]


class OperatorMetrics(_Response):
    query: str
    rows_in: int
    rows_out: int
    rows_in_per_second: float
    rows_processed_per_second: float
    batch_duration_micros: int = Field(description="the last batch's duration: backpressure")
    state_rows: int = Field(description="rows in keyed state; -1: not counted (RocksDB)")
    state_bytes: int
    dropped_bad_records: int
    dropped_overflow_messages: int = Field(
        0, description="messages a source discarded past its buffer's bound"
    )
    watermark_micros: int | None


class MetricsSample(_Response):
    time_micros: int
    operators: list[OperatorMetrics]


class JobMetrics(_Response):
    job_id: str
    samples: list[MetricsSample] = Field(description="oldest first; empty when not running")


class Metric(_Response):
    time: int = Field(description="the bucket's start, in microseconds since the epoch")
    value: float


class SubtaskMetrics(_Response):
    index: int = Field(description="always 0: a Spark query runs as one task here")
    metrics: list[Metric] = Field(description="oldest first")


class MetricGroup(_Response):
    name: str = Field(
        description="messages_recv, messages_sent (rows per second), backpressure (0 to 1), "
        "state_rows, state_bytes, state_rows_updated, late_rows_dropped, "
        "deserialization_errors (per bucket)"
    )
    subtasks: list[SubtaskMetrics]


class OperatorMetricGroup(_Response):
    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    operator_id: str = Field(
        alias="operatorId",
        description="a node of the pipeline's graph: a source table, 'sink:<table>', or "
        "'<sink node>/<stateful operator><n>'",
    )
    label: str
    metric_groups: list[MetricGroup] = Field(alias="metricGroups")


class OperatorMetricGroupList(_Response):
    data: list[OperatorMetricGroup]


class ConnectionProfileOut(_Response):
    id: str
    name: str
    connector: str
    config: dict[str, str] = Field(
        description=f"the options it holds; secret ones read {REDACTED!r}"
    )
    created_at: int


class ConnectionProfileList(_Response):
    data: list[ConnectionProfileOut] = Field(description="by name")


class ConnectionTestResult(_Response):
    ok: bool = Field(
        description="false when the system could not be reached or refused the settings"
    )
    message: str = Field(description="what was found, or what failed")


class ConnectorOut(_Response):
    name: str
    description: str
    roles: list[str] = Field(description="any of source, sink, lookup")
    formats: list[str] = Field(description="the formats it reads and writes; empty for none")
    default_format: str | None
    metadata_keys: dict[str, list[str]] = Field(
        description="METADATA FROM 'key' columns a source fills -> the SQL types each may have"
    )
    options_schema: dict[str, Any] = Field(description="JSON schema of a table's options")
    connection_schema: dict[str, Any] | None = Field(
        description="JSON schema of a connection profile's config; null when the connector "
        "takes no profiles. Options marked secret are never returned."
    )


class ConnectorList(_Response):
    data: list[ConnectorOut]


class ConnectionSchemaOut(_Response):
    format: str | None
    format_options: dict[str, str] = Field(description="the format's options, unprefixed")
    bad_data: str | None
    framing: str | None
    framing_max_line_length: int | None
    fields: list[dict[str, Any]] = Field(
        description="Arroyo's SourceFields, each with its sql_name; from the definition "
        "where one was given"
    )
    definition: dict[str, Any] | None
    inferred: bool = Field(description="a sink without fields: it takes the query's columns")
    primary_keys: list[str]


class ConnectionTableOut(_Response):
    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    id: str
    name: str
    connector: str
    table_type: str = Field(description="source | sink")
    connection_profile: ConnectionProfileOut | None
    config: dict[str, str] = Field(description=f"its options; secret ones read {REDACTED!r}")
    schema_: ConnectionSchemaOut = Field(alias="schema")
    created_at: int


class ConnectionTablePage(_Response):
    data: list[ConnectionTableOut] = Field(description="newest first")
    has_more: bool


class ConnectionAutocomplete(_Response):
    values: dict[str, list[str]] = Field(
        description="what the profile's system lists, by the option it fills: topic, "
        "stream, subject..."
    )


class UdfOut(_Response):
    id: str
    name: str = Field(description="the UDF's, as queries call it")
    prefix: str
    language: str
    definition: str
    description: str
    created_at: int
    updated_at: int


class UdfList(_Response):
    data: list[UdfOut] = Field(description="oldest first")


class UdfValidation(_Response):
    udf_name: str | None = Field(description="the UDF the file defines; null when invalid")
    errors: list[str] = Field(description="empty when the file is valid")
    diagnostics: list[Diagnostic] = Field(description="the errors, each with its line")
