"""The iceberg connector's options, named as Arroyo names them (its filesystem ``config.rs``:
``IcebergProfile``, ``IcebergSink``): ``catalog.*`` for the catalog, ``namespace`` and
``table_name`` for the table, ``PARTITIONED BY`` with Iceberg's transforms, and the filesystem
sink's ``storage.*``, ``rolling_policy.*`` and ``shuffle_by_partition.enabled``.

Arroyo's catalogs are REST only; Arroyo here also takes ``catalog.type = 'jdbc'`` (a JDBC
catalog: ``catalog.jdbc.url`` on PostgreSQL, with ``catalog.jdbc.user``/``.password``) and
``'hadoop'`` (a catalog that is a directory: ``catalog.warehouse``, local or on S3)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from arroyo.connectors.base import ConnectorOptions
from arroyo.connectors.filesystem.options import split_fields
from arroyo.connectors.storage import Location, StorageError, parse_location
from arroyo.sql.time import DurationError, option_duration_us

# Iceberg's transforms as Arroyo spells them, and how many numbers each takes after the column.
TRANSFORMS = {
    "identity": 0,
    "bucket": 1,
    "truncate": 1,
    "year": 0,
    "month": 0,
    "day": 0,
    "hour": 0,
    "void": 0,
}
_ITEM = re.compile(r"^(?P<fn>\w+)\((?P<column>[^,()]+)(?:,\s*(?P<arg>\d+))?\)$")


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One field of the table's partition spec: ``transform(column[, arg])``."""

    transform: str
    column: str
    arg: int | None = None

    def spark_sql(self) -> str | None:
        """As Spark's DDL for Iceberg writes it (``bucket(4, c)``, ``hours(ts)``...); None for
        ``void``, which partitions nothing and which Spark's DDL has no word for."""
        column = f"`{self.column.replace('`', '``')}`"
        if self.transform == "void":
            return None
        if self.transform == "identity":
            return column
        if self.transform in ("bucket", "truncate"):
            return f"{self.transform}({self.arg}, {column})"
        return f"{self.transform}s({column})"  # years, months, days, hours


def parse_partition_field(text: str) -> PartitionField:
    match = _ITEM.match(text.strip())
    if match is None:
        if "(" in text or ")" in text:
            raise ValueError(
                f"'{text.strip()}' in PARTITIONED BY: write a transform as fn(column) or "
                "fn(column, n), with one column and at most one whole number"
            )
        return PartitionField("identity", text.strip())  # a bare column is identity
    fn, column, arg = match["fn"].lower(), match["column"].strip(), match["arg"]
    if fn not in TRANSFORMS:
        known = ", ".join(TRANSFORMS)
        raise ValueError(f"unknown Iceberg transform '{fn}' in PARTITIONED BY (known: {known})")
    wanted = TRANSFORMS[fn]
    if (arg is not None) != bool(wanted):
        shape = f"{fn}(column, n)" if wanted else f"{fn}(column)"
        raise ValueError(f"'{text.strip()}' in PARTITIONED BY: write it {shape}")
    if arg is not None and int(arg) < 1:
        raise ValueError(f"'{text.strip()}' in PARTITIONED BY: its number must be at least 1")
    return PartitionField(fn, column, int(arg) if arg is not None else None)


class IcebergOptions(ConnectorOptions):
    catalog_type: Literal["rest", "jdbc", "hadoop"] = Field(
        alias="catalog.type",
        description="the catalog: 'rest' (an Iceberg REST catalog), 'jdbc' (a JDBC catalog on "
        "PostgreSQL) or 'hadoop' (a directory: catalog.warehouse)",
    )
    warehouse: str | None = Field(
        None,
        alias="catalog.warehouse",
        description="the warehouse: a REST catalog's name for it, or the path (local, s3://) "
        "where a jdbc or hadoop catalog keeps its tables",
    )
    rest_url: str | None = Field(
        None, alias="catalog.rest.url", description="the REST catalog's base URL"
    )
    rest_token: str | None = Field(
        None,
        alias="catalog.rest.token",
        description="a bearer token for the REST catalog",
        json_schema_extra={"secret": True},
    )
    jdbc_url: str | None = Field(
        None,
        alias="catalog.jdbc.url",
        description="the JDBC catalog's database: jdbc:postgresql://host:port/db",
    )
    jdbc_user: str | None = Field(None, alias="catalog.jdbc.user", description="database user")
    jdbc_password: str | None = Field(
        None,
        alias="catalog.jdbc.password",
        description="database password",
        json_schema_extra={"secret": True},
    )
    namespace: str = Field("default", description="the table's namespace, dot-separated")
    table_name: str = Field(description="the table's name in its namespace")
    location_path: str | None = Field(
        None, description="where the table keeps its files, when the sink creates it"
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="how to reach the object store holding the table's files, as the "
        "filesystem connector's storage.<key> options",
        json_schema_extra={"secret": True},
    )
    partitioning: list[str] = Field(
        default_factory=list,
        alias="partitioning.fields",
        description="the partition spec, from PARTITIONED BY: identity(c) (or c), bucket(c, n), "
        "truncate(c, w), year(c), month(c), day(c), hour(c), void(c)",
    )
    shuffle_by_partition: bool = Field(
        False,
        alias="shuffle_by_partition.enabled",
        description="gather each partition's rows in one task before writing (fewer files)",
    )
    interval_s: int | None = Field(
        None,
        alias="rolling_policy.interval",
        description="longest time a file stays open; files close at every checkpoint sooner",
    )
    inactivity_s: int | None = Field(
        None,
        alias="rolling_policy.inactivity_interval",
        description="close a file this long without rows; files close at every checkpoint",
    )

    @model_validator(mode="before")
    @classmethod
    def _storage(cls, data: object) -> object:
        """``storage.<key>`` options, as Arroyo writes them in SQL, into ``storage_options``."""
        if not isinstance(data, dict):
            return data
        given = {k: v for k, v in data.items() if isinstance(k, str) and k.startswith("storage.")}
        rest = {k: v for k, v in data.items() if k not in given}
        merged = dict(rest.get("storage_options") or {})
        merged.update({k.removeprefix("storage."): str(v) for k, v in given.items()})
        return {**rest, "storage_options": merged} if given else data

    @field_validator("partitioning", mode="before")
    @classmethod
    def _partitioning(cls, value: object) -> object:
        items = split_fields(value) if isinstance(value, str) else value
        if isinstance(items, list):
            for item in items:
                parse_partition_field(str(item))
        return items

    @field_validator("interval_s", "inactivity_s", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return max(1, option_duration_us(value) // 1_000_000)
        except DurationError as err:
            raise ValueError(str(err)) from err

    @model_validator(mode="after")
    def _catalog(self) -> IcebergOptions:
        needs = {
            "rest": [("catalog.rest.url", self.rest_url)],
            "jdbc": [("catalog.jdbc.url", self.jdbc_url), ("catalog.warehouse", self.warehouse)],
            "hadoop": [("catalog.warehouse", self.warehouse)],
        }[self.catalog_type]
        missing = [name for name, value in needs if not value]
        if missing:
            raise ValueError(
                f"a catalog.type = '{self.catalog_type}' table needs {' and '.join(missing)}"
            )
        if self.catalog_type == "jdbc" and not str(self.jdbc_url).startswith("jdbc:postgresql:"):
            raise ValueError("catalog.jdbc.url must be a jdbc:postgresql:// URL")
        for path in (self.warehouse if self.catalog_type != "rest" else None, self.location_path):
            if path:
                try:
                    parse_location(path, self.storage_options)
                except StorageError as err:
                    raise ValueError(str(err)) from err
        return self

    @property
    def fields(self) -> list[PartitionField]:
        return [parse_partition_field(f) for f in self.partitioning]

    @property
    def locations(self) -> list[Location]:
        """The object-store paths the sink's Spark writes to, for their storage settings."""
        paths = [self.location_path, self.warehouse if self.catalog_type != "rest" else None]
        return [parse_location(p, self.storage_options) for p in paths if p]

    def catalog_settings(self) -> dict[str, str]:
        """The Spark catalog's settings (``spark.sql.catalog.<name>.<key>``)."""
        settings = {"": "org.apache.iceberg.spark.SparkCatalog"}
        if self.catalog_type == "rest":
            settings |= {"type": "rest", "uri": str(self.rest_url)}
            if self.warehouse:
                settings["warehouse"] = self.warehouse
            if self.rest_token:
                settings["token"] = self.rest_token
        else:
            assert self.warehouse is not None
            settings["warehouse"] = parse_location(self.warehouse, self.storage_options).uri
            if self.catalog_type == "hadoop":
                settings["type"] = "hadoop"
            else:
                settings |= {"catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog"}
                settings["uri"] = str(self.jdbc_url)
                if self.jdbc_user:
                    settings["jdbc.user"] = self.jdbc_user
                if self.jdbc_password:
                    settings["jdbc.password"] = self.jdbc_password
        return settings

    def catalog_name(self) -> str:
        """One Spark catalog per distinct catalog (tables of one catalog share it)."""
        digest = hashlib.sha256(json.dumps(self.catalog_settings(), sort_keys=True).encode())
        return f"arroyo_iceberg_{digest.hexdigest()[:12]}"
