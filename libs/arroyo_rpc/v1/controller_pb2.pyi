from arroyo_rpc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterNodeRequest(_message.Message):
    __slots__ = ("node_id", "address", "task_slots", "workers")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_SLOTS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    task_slots: int
    workers: _containers.RepeatedCompositeFieldContainer[NodeWorker]
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., task_slots: _Optional[int] = ..., workers: _Optional[_Iterable[_Union[NodeWorker, _Mapping]]] = ...) -> None: ...

class NodeWorker(_message.Message):
    __slots__ = ("worker_id", "job_id", "generation", "slots")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    job_id: str
    generation: int
    slots: int
    def __init__(self, worker_id: _Optional[str] = ..., job_id: _Optional[str] = ..., generation: _Optional[int] = ..., slots: _Optional[int] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HeartbeatNodeRequest(_message.Message):
    __slots__ = ("node_id", "address", "task_slots", "worker_ids")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_SLOTS_FIELD_NUMBER: _ClassVar[int]
    WORKER_IDS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    task_slots: int
    worker_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., task_slots: _Optional[int] = ..., worker_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class HeartbeatNodeResponse(_message.Message):
    __slots__ = ("known",)
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    known: bool
    def __init__(self, known: _Optional[bool] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("job", "node_id", "address", "slots")
    JOB_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    node_id: str
    address: str
    slots: int
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., node_id: _Optional[str] = ..., address: _Optional[str] = ..., slots: _Optional[int] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetJobSecretsRequest(_message.Message):
    __slots__ = ("job", "keys")
    JOB_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class GetJobSecretsResponse(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("job", "time_micros", "address", "phase")
    JOB_FIELD_NUMBER: _ClassVar[int]
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    time_micros: int
    address: str
    phase: str
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., time_micros: _Optional[int] = ..., address: _Optional[str] = ..., phase: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TaskStartedRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ...) -> None: ...

class TaskStartedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SourceOffset(_message.Message):
    __slots__ = ("source", "offset_json")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_JSON_FIELD_NUMBER: _ClassVar[int]
    source: str
    offset_json: str
    def __init__(self, source: _Optional[str] = ..., offset_json: _Optional[str] = ...) -> None: ...

class TaskCheckpointCompletedRequest(_message.Message):
    __slots__ = ("job", "query", "epoch", "offsets", "watermark_micros", "state_rows", "state_bytes", "duration_micros", "rows_in", "finished_micros")
    JOB_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MICROS_FIELD_NUMBER: _ClassVar[int]
    STATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    ROWS_IN_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MICROS_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    query: str
    epoch: int
    offsets: _containers.RepeatedCompositeFieldContainer[SourceOffset]
    watermark_micros: int
    state_rows: int
    state_bytes: int
    duration_micros: int
    rows_in: int
    finished_micros: int
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., query: _Optional[str] = ..., epoch: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[SourceOffset, _Mapping]]] = ..., watermark_micros: _Optional[int] = ..., state_rows: _Optional[int] = ..., state_bytes: _Optional[int] = ..., duration_micros: _Optional[int] = ..., rows_in: _Optional[int] = ..., finished_micros: _Optional[int] = ...) -> None: ...

class TaskCheckpointCompletedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TaskFailedRequest(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    error: _common_pb2.TaskError
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.TaskError, _Mapping]] = ...) -> None: ...

class TaskFailedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NonfatalErrorRequest(_message.Message):
    __slots__ = ("job", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    error: _common_pb2.TaskError
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.TaskError, _Mapping]] = ...) -> None: ...

class NonfatalErrorResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TaskFinishedRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ...) -> None: ...

class TaskFinishedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerFinishedRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ...) -> None: ...

class WorkerFinishedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class OperatorMetrics(_message.Message):
    __slots__ = ("query", "rows_in", "rows_out", "rows_in_per_second", "rows_processed_per_second", "batch_duration_micros", "state_rows", "state_bytes", "dropped_bad_records", "watermark_micros", "dropped_overflow_messages")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ROWS_IN_FIELD_NUMBER: _ClassVar[int]
    ROWS_OUT_FIELD_NUMBER: _ClassVar[int]
    ROWS_IN_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ROWS_PROCESSED_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BATCH_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    STATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_BAD_RECORDS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MICROS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_OVERFLOW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    query: str
    rows_in: int
    rows_out: int
    rows_in_per_second: float
    rows_processed_per_second: float
    batch_duration_micros: int
    state_rows: int
    state_bytes: int
    dropped_bad_records: int
    watermark_micros: int
    dropped_overflow_messages: int
    def __init__(self, query: _Optional[str] = ..., rows_in: _Optional[int] = ..., rows_out: _Optional[int] = ..., rows_in_per_second: _Optional[float] = ..., rows_processed_per_second: _Optional[float] = ..., batch_duration_micros: _Optional[int] = ..., state_rows: _Optional[int] = ..., state_bytes: _Optional[int] = ..., dropped_bad_records: _Optional[int] = ..., watermark_micros: _Optional[int] = ..., dropped_overflow_messages: _Optional[int] = ...) -> None: ...

class NodeMetrics(_message.Message):
    __slots__ = ("operator_id", "label", "query", "messages_recv", "messages_sent", "interval_seconds", "backpressure", "state_rows", "state_bytes", "state_rows_updated", "late_rows_dropped", "deserialization_errors", "stateful", "batch_duration_micros", "watermark_lag_micros")
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_RECV_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_SENT_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKPRESSURE_FIELD_NUMBER: _ClassVar[int]
    STATE_ROWS_FIELD_NUMBER: _ClassVar[int]
    STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STATE_ROWS_UPDATED_FIELD_NUMBER: _ClassVar[int]
    LATE_ROWS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    DESERIALIZATION_ERRORS_FIELD_NUMBER: _ClassVar[int]
    STATEFUL_FIELD_NUMBER: _ClassVar[int]
    BATCH_DURATION_MICROS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_LAG_MICROS_FIELD_NUMBER: _ClassVar[int]
    operator_id: str
    label: str
    query: str
    messages_recv: int
    messages_sent: int
    interval_seconds: float
    backpressure: float
    state_rows: int
    state_bytes: int
    state_rows_updated: int
    late_rows_dropped: int
    deserialization_errors: int
    stateful: bool
    batch_duration_micros: int
    watermark_lag_micros: int
    def __init__(self, operator_id: _Optional[str] = ..., label: _Optional[str] = ..., query: _Optional[str] = ..., messages_recv: _Optional[int] = ..., messages_sent: _Optional[int] = ..., interval_seconds: _Optional[float] = ..., backpressure: _Optional[float] = ..., state_rows: _Optional[int] = ..., state_bytes: _Optional[int] = ..., state_rows_updated: _Optional[int] = ..., late_rows_dropped: _Optional[int] = ..., deserialization_errors: _Optional[int] = ..., stateful: _Optional[bool] = ..., batch_duration_micros: _Optional[int] = ..., watermark_lag_micros: _Optional[int] = ...) -> None: ...

class JobMetricsRequest(_message.Message):
    __slots__ = ("job", "time_micros", "operators", "nodes")
    JOB_FIELD_NUMBER: _ClassVar[int]
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    time_micros: int
    operators: _containers.RepeatedCompositeFieldContainer[OperatorMetrics]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeMetrics]
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., time_micros: _Optional[int] = ..., operators: _Optional[_Iterable[_Union[OperatorMetrics, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[NodeMetrics, _Mapping]]] = ...) -> None: ...

class JobMetricsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SendSinkDataRequest(_message.Message):
    __slots__ = ("job", "query", "rows", "done")
    JOB_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    query: str
    rows: _containers.RepeatedScalarFieldContainer[str]
    done: bool
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., query: _Optional[str] = ..., rows: _Optional[_Iterable[str]] = ..., done: _Optional[bool] = ...) -> None: ...

class SendSinkDataResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SubscribeToOutputRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class SubscribeToOutputResponse(_message.Message):
    __slots__ = ("query", "rows", "done")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    query: str
    rows: _containers.RepeatedScalarFieldContainer[str]
    done: bool
    def __init__(self, query: _Optional[str] = ..., rows: _Optional[_Iterable[str]] = ..., done: _Optional[bool] = ...) -> None: ...

class GetJobStatusRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetJobStatusResponse(_message.Message):
    __slots__ = ("job_id", "state", "generation", "worker_id", "node_id", "last_heartbeat_micros")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MICROS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: str
    generation: int
    worker_id: str
    node_id: str
    last_heartbeat_micros: int
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[str] = ..., generation: _Optional[int] = ..., worker_id: _Optional[str] = ..., node_id: _Optional[str] = ..., last_heartbeat_micros: _Optional[int] = ...) -> None: ...

class GetJobMetricsRequest(_message.Message):
    __slots__ = ("job_id", "operators")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    operators: bool
    def __init__(self, job_id: _Optional[str] = ..., operators: _Optional[bool] = ...) -> None: ...

class MetricsSample(_message.Message):
    __slots__ = ("time_micros", "operators")
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    time_micros: int
    operators: _containers.RepeatedCompositeFieldContainer[OperatorMetrics]
    def __init__(self, time_micros: _Optional[int] = ..., operators: _Optional[_Iterable[_Union[OperatorMetrics, _Mapping]]] = ...) -> None: ...

class MetricPoint(_message.Message):
    __slots__ = ("time_micros", "value")
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    time_micros: int
    value: float
    def __init__(self, time_micros: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...

class MetricSeries(_message.Message):
    __slots__ = ("name", "points")
    NAME_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    points: _containers.RepeatedCompositeFieldContainer[MetricPoint]
    def __init__(self, name: _Optional[str] = ..., points: _Optional[_Iterable[_Union[MetricPoint, _Mapping]]] = ...) -> None: ...

class OperatorSeries(_message.Message):
    __slots__ = ("operator_id", "label", "series")
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    operator_id: str
    label: str
    series: _containers.RepeatedCompositeFieldContainer[MetricSeries]
    def __init__(self, operator_id: _Optional[str] = ..., label: _Optional[str] = ..., series: _Optional[_Iterable[_Union[MetricSeries, _Mapping]]] = ...) -> None: ...

class GetJobMetricsResponse(_message.Message):
    __slots__ = ("samples", "operators")
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[MetricsSample]
    operators: _containers.RepeatedCompositeFieldContainer[OperatorSeries]
    def __init__(self, samples: _Optional[_Iterable[_Union[MetricsSample, _Mapping]]] = ..., operators: _Optional[_Iterable[_Union[OperatorSeries, _Mapping]]] = ...) -> None: ...

class JobsChangedRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JobsChangedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("node_id", "address", "task_slots", "free_slots")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_SLOTS_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    task_slots: int
    free_slots: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., task_slots: _Optional[int] = ..., free_slots: _Optional[int] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...
