from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OPERATION_STATE_UNSPECIFIED: _ClassVar[OperationState]
    OPERATION_STATE_WATCHING: _ClassVar[OperationState]
    OPERATION_STATE_COMPLETED: _ClassVar[OperationState]
    OPERATION_STATE_EXPIRED: _ClassVar[OperationState]
    OPERATION_STATE_FORCE_COMPLETED: _ClassVar[OperationState]
    OPERATION_STATE_CANCELLED: _ClassVar[OperationState]
OPERATION_STATE_UNSPECIFIED: OperationState
OPERATION_STATE_WATCHING: OperationState
OPERATION_STATE_COMPLETED: OperationState
OPERATION_STATE_EXPIRED: OperationState
OPERATION_STATE_FORCE_COMPLETED: OperationState
OPERATION_STATE_CANCELLED: OperationState

class PurgatoryConfig(_message.Message):
    __slots__ = ("tick_ms", "wheel_size", "purge_interval", "max_pending", "retained_events", "durable")
    TICK_MS_FIELD_NUMBER: _ClassVar[int]
    WHEEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    PURGE_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_PENDING_FIELD_NUMBER: _ClassVar[int]
    RETAINED_EVENTS_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    tick_ms: int
    wheel_size: int
    purge_interval: int
    max_pending: int
    retained_events: int
    durable: bool
    def __init__(self, tick_ms: _Optional[int] = ..., wheel_size: _Optional[int] = ..., purge_interval: _Optional[int] = ..., max_pending: _Optional[int] = ..., retained_events: _Optional[int] = ..., durable: _Optional[bool] = ...) -> None: ...

class Purgatory(_message.Message):
    __slots__ = ("name", "config", "pending", "watched_keys", "last_sequence", "oldest_sequence", "subscribers", "incarnation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    WATCHED_KEYS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OLDEST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: PurgatoryConfig
    pending: int
    watched_keys: int
    last_sequence: int
    oldest_sequence: int
    subscribers: int
    incarnation: str
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Union[PurgatoryConfig, _Mapping]] = ..., pending: _Optional[int] = ..., watched_keys: _Optional[int] = ..., last_sequence: _Optional[int] = ..., oldest_sequence: _Optional[int] = ..., subscribers: _Optional[int] = ..., incarnation: _Optional[str] = ...) -> None: ...

class CreatePurgatoryRequest(_message.Message):
    __slots__ = ("name", "config")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    name: str
    config: PurgatoryConfig
    def __init__(self, name: _Optional[str] = ..., config: _Optional[_Union[PurgatoryConfig, _Mapping]] = ...) -> None: ...

class CreatePurgatoryResponse(_message.Message):
    __slots__ = ("purgatory",)
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    purgatory: Purgatory
    def __init__(self, purgatory: _Optional[_Union[Purgatory, _Mapping]] = ...) -> None: ...

class DeletePurgatoryRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeletePurgatoryResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    def __init__(self, cancelled: _Optional[int] = ...) -> None: ...

class ListPurgatoriesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPurgatoriesResponse(_message.Message):
    __slots__ = ("purgatories",)
    PURGATORIES_FIELD_NUMBER: _ClassVar[int]
    purgatories: _containers.RepeatedCompositeFieldContainer[Purgatory]
    def __init__(self, purgatories: _Optional[_Iterable[_Union[Purgatory, _Mapping]]] = ...) -> None: ...

class GetPurgatoryRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetPurgatoryResponse(_message.Message):
    __slots__ = ("purgatory",)
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    purgatory: Purgatory
    def __init__(self, purgatory: _Optional[_Union[Purgatory, _Mapping]] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("any_key", "all_keys", "min_signals", "sum_at_least", "values_at_least", "filter", "predicate", "match", "attributes")
    ANY_KEY_FIELD_NUMBER: _ClassVar[int]
    ALL_KEYS_FIELD_NUMBER: _ClassVar[int]
    MIN_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    SUM_AT_LEAST_FIELD_NUMBER: _ClassVar[int]
    VALUES_AT_LEAST_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    any_key: AnyKeyCondition
    all_keys: AllKeysCondition
    min_signals: MinSignalsCondition
    sum_at_least: SumAtLeastCondition
    values_at_least: ValuesAtLeastCondition
    filter: str
    predicate: str
    match: str
    attributes: _struct_pb2.Struct
    def __init__(self, any_key: _Optional[_Union[AnyKeyCondition, _Mapping]] = ..., all_keys: _Optional[_Union[AllKeysCondition, _Mapping]] = ..., min_signals: _Optional[_Union[MinSignalsCondition, _Mapping]] = ..., sum_at_least: _Optional[_Union[SumAtLeastCondition, _Mapping]] = ..., values_at_least: _Optional[_Union[ValuesAtLeastCondition, _Mapping]] = ..., filter: _Optional[str] = ..., predicate: _Optional[str] = ..., match: _Optional[str] = ..., attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class AnyKeyCondition(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AllKeysCondition(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MinSignalsCondition(_message.Message):
    __slots__ = ("count", "distinct_sources")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DISTINCT_SOURCES_FIELD_NUMBER: _ClassVar[int]
    count: int
    distinct_sources: bool
    def __init__(self, count: _Optional[int] = ..., distinct_sources: _Optional[bool] = ...) -> None: ...

class SumAtLeastCondition(_message.Message):
    __slots__ = ("threshold",)
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    threshold: int
    def __init__(self, threshold: _Optional[int] = ...) -> None: ...

class ValuesAtLeastCondition(_message.Message):
    __slots__ = ("targets", "default_target")
    class TargetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TARGET_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.ScalarMap[str, int]
    default_target: int
    def __init__(self, targets: _Optional[_Mapping[str, int]] = ..., default_target: _Optional[int] = ...) -> None: ...

class Signal(_message.Message):
    __slots__ = ("amount", "value", "source", "data", "attributes")
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    amount: int
    value: int
    source: str
    data: bytes
    attributes: _struct_pb2.Struct
    def __init__(self, amount: _Optional[int] = ..., value: _Optional[int] = ..., source: _Optional[str] = ..., data: _Optional[bytes] = ..., attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class OperationResult(_message.Message):
    __slots__ = ("signal_count", "sources", "signalled_keys", "amount_sum", "values", "data", "data_truncated", "matched_attributes", "matched_key")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SIGNAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    SIGNALLED_KEYS_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_SUM_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DATA_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    MATCHED_KEY_FIELD_NUMBER: _ClassVar[int]
    signal_count: int
    sources: _containers.RepeatedScalarFieldContainer[str]
    signalled_keys: _containers.RepeatedScalarFieldContainer[str]
    amount_sum: int
    values: _containers.ScalarMap[str, int]
    data: bytes
    data_truncated: bool
    matched_attributes: _struct_pb2.Struct
    matched_key: str
    def __init__(self, signal_count: _Optional[int] = ..., sources: _Optional[_Iterable[str]] = ..., signalled_keys: _Optional[_Iterable[str]] = ..., amount_sum: _Optional[int] = ..., values: _Optional[_Mapping[str, int]] = ..., data: _Optional[bytes] = ..., data_truncated: _Optional[bool] = ..., matched_attributes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., matched_key: _Optional[str] = ...) -> None: ...

class OperationSpec(_message.Message):
    __slots__ = ("operation_id", "keys", "timeout_ms", "condition", "payload", "due_time_ms", "extend_on_resend", "max_extend_ms")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    EXTEND_ON_RESEND_FIELD_NUMBER: _ClassVar[int]
    MAX_EXTEND_MS_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    condition: Condition
    payload: bytes
    due_time_ms: int
    extend_on_resend: bool
    max_extend_ms: int
    def __init__(self, operation_id: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ..., payload: _Optional[bytes] = ..., due_time_ms: _Optional[int] = ..., extend_on_resend: _Optional[bool] = ..., max_extend_ms: _Optional[int] = ...) -> None: ...

class OperationStatus(_message.Message):
    __slots__ = ("operation_id", "state", "result", "sequence", "created", "create_time_ms", "due_time_ms", "complete_time_ms", "payload", "traceparent")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    state: OperationState
    result: OperationResult
    sequence: int
    created: bool
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    payload: bytes
    traceparent: str
    def __init__(self, operation_id: _Optional[str] = ..., state: _Optional[_Union[OperationState, str]] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ..., sequence: _Optional[int] = ..., created: _Optional[bool] = ..., create_time_ms: _Optional[int] = ..., due_time_ms: _Optional[int] = ..., complete_time_ms: _Optional[int] = ..., payload: _Optional[bytes] = ..., traceparent: _Optional[str] = ...) -> None: ...

class TryCompleteElseWatchRequest(_message.Message):
    __slots__ = ("purgatory", "operation_id", "keys", "timeout_ms", "condition", "payload", "wait", "due_time_ms", "extend_on_resend", "max_extend_ms")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    EXTEND_ON_RESEND_FIELD_NUMBER: _ClassVar[int]
    MAX_EXTEND_MS_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operation_id: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    condition: Condition
    payload: bytes
    wait: bool
    due_time_ms: int
    extend_on_resend: bool
    max_extend_ms: int
    def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ..., payload: _Optional[bytes] = ..., wait: _Optional[bool] = ..., due_time_ms: _Optional[int] = ..., extend_on_resend: _Optional[bool] = ..., max_extend_ms: _Optional[int] = ...) -> None: ...

class TryCompleteElseWatchResponse(_message.Message):
    __slots__ = ("operation_id", "state", "result", "sequence", "created", "create_time_ms", "due_time_ms", "complete_time_ms", "traceparent")
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    operation_id: str
    state: OperationState
    result: OperationResult
    sequence: int
    created: bool
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    traceparent: str
    def __init__(self, operation_id: _Optional[str] = ..., state: _Optional[_Union[OperationState, str]] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ..., sequence: _Optional[int] = ..., created: _Optional[bool] = ..., create_time_ms: _Optional[int] = ..., due_time_ms: _Optional[int] = ..., complete_time_ms: _Optional[int] = ..., traceparent: _Optional[str] = ...) -> None: ...

class BatchTryCompleteElseWatchRequest(_message.Message):
    __slots__ = ("purgatory", "operations", "wait")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operations: _containers.RepeatedCompositeFieldContainer[OperationSpec]
    wait: bool
    def __init__(self, purgatory: _Optional[str] = ..., operations: _Optional[_Iterable[_Union[OperationSpec, _Mapping]]] = ..., wait: _Optional[bool] = ...) -> None: ...

class BatchTryCompleteElseWatchResponse(_message.Message):
    __slots__ = ("operations",)
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[OperationStatus]
    def __init__(self, operations: _Optional[_Iterable[_Union[OperationStatus, _Mapping]]] = ...) -> None: ...

class KeySignal(_message.Message):
    __slots__ = ("key", "signal")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    signal: Signal
    def __init__(self, key: _Optional[str] = ..., signal: _Optional[_Union[Signal, _Mapping]] = ...) -> None: ...

class CheckAndCompleteRequest(_message.Message):
    __slots__ = ("purgatory", "key", "signal")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    key: str
    signal: Signal
    def __init__(self, purgatory: _Optional[str] = ..., key: _Optional[str] = ..., signal: _Optional[_Union[Signal, _Mapping]] = ...) -> None: ...

class CheckAndCompleteResponse(_message.Message):
    __slots__ = ("completed",)
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    completed: int
    def __init__(self, completed: _Optional[int] = ...) -> None: ...

class BatchCheckAndCompleteRequest(_message.Message):
    __slots__ = ("purgatory", "signals")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    signals: _containers.RepeatedCompositeFieldContainer[KeySignal]
    def __init__(self, purgatory: _Optional[str] = ..., signals: _Optional[_Iterable[_Union[KeySignal, _Mapping]]] = ...) -> None: ...

class BatchCheckAndCompleteResponse(_message.Message):
    __slots__ = ("completed", "completed_per_signal")
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_PER_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    completed: int
    completed_per_signal: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, completed: _Optional[int] = ..., completed_per_signal: _Optional[_Iterable[int]] = ...) -> None: ...

class ForceCompleteRequest(_message.Message):
    __slots__ = ("purgatory", "operation_id")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operation_id: str
    def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ...) -> None: ...

class ForceCompleteResponse(_message.Message):
    __slots__ = ("completed", "operation")
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    completed: bool
    operation: OperationStatus
    def __init__(self, completed: _Optional[bool] = ..., operation: _Optional[_Union[OperationStatus, _Mapping]] = ...) -> None: ...

class GetOperationRequest(_message.Message):
    __slots__ = ("purgatory", "operation_id")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operation_id: str
    def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ...) -> None: ...

class GetOperationResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: OperationStatus
    def __init__(self, operation: _Optional[_Union[OperationStatus, _Mapping]] = ...) -> None: ...

class SubscribeFilter(_message.Message):
    __slots__ = ("states", "keys", "operation_id_prefix")
    STATES_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[OperationState]
    keys: _containers.RepeatedScalarFieldContainer[str]
    operation_id_prefix: str
    def __init__(self, states: _Optional[_Iterable[_Union[OperationState, str]]] = ..., keys: _Optional[_Iterable[str]] = ..., operation_id_prefix: _Optional[str] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("purgatory", "after_sequence", "filter", "incarnation", "heartbeat_interval_ms", "group", "visibility_timeout_ms", "max_attempts", "prefetch", "selection", "backoff", "max_batch")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    after_sequence: int
    filter: SubscribeFilter
    incarnation: str
    heartbeat_interval_ms: int
    group: str
    visibility_timeout_ms: int
    max_attempts: int
    prefetch: int
    selection: GroupSelection
    backoff: RetryBackoff
    max_batch: int
    def __init__(self, purgatory: _Optional[str] = ..., after_sequence: _Optional[int] = ..., filter: _Optional[_Union[SubscribeFilter, _Mapping]] = ..., incarnation: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ..., group: _Optional[str] = ..., visibility_timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., prefetch: _Optional[int] = ..., selection: _Optional[_Union[GroupSelection, _Mapping]] = ..., backoff: _Optional[_Union[RetryBackoff, _Mapping]] = ..., max_batch: _Optional[int] = ...) -> None: ...

class GroupSelection(_message.Message):
    __slots__ = ("priorities", "ordering_key", "rate_limit")
    PRIORITIES_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    priorities: _containers.RepeatedCompositeFieldContainer[GroupPriority]
    ordering_key: GroupKeySource
    rate_limit: GroupRateLimit
    def __init__(self, priorities: _Optional[_Iterable[_Union[GroupPriority, _Mapping]]] = ..., ordering_key: _Optional[_Union[GroupKeySource, _Mapping]] = ..., rate_limit: _Optional[_Union[GroupRateLimit, _Mapping]] = ...) -> None: ...

class GroupPriority(_message.Message):
    __slots__ = ("operation_id_prefix", "key", "priority")
    OPERATION_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    operation_id_prefix: str
    key: str
    priority: int
    def __init__(self, operation_id_prefix: _Optional[str] = ..., key: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...

class GroupKeySource(_message.Message):
    __slots__ = ("first_key", "operation_id_separator")
    FIRST_KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_SEPARATOR_FIELD_NUMBER: _ClassVar[int]
    first_key: bool
    operation_id_separator: str
    def __init__(self, first_key: _Optional[bool] = ..., operation_id_separator: _Optional[str] = ...) -> None: ...

class GroupRateLimit(_message.Message):
    __slots__ = ("max", "window_ms", "per_key")
    MAX_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    PER_KEY_FIELD_NUMBER: _ClassVar[int]
    max: int
    window_ms: int
    per_key: GroupKeySource
    def __init__(self, max: _Optional[int] = ..., window_ms: _Optional[int] = ..., per_key: _Optional[_Union[GroupKeySource, _Mapping]] = ...) -> None: ...

class RetryBackoff(_message.Message):
    __slots__ = ("type", "delay_ms", "max_delay_ms", "jitter")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNSPECIFIED: _ClassVar[RetryBackoff.Type]
        TYPE_FIXED: _ClassVar[RetryBackoff.Type]
        TYPE_EXPONENTIAL: _ClassVar[RetryBackoff.Type]
    TYPE_UNSPECIFIED: RetryBackoff.Type
    TYPE_FIXED: RetryBackoff.Type
    TYPE_EXPONENTIAL: RetryBackoff.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    type: RetryBackoff.Type
    delay_ms: int
    max_delay_ms: int
    jitter: float
    def __init__(self, type: _Optional[_Union[RetryBackoff.Type, str]] = ..., delay_ms: _Optional[int] = ..., max_delay_ms: _Optional[int] = ..., jitter: _Optional[float] = ...) -> None: ...

class OperationEvent(_message.Message):
    __slots__ = ("sequence", "purgatory", "operation_id", "state", "keys", "payload", "result", "create_time_ms", "due_time_ms", "complete_time_ms", "traceparent", "heartbeat", "caught_up_sequence", "delivery_attempt", "lease_deadline_ms", "group", "dead_letter", "priority", "ordering_key", "batch")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    purgatory: str
    operation_id: str
    state: OperationState
    keys: _containers.RepeatedScalarFieldContainer[str]
    payload: bytes
    result: OperationResult
    create_time_ms: int
    due_time_ms: int
    complete_time_ms: int
    traceparent: str
    heartbeat: bool
    caught_up_sequence: int
    delivery_attempt: int
    lease_deadline_ms: int
    group: str
    dead_letter: bool
    priority: int
    ordering_key: str
    batch: _containers.RepeatedCompositeFieldContainer[OperationEvent]
    def __init__(self, sequence: _Optional[int] = ..., purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ..., state: _Optional[_Union[OperationState, str]] = ..., keys: _Optional[_Iterable[str]] = ..., payload: _Optional[bytes] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ..., create_time_ms: _Optional[int] = ..., due_time_ms: _Optional[int] = ..., complete_time_ms: _Optional[int] = ..., traceparent: _Optional[str] = ..., heartbeat: _Optional[bool] = ..., caught_up_sequence: _Optional[int] = ..., delivery_attempt: _Optional[int] = ..., lease_deadline_ms: _Optional[int] = ..., group: _Optional[str] = ..., dead_letter: _Optional[bool] = ..., priority: _Optional[int] = ..., ordering_key: _Optional[str] = ..., batch: _Optional[_Iterable[_Union[OperationEvent, _Mapping]]] = ...) -> None: ...

class JournaledOutcome(_message.Message):
    __slots__ = ("event", "condition", "timeout_ms", "requested_due_time_ms")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    event: OperationEvent
    condition: Condition
    timeout_ms: int
    requested_due_time_ms: int
    def __init__(self, event: _Optional[_Union[OperationEvent, _Mapping]] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., requested_due_time_ms: _Optional[int] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("request_id", "purgatory", "watches", "signals", "force_complete", "heartbeat_interval_ms", "session_id", "resume_after")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    WATCHES_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    FORCE_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    purgatory: str
    watches: _containers.RepeatedCompositeFieldContainer[OperationSpec]
    signals: _containers.RepeatedCompositeFieldContainer[KeySignal]
    force_complete: _containers.RepeatedScalarFieldContainer[str]
    heartbeat_interval_ms: int
    session_id: str
    resume_after: int
    def __init__(self, request_id: _Optional[int] = ..., purgatory: _Optional[str] = ..., watches: _Optional[_Iterable[_Union[OperationSpec, _Mapping]]] = ..., signals: _Optional[_Iterable[_Union[KeySignal, _Mapping]]] = ..., force_complete: _Optional[_Iterable[str]] = ..., heartbeat_interval_ms: _Optional[int] = ..., session_id: _Optional[str] = ..., resume_after: _Optional[int] = ...) -> None: ...

class SessionAck(_message.Message):
    __slots__ = ("request_id", "code", "message", "operations", "completed_per_signal", "force_completed")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_PER_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    FORCE_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    code: int
    message: str
    operations: _containers.RepeatedCompositeFieldContainer[OperationStatus]
    completed_per_signal: _containers.RepeatedScalarFieldContainer[int]
    force_completed: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, request_id: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., operations: _Optional[_Iterable[_Union[OperationStatus, _Mapping]]] = ..., completed_per_signal: _Optional[_Iterable[int]] = ..., force_completed: _Optional[_Iterable[bool]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("ack", "outcomes", "heartbeat", "server_time_ms", "delivered_through")
    ACK_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    ack: SessionAck
    outcomes: _containers.RepeatedCompositeFieldContainer[OperationEvent]
    heartbeat: bool
    server_time_ms: int
    delivered_through: int
    def __init__(self, ack: _Optional[_Union[SessionAck, _Mapping]] = ..., outcomes: _Optional[_Iterable[_Union[OperationEvent, _Mapping]]] = ..., heartbeat: _Optional[bool] = ..., server_time_ms: _Optional[int] = ..., delivered_through: _Optional[int] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("purgatory", "operation_ids", "key", "operation_id_prefix")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operation_ids: OperationIds
    key: str
    operation_id_prefix: str
    def __init__(self, purgatory: _Optional[str] = ..., operation_ids: _Optional[_Union[OperationIds, _Mapping]] = ..., key: _Optional[str] = ..., operation_id_prefix: _Optional[str] = ...) -> None: ...

class OperationIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: _containers.RepeatedCompositeFieldContainer[OperationStatus]
    def __init__(self, cancelled: _Optional[_Iterable[_Union[OperationStatus, _Mapping]]] = ...) -> None: ...

class RescheduleRequest(_message.Message):
    __slots__ = ("purgatory", "operation_id", "timeout_ms", "due_time_ms")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    operation_id: str
    timeout_ms: int
    due_time_ms: int
    def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., due_time_ms: _Optional[int] = ...) -> None: ...

class RescheduleResponse(_message.Message):
    __slots__ = ("operation",)
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    operation: OperationStatus
    def __init__(self, operation: _Optional[_Union[OperationStatus, _Mapping]] = ...) -> None: ...

class ScheduleTemplate(_message.Message):
    __slots__ = ("keys", "condition", "payload")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    condition: Condition
    payload: bytes
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., condition: _Optional[_Union[Condition, _Mapping]] = ..., payload: _Optional[bytes] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ("schedule_id", "every_ms", "cron", "time_zone", "template")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    EVERY_MS_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    every_ms: int
    cron: str
    time_zone: str
    template: ScheduleTemplate
    def __init__(self, schedule_id: _Optional[str] = ..., every_ms: _Optional[int] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., template: _Optional[_Union[ScheduleTemplate, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("spec", "next_operation_id", "next_fire_time_ms", "update_time_ms")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    spec: ScheduleSpec
    next_operation_id: str
    next_fire_time_ms: int
    update_time_ms: int
    def __init__(self, spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., next_operation_id: _Optional[str] = ..., next_fire_time_ms: _Optional[int] = ..., update_time_ms: _Optional[int] = ...) -> None: ...

class UpsertScheduleRequest(_message.Message):
    __slots__ = ("purgatory", "schedule")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    schedule: ScheduleSpec
    def __init__(self, purgatory: _Optional[str] = ..., schedule: _Optional[_Union[ScheduleSpec, _Mapping]] = ...) -> None: ...

class UpsertScheduleResponse(_message.Message):
    __slots__ = ("schedule", "created", "changed")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    created: bool
    changed: bool
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., created: _Optional[bool] = ..., changed: _Optional[bool] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("purgatory", "schedule_id")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    schedule_id: str
    def __init__(self, purgatory: _Optional[str] = ..., schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: OperationStatus
    def __init__(self, cancelled: _Optional[_Union[OperationStatus, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("purgatory",)
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    def __init__(self, purgatory: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules",)
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("purgatory", "group", "sequence", "attempt")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    sequence: int
    attempt: int
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequence: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExtendLeaseRequest(_message.Message):
    __slots__ = ("purgatory", "group", "sequence", "attempt", "visibility_timeout_ms")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    sequence: int
    attempt: int
    visibility_timeout_ms: int
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., visibility_timeout_ms: _Optional[int] = ...) -> None: ...

class ExtendLeaseResponse(_message.Message):
    __slots__ = ("lease_deadline_ms",)
    LEASE_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    lease_deadline_ms: int
    def __init__(self, lease_deadline_ms: _Optional[int] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("purgatory", "group", "after_sequence", "page_size")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    after_sequence: int
    page_size: int
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., after_sequence: _Optional[int] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("dead_letters", "next_after_sequence")
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[OperationEvent]
    next_after_sequence: int
    def __init__(self, dead_letters: _Optional[_Iterable[_Union[OperationEvent, _Mapping]]] = ..., next_after_sequence: _Optional[int] = ...) -> None: ...

class RedriveRequest(_message.Message):
    __slots__ = ("purgatory", "group", "sequences")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    sequences: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequences: _Optional[_Iterable[int]] = ...) -> None: ...

class RedriveResponse(_message.Message):
    __slots__ = ("redriven",)
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, redriven: _Optional[_Iterable[int]] = ...) -> None: ...

class DiscardDeadLettersRequest(_message.Message):
    __slots__ = ("purgatory", "group", "sequences", "all")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    sequences: _containers.RepeatedScalarFieldContainer[int]
    all: bool
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequences: _Optional[_Iterable[int]] = ..., all: _Optional[bool] = ...) -> None: ...

class DiscardDeadLettersResponse(_message.Message):
    __slots__ = ("discarded",)
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    discarded: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, discarded: _Optional[_Iterable[int]] = ...) -> None: ...

class WorkerGroup(_message.Message):
    __slots__ = ("name", "visibility_timeout_ms", "max_attempts", "ready", "leased", "dead_letters", "members", "last_sequence", "backoff", "retrying", "selection")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    RETRYING_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    visibility_timeout_ms: int
    max_attempts: int
    ready: int
    leased: int
    dead_letters: int
    members: int
    last_sequence: int
    backoff: RetryBackoff
    retrying: int
    selection: GroupSelection
    def __init__(self, name: _Optional[str] = ..., visibility_timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., ready: _Optional[int] = ..., leased: _Optional[int] = ..., dead_letters: _Optional[int] = ..., members: _Optional[int] = ..., last_sequence: _Optional[int] = ..., backoff: _Optional[_Union[RetryBackoff, _Mapping]] = ..., retrying: _Optional[int] = ..., selection: _Optional[_Union[GroupSelection, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("purgatory",)
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    def __init__(self, purgatory: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[WorkerGroup]
    def __init__(self, groups: _Optional[_Iterable[_Union[WorkerGroup, _Mapping]]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("purgatory", "group")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ("dropped",)
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    dropped: int
    def __init__(self, dropped: _Optional[int] = ...) -> None: ...

class NackRequest(_message.Message):
    __slots__ = ("purgatory", "group", "sequence", "attempt", "delay_ms", "dead_letter")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    sequence: int
    attempt: int
    delay_ms: int
    dead_letter: bool
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., delay_ms: _Optional[int] = ..., dead_letter: _Optional[bool] = ...) -> None: ...

class NackResponse(_message.Message):
    __slots__ = ("dead_letter", "redeliver_at_ms")
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    dead_letter: bool
    redeliver_at_ms: int
    def __init__(self, dead_letter: _Optional[bool] = ..., redeliver_at_ms: _Optional[int] = ...) -> None: ...

class AckBatchEntry(_message.Message):
    __slots__ = ("sequence", "attempt", "nack", "delay_ms", "dead_letter")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    attempt: int
    nack: bool
    delay_ms: int
    dead_letter: bool
    def __init__(self, sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., nack: _Optional[bool] = ..., delay_ms: _Optional[int] = ..., dead_letter: _Optional[bool] = ...) -> None: ...

class AckBatchRequest(_message.Message):
    __slots__ = ("purgatory", "group", "entries")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    entries: _containers.RepeatedCompositeFieldContainer[AckBatchEntry]
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AckBatchEntry, _Mapping]]] = ...) -> None: ...

class AckBatchResult(_message.Message):
    __slots__ = ("sequence", "code", "message", "dead_letter", "redeliver_at_ms")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    code: int
    message: str
    dead_letter: bool
    redeliver_at_ms: int
    def __init__(self, sequence: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., dead_letter: _Optional[bool] = ..., redeliver_at_ms: _Optional[int] = ...) -> None: ...

class AckBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AckBatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AckBatchResult, _Mapping]]] = ...) -> None: ...

class AckStreamRequest(_message.Message):
    __slots__ = ("purgatory", "group", "entries")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    group: str
    entries: _containers.RepeatedCompositeFieldContainer[AckBatchEntry]
    def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AckBatchEntry, _Mapping]]] = ...) -> None: ...

class AckStreamResponse(_message.Message):
    __slots__ = ("results", "code", "message")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AckBatchResult]
    code: int
    message: str
    def __init__(self, results: _Optional[_Iterable[_Union[AckBatchResult, _Mapping]]] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ListOperationsFilter(_message.Message):
    __slots__ = ("key", "operation_id_prefix", "states", "due_after_ms", "due_before_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    DUE_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    key: str
    operation_id_prefix: str
    states: _containers.RepeatedScalarFieldContainer[OperationState]
    due_after_ms: int
    due_before_ms: int
    def __init__(self, key: _Optional[str] = ..., operation_id_prefix: _Optional[str] = ..., states: _Optional[_Iterable[_Union[OperationState, str]]] = ..., due_after_ms: _Optional[int] = ..., due_before_ms: _Optional[int] = ...) -> None: ...

class ListOperationsRequest(_message.Message):
    __slots__ = ("purgatory", "filter", "page_token", "page_size")
    PURGATORY_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    purgatory: str
    filter: ListOperationsFilter
    page_token: str
    page_size: int
    def __init__(self, purgatory: _Optional[str] = ..., filter: _Optional[_Union[ListOperationsFilter, _Mapping]] = ..., page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListOperationsResponse(_message.Message):
    __slots__ = ("operations", "next_page_token")
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    operations: _containers.RepeatedCompositeFieldContainer[OperationStatus]
    next_page_token: str
    def __init__(self, operations: _Optional[_Iterable[_Union[OperationStatus, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
