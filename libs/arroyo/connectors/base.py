"""The connector interface.

A connector is one package (``arroyo.connectors.<name>``) whose ``Connector`` subclass is listed
in ``arroyo.connectors.CONNECTORS``. Its typed options model is the single source of validation
(unknown options are errors), of the API's JSON schema, and of the docs; its ``Capabilities``
say, once and explicitly, what the planner, the engine and the API may ask of it.

A package is ``__init__.py`` (the ``Connector`` subclass: metadata, capabilities and the hooks
below), ``options.py`` (its options model, when it has options), and ``source.py`` and
``sink.py`` for the sides it has. ``__init__`` and ``options`` import no Spark, so the planner
and the light services (api, controller) can list and validate connectors without a JVM; the
hooks import ``source`` and ``sink`` when a query is built. Pieces connectors share at run
time (the driver's batch writers, the Python data sources Spark's workers import) are in
``arroyo.connectors.runtime``. Connectors may import ``arroyo.program``, ``arroyo.formats``,
``arroyo.errors``, ``arroyo.config`` and the SQL language helpers (``arroyo.sql.time``,
``arroyo.sql.types``), never the engine or the planner.
"""

from __future__ import annotations

import weakref
from abc import ABC
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol

from pydantic import BaseModel, ConfigDict
from pydantic.config import JsonDict
from typing_extensions import TypeVar

from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.formats import FormatOptions, JsonOptions
from arroyo.program.spec import ColumnSpec, Role, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class ConnectorError(ArroyoError):
    code = "connector_error"
    domain = ErrorDomain.USER


class ConnectorOptions(BaseModel):
    """Base of every connector's options; option names are Arroyo's, unknown ones are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class NoOptions(ConnectorOptions):
    """The options of a connector that takes none (and the connection of one without profiles)."""


# A bare ``Connector`` is one of any options, as the planner handles them.
OptionsT = TypeVar("OptionsT", bound=ConnectorOptions, default=ConnectorOptions)
ConnectionT = TypeVar("ConnectionT", bound=ConnectorOptions, default=NoOptions)


# How an option is marked secret: ``Field(..., json_schema_extra=SECRET)``.
SECRET: JsonDict = {"secret": True}


def secret_fields(model: type[BaseModel]) -> frozenset[str]:
    """Names (aliases where set) of the options a model marks secret: never returned by the API
    nor logged. A field is marked with ``Field(json_schema_extra={"secret": True})``."""
    names = set()
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("secret"):
            names.add(info.alias or name)
    return frozenset(names)


# What a reader of a sink's system sees of the rows, however often a micro-batch is replayed:
# each once, each at least once, or nothing (a sink that discards them).
Delivery = Literal["exactly_once", "at_least_once", "none"]
# Whether a source's input ends: never, always, or as each table's options say (``bounded``).
Bounded = Literal["never", "always", "per_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What a connector can do, declared by it rather than inferred from its other attributes.

    - ``source``, ``sink``, ``lookup``: the roles its tables may take (``lookup``: read whole as
      a static table, ``Connector.read_static``, or with ``lookup_by_key``, looked up by key
      for each micro-batch's rows, ``Connector.lookup``).
    - ``bounded``: whether its source's input ends (``per_table``: ``Connector.bounded`` says).
    - ``replayable``: its source gives the same rows again for a checkpoint's offsets, so a
      replayed micro-batch reads what the first attempt read, and loses nothing sent while
      the pipeline is down (exactly once with a sink that is). A source that cannot replay
      says so here and in its docstring; one whose options choose (``Connector.replayable``
      gives a table's) declares the strongest and says in its docstring which cannot.
    - ``delivery``: the strongest guarantee of its sink (``Connector.delivery`` gives a table's,
      where options choose); None for a connector without a sink.
    - ``needs_format``: rows cross it as records of the table's format: its source gives a
      ``value`` payload to decode, its sink writes encoded records, and updating results reach
      it as change records. False: the table's columns themselves (generators; a sink that
      takes Spark's rows as they are, updating ones too).
    - ``writes_lines``: its sink implements ``Connector.line_writer``, through which updating
      results and per-batch queries (window functions) are written.
    - ``source_time``: every row its source gives carries ``_source_time``. Otherwise a row
      without one takes the processing time, which Spark treats as non-deterministic: it keeps
      filters above it, out of reach of the optimizer's simplifications (a 10x slower nexmark
      query, measured).
    - ``state_per_query``: its source keeps state of its own for each query that reads the
      table (``ReadContext.query`` names the query): the runner builds its tables anew for
      each query.
    """

    source: bool = False
    sink: bool = False
    lookup: bool = False
    lookup_by_key: bool = False
    bounded: Bounded = "never"
    replayable: bool = False
    delivery: Delivery | None = None
    needs_format: bool = False
    writes_lines: bool = False
    source_time: bool = False
    state_per_query: bool = False

    def __post_init__(self) -> None:
        if self.sink != (self.delivery is not None):
            raise ValueError("a sink states its delivery guarantee, and only a sink has one")
        if not self.source and (self.bounded != "never" or self.replayable):
            raise ValueError("bounded and replayable are properties of a source")
        if self.lookup and not (self.source or self.lookup_by_key):
            raise ValueError("a lookup table read whole is read as a source is")
        if self.lookup_by_key and not self.lookup:
            raise ValueError("lookup_by_key is a property of a lookup table")
        if self.writes_lines and not self.sink:
            raise ValueError("writes_lines is a property of a sink")

    @property
    def roles(self) -> frozenset[Role]:
        roles: list[Role] = []
        if self.source:
            roles.append("source")
        if self.sink:
            roles.append("sink")
        if self.lookup:
            roles.append("lookup")
        return frozenset(roles)


@dataclass(frozen=True, slots=True)
class ConnectionProfile:
    """Saved connection settings (a Kafka cluster's address and credentials, say) that tables
    name with ``connection_profile = 'name'`` instead of repeating them. ``config`` holds
    options as the SQL names them; the connector's ``connection_model`` validates it."""

    name: str
    connector: str
    config: dict[str, str]


@dataclass(frozen=True, slots=True)
class ReadContext:
    """What a source needs from the running pipeline.

    ``state_dir`` is this table's own directory inside the pipeline's state: a source keeps there
    whatever must survive restarts besides Spark's offsets (e.g. the time it first started).
    ``max_records_per_batch`` caps each micro-batch (None: no cap), which tests use to stop a run
    part-way through its input. ``planning``: the query is only being planned, not run; the
    source must not contact its system (a schema registry, a broker) then. ``query``: the index
    of the query the table is read for, stable across restarts (see
    ``Capabilities.state_per_query``).
    """

    spark: SparkSession
    state_dir: Path
    parallelism: int
    max_records_per_batch: int | None = None
    planning: bool = False
    query: int = 0


@dataclass(frozen=True, slots=True)
class WriteContext:
    """What a sink needs from the running pipeline: ``state_dir`` is this query's sink's own
    directory inside the pipeline's state, ``pipeline_dir`` the pipeline's whole state."""

    spark: SparkSession
    state_dir: Path
    pipeline_dir: Path


# Streams a sink starts into a catalog's table (``DataStreamWriter.toTable``) rather than a path:
# the table's catalog then plans the write (its partition transforms, its distribution).
_into_tables: weakref.WeakKeyDictionary[DataStreamWriter, str] = weakref.WeakKeyDictionary()


def into_table(writer: DataStreamWriter, table: str) -> DataStreamWriter:
    """Mark ``writer`` to be started into the catalog table ``table``."""
    _into_tables[writer] = table
    return writer


def table_of(writer: DataStreamWriter) -> str | None:
    """The catalog table ``writer`` is to be started into, if ``into_table`` marked it."""
    return _into_tables.get(writer)


def table_state_dir(pipeline_dir: Path, table: str) -> Path:
    """A table's own directory inside the pipeline's state (``ReadContext.state_dir``)."""
    return pipeline_dir / "tables" / table


class KeyLookup(Protocol):
    """Records of a key-value lookup table, fetched a batch of keys at a time."""

    def __call__(self, keys: list[str]) -> list[str | bytes | None]: ...


class LineWriter(Protocol):
    """Writes one micro-batch's encoded records; a batch id written before is not written
    again (``committed``), so a replayed batch never duplicates output."""

    def committed(self, batch_id: int) -> bool: ...

    def write(self, batch_id: int, lines: Iterable[bytes]) -> None: ...


class Connector(ABC, Generic[OptionsT, ConnectionT]):
    """One kind of external system, generic over its table options (``OptionsT``) and, for a
    connector that takes connection profiles, their settings (``ConnectionT``).

    Options are validated once, when a table is planned (``parse_options``); the program keeps
    them as planning dumped them, and the engine turns each table's back into the model once
    per run (``table_options``). Every hook below gets the typed options.

    Sources: ``read`` is called once on the driver when a query is built (at planning time too,
    so it must not contact the external system) and returns a streaming DataFrame with:

    - either the table's physical columns (``needs_format`` false) or a ``value`` column
      holding the raw payload for the table's format to decode;
    - ``_source_time`` TIMESTAMP: the connector's own event time for the row (NULL: none; a
      connector that always sets it says so with ``Capabilities.source_time``);
    - ``_eoi`` BOOLEAN: true on the end-of-input marker rows of a bounded source, which come after
      every real row and let the watermark pass everything. The first may share a batch with
      the last real rows (the file sources' lines do). A marker must reach a batch after the
      one that first carried it (a second marker row, or rows that are filtered out), so that
      a batch with data runs under the final watermark. Unbounded sources never set it.

    Sinks: ``write`` is called once on the driver per streaming query with the rows to write (the
    table's columns only) and returns a configured, not yet started ``DataStreamWriter``. Every
    sink must make a replayed micro-batch (same batch id after a crash) produce no duplicates,
    or declare ``at_least_once`` delivery and say so in its docstring.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    options_model: type[OptionsT]
    # Options a connection profile holds (None: the connector takes no profiles). A table's
    # options model must accept every one of them, so a profile's settings merge into a table's.
    connection_model: type[ConnectionT] | None = None
    formats: ClassVar[frozenset[str]] = frozenset()
    default_format: ClassVar[str | None] = None
    # ``METADATA FROM 'key'`` columns the source can fill, with the SQL types each may have
    # (Spark's names); the connector gives them as ``_meta_<key>`` columns.
    metadata_keys: ClassVar[dict[str, tuple[str, ...]]] = {}
    # Columns (dotted paths into structs) equal to ``_source_time`` wherever they are set (the
    # nexmark events' ``bid.datetime``...). A join condition between such columns lets Spark
    # drop join state as the watermark passes (arroyo.sql.planner.plan.joins).
    event_time_fields: ClassVar[tuple[str, ...]] = ()
    # Used by the engine itself (stages): not listed, and no table may name it.
    internal: ClassVar[bool] = False

    @property
    def roles(self) -> frozenset[Role]:
        return self.capabilities.roles

    def parse_options(self, raw: Mapping[str, Any]) -> OptionsT:
        """Validate a table's options (as the SQL names them); pydantic's ValidationError names
        each option refused. Called when a table is planned."""
        return self.options_model.model_validate(raw)

    def table_options(self, table: TableSpec) -> OptionsT:
        """A planned table's options as the model again (the program holds them dumped). Called
        by the engine once per table when it builds a run, never by a connector."""
        return self.options_model.model_validate(table.options)

    def columns(self, options: OptionsT) -> list[ColumnSpec] | None:
        """Columns the connector itself defines (None: the table declares them)."""
        return None

    def bounded(self, options: OptionsT) -> bool:
        """Whether a source table with these options ends (``Capabilities.bounded``)."""
        return self.capabilities.bounded == "always"

    def replayable(self, options: OptionsT) -> bool:
        """Whether a source table with these options replays its input
        (``Capabilities.replayable``). Called by the planner, which warns where one that
        cannot feeds an exactly-once sink (arroyo.sql.planner.delivery)."""
        return self.capabilities.replayable

    def expected_rows(self, options: OptionsT, parallelism: int) -> int | None:
        """How many rows a source table with these options reads, where its options say so (a
        bounded generator's count); None where unknown or unbounded."""
        return None

    def misplaced_options(self, options: OptionsT, role: Role) -> list[str]:
        """Options set on a table of ``role`` that apply only to the connector's other role
        (a source's options on a sink table, say): the planner refuses them by name."""
        return []

    def misplaced_format_options(self, fmt: FormatOptions, role: Role) -> list[str]:
        """Format options (with their prefix) set on a table of ``role`` that this connector
        does not use: compressed JSON is for file sinks alone."""
        if isinstance(fmt, JsonOptions) and fmt.compression != "uncompressed":
            return ["json.compression"]
        return []

    def named_columns(self, options: OptionsT) -> list[tuple[str, str]]:
        """(option, column) for each column a sink table's options name (a file sink's
        partition fields): the planner refuses a column the sink does not have."""
        return []

    def column_errors(self, options: OptionsT, columns: list[ColumnSpec]) -> list[str]:
        """What is wrong with a sink table's columns for these options (a key column that is
        missing or of the wrong type), each a message the planner reports; empty if nothing."""
        return []

    def wants_event_time(self, options: OptionsT) -> bool:
        """Whether a sink table with these options reads each row's event time: its rows
        then come with the hidden ``_timestamp`` column (a file sink partitioned by time)."""
        return False

    def delivery(self, options: OptionsT) -> Delivery | None:
        """What a sink table with these options guarantees (``Capabilities.delivery``)."""
        return self.capabilities.delivery

    def test_connection(self, settings: ConnectionT) -> str:
        """Contact the external system with a connection profile's ``settings`` and say what
        was found; raise ``ConnectorError`` naming what failed. Called by the api, off its
        event loop, for ``POST /connection_profiles/test``."""
        raise ConnectorError(f"connector '{self.name}' has no connection to test")

    def autocomplete(self, settings: ConnectionT) -> dict[str, list[str]]:
        """What the system a connection profile's ``settings`` point at can list for a
        table's options, by option (``{"topic": [...]}``); empty where it cannot say. Called
        by the api, off its event loop, for ``GET /connection_profiles/{id}/autocomplete``;
        raises ``ConnectorError`` naming what failed."""
        return {}

    def sample(self, options: OptionsT, count: int, timeout_s: float) -> list[bytes] | None:
        """Up to ``count`` of the newest records a source table with these options would read,
        as their payloads, waiting at most about ``timeout_s``; None where the connector cannot
        sample its system. Called by the api, off its event loop, for ``POST
        /connection_tables/test``; raises ``ConnectorError`` naming what failed. Must not
        change what the system holds (no consumer group offsets committed)."""
        return None

    def read(self, ctx: ReadContext, table: TableSpec, options: OptionsT) -> DataFrame:
        raise ConnectorError(f"connector '{self.name}' cannot be read from")

    def read_static(self, ctx: ReadContext, table: TableSpec, options: OptionsT) -> DataFrame:
        """A lookup table's rows as a static (batch) DataFrame, in the shape ``read`` gives
        (a ``value`` column for a format to decode, or the physical columns; ``_eoi`` false,
        as a static table has no end-of-input marker). Spark evaluates
        it for each micro-batch of a stream joined with it; a connector says in its docs
        when changes to the table are seen. Needs ``Capabilities.lookup``."""
        raise ConnectorError(f"connector '{self.name}' cannot be a lookup table")

    def lookup(self, table: TableSpec, options: OptionsT) -> KeyLookup:
        """A lookup table's values by key (``Capabilities.lookup_by_key``): a picklable
        function the executors call with a batch of keys, which returns each key's record in
        the table's format (None: no such key). Called on the driver; must not connect."""
        raise ConnectorError(f"connector '{self.name}' cannot look rows up by key")

    def lookup_cache(self, options: OptionsT) -> tuple[int, float | None]:
        """A key-value lookup table's cache: its bytes (0: none) and each record's seconds
        (None: until evicted)."""
        return 0, None

    def write(
        self, ctx: WriteContext, df: DataFrame, table: TableSpec, options: OptionsT
    ) -> DataStreamWriter:
        raise ConnectorError(f"connector '{self.name}' cannot be written to")

    def line_writer(self, ctx: WriteContext, table: TableSpec, options: OptionsT) -> LineWriter:
        """Writes encoded records given per batch (updating and per-batch results). Needs
        ``Capabilities.writes_lines``."""
        raise ConnectorError(f"connector '{self.name}' cannot write updating results")

    def source_committed(
        self, state_dir: Path, table: TableSpec, options: OptionsT, offsets: dict[str, str]
    ) -> None:
        """Called on the driver after each committed micro-batch of a query reading ``table``,
        with each source's end offsets as Spark reports them (keyed by Spark's description of
        the source). A connector may tell its system how far the pipeline has read (Kafka
        commits them to the consumer group). Must not raise for a transient failure: the
        checkpoint, not this, is what the pipeline resumes from."""
        return

    def sink_finished(self, ctx: WriteContext, table: TableSpec, options: OptionsT) -> None:
        """Called on the driver once a bounded pipeline's query into this sink has written
        its last rows (its input ended and everything was flushed); on a resumed run that
        finds it finished, again."""
        return

    def release(self) -> None:
        """Called on the driver, once per connector a pipeline uses, when its queries have all
        stopped: close any client kept open for them (in ``source_committed``, in sinks)."""
        return


# What the registry holds: connectors of any options.
AnyConnector = Connector[Any, Any]
