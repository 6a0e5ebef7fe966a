from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorDomain(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_DOMAIN_UNSPECIFIED: _ClassVar[ErrorDomain]
    ERROR_DOMAIN_USER: _ClassVar[ErrorDomain]
    ERROR_DOMAIN_INTERNAL: _ClassVar[ErrorDomain]
    ERROR_DOMAIN_EXTERNAL: _ClassVar[ErrorDomain]

class StopMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STOP_MODE_UNSPECIFIED: _ClassVar[StopMode]
    STOP_MODE_GRACEFUL: _ClassVar[StopMode]
    STOP_MODE_IMMEDIATE: _ClassVar[StopMode]
    STOP_MODE_FORCE: _ClassVar[StopMode]
ERROR_DOMAIN_UNSPECIFIED: ErrorDomain
ERROR_DOMAIN_USER: ErrorDomain
ERROR_DOMAIN_INTERNAL: ErrorDomain
ERROR_DOMAIN_EXTERNAL: ErrorDomain
STOP_MODE_UNSPECIFIED: StopMode
STOP_MODE_GRACEFUL: StopMode
STOP_MODE_IMMEDIATE: StopMode
STOP_MODE_FORCE: StopMode

class JobRef(_message.Message):
    __slots__ = ("job_id", "generation", "worker_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    generation: int
    worker_id: str
    def __init__(self, job_id: _Optional[str] = ..., generation: _Optional[int] = ..., worker_id: _Optional[str] = ...) -> None: ...

class TaskError(_message.Message):
    __slots__ = ("message", "domain", "retryable", "details")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    message: str
    domain: ErrorDomain
    retryable: bool
    details: str
    def __init__(self, message: _Optional[str] = ..., domain: _Optional[_Union[ErrorDomain, str]] = ..., retryable: _Optional[bool] = ..., details: _Optional[str] = ...) -> None: ...

class Diagnostic(_message.Message):
    __slots__ = ("code", "message", "line", "column")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    line: int
    column: int
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., line: _Optional[int] = ..., column: _Optional[int] = ...) -> None: ...
