from arroyo_rpc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartWorkerRequest(_message.Message):
    __slots__ = ("job_id", "generation", "slots", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    generation: int
    slots: int
    env: _containers.ScalarMap[str, str]
    def __init__(self, job_id: _Optional[str] = ..., generation: _Optional[int] = ..., slots: _Optional[int] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StartWorkerResponse(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class StopWorkerRequest(_message.Message):
    __slots__ = ("job_id", "worker_id", "mode")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    worker_id: str
    mode: _common_pb2.StopMode
    def __init__(self, job_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.StopMode, str]] = ...) -> None: ...

class StopWorkerResponse(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: bool
    def __init__(self, found: _Optional[bool] = ...) -> None: ...

class GetWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerProcess(_message.Message):
    __slots__ = ("worker_id", "job_id", "generation", "slots", "pid", "running", "exit_code")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    job_id: str
    generation: int
    slots: int
    pid: int
    running: bool
    exit_code: int
    def __init__(self, worker_id: _Optional[str] = ..., job_id: _Optional[str] = ..., generation: _Optional[int] = ..., slots: _Optional[int] = ..., pid: _Optional[int] = ..., running: _Optional[bool] = ..., exit_code: _Optional[int] = ...) -> None: ...

class GetWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerProcess]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerProcess, _Mapping]]] = ...) -> None: ...
