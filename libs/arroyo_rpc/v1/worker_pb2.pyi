from arroyo_rpc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkerPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_PHASE_UNSPECIFIED: _ClassVar[WorkerPhase]
    WORKER_PHASE_IDLE: _ClassVar[WorkerPhase]
    WORKER_PHASE_RUNNING: _ClassVar[WorkerPhase]
    WORKER_PHASE_STOPPING: _ClassVar[WorkerPhase]
    WORKER_PHASE_STOPPED: _ClassVar[WorkerPhase]
    WORKER_PHASE_FINISHED: _ClassVar[WorkerPhase]
    WORKER_PHASE_FAILED: _ClassVar[WorkerPhase]
WORKER_PHASE_UNSPECIFIED: WorkerPhase
WORKER_PHASE_IDLE: WorkerPhase
WORKER_PHASE_RUNNING: WorkerPhase
WORKER_PHASE_STOPPING: WorkerPhase
WORKER_PHASE_STOPPED: WorkerPhase
WORKER_PHASE_FINISHED: WorkerPhase
WORKER_PHASE_FAILED: WorkerPhase

class StartExecutionRequest(_message.Message):
    __slots__ = ("job", "program_json", "state_dir", "restore", "checkpoint_interval_micros")
    JOB_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_JSON_FIELD_NUMBER: _ClassVar[int]
    STATE_DIR_FIELD_NUMBER: _ClassVar[int]
    RESTORE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_INTERVAL_MICROS_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    program_json: str
    state_dir: str
    restore: bool
    checkpoint_interval_micros: int
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., program_json: _Optional[str] = ..., state_dir: _Optional[str] = ..., restore: _Optional[bool] = ..., checkpoint_interval_micros: _Optional[int] = ...) -> None: ...

class StartExecutionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StopExecutionRequest(_message.Message):
    __slots__ = ("job", "mode")
    JOB_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    mode: _common_pb2.StopMode
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., mode: _Optional[_Union[_common_pb2.StopMode, str]] = ...) -> None: ...

class StopExecutionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkerPhaseRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkerPhaseResponse(_message.Message):
    __slots__ = ("job", "phase")
    JOB_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.JobRef
    phase: WorkerPhase
    def __init__(self, job: _Optional[_Union[_common_pb2.JobRef, _Mapping]] = ..., phase: _Optional[_Union[WorkerPhase, str]] = ...) -> None: ...
