from arroyo_rpc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompileRequest(_message.Message):
    __slots__ = ("query", "udfs", "parallelism", "connection_profiles", "connection_tables")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    UDFS_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_PROFILES_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_TABLES_FIELD_NUMBER: _ClassVar[int]
    query: str
    udfs: str
    parallelism: int
    connection_profiles: _containers.RepeatedCompositeFieldContainer[ConnectionProfile]
    connection_tables: _containers.RepeatedCompositeFieldContainer[ConnectionTable]
    def __init__(self, query: _Optional[str] = ..., udfs: _Optional[str] = ..., parallelism: _Optional[int] = ..., connection_profiles: _Optional[_Iterable[_Union[ConnectionProfile, _Mapping]]] = ..., connection_tables: _Optional[_Iterable[_Union[ConnectionTable, _Mapping]]] = ...) -> None: ...

class ConnectionProfile(_message.Message):
    __slots__ = ("name", "connector", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    connector: str
    config: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., connector: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ConnectionTable(_message.Message):
    __slots__ = ("name", "ddl")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DDL_FIELD_NUMBER: _ClassVar[int]
    name: str
    ddl: str
    def __init__(self, name: _Optional[str] = ..., ddl: _Optional[str] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "type", "nullable")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NULLABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    nullable: bool
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., nullable: _Optional[bool] = ...) -> None: ...

class TableSchema(_message.Message):
    __slots__ = ("name", "role", "connector", "columns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: str
    connector: str
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    def __init__(self, name: _Optional[str] = ..., role: _Optional[str] = ..., connector: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ...) -> None: ...

class GraphNode(_message.Message):
    __slots__ = ("id", "kind", "label")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    label: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class GraphEdge(_message.Message):
    __slots__ = ("source", "target")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class CompileResponse(_message.Message):
    __slots__ = ("program_json", "nodes", "edges", "tables", "diagnostics", "warnings", "functions")
    PROGRAM_JSON_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    program_json: str
    nodes: _containers.RepeatedCompositeFieldContainer[GraphNode]
    edges: _containers.RepeatedCompositeFieldContainer[GraphEdge]
    tables: _containers.RepeatedCompositeFieldContainer[TableSchema]
    diagnostics: _containers.RepeatedCompositeFieldContainer[_common_pb2.Diagnostic]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    functions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, program_json: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[GraphEdge, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[TableSchema, _Mapping]]] = ..., diagnostics: _Optional[_Iterable[_Union[_common_pb2.Diagnostic, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ..., functions: _Optional[_Iterable[str]] = ...) -> None: ...

class ValidateUdfsRequest(_message.Message):
    __slots__ = ("udfs",)
    UDFS_FIELD_NUMBER: _ClassVar[int]
    udfs: str
    def __init__(self, udfs: _Optional[str] = ...) -> None: ...

class Udf(_message.Message):
    __slots__ = ("name", "kind", "signature")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    signature: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class ValidateUdfsResponse(_message.Message):
    __slots__ = ("udfs", "diagnostics")
    UDFS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    udfs: _containers.RepeatedCompositeFieldContainer[Udf]
    diagnostics: _containers.RepeatedCompositeFieldContainer[_common_pb2.Diagnostic]
    def __init__(self, udfs: _Optional[_Iterable[_Union[Udf, _Mapping]]] = ..., diagnostics: _Optional[_Iterable[_Union[_common_pb2.Diagnostic, _Mapping]]] = ...) -> None: ...
