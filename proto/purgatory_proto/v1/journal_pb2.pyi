from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JournalRecord(_message.Message):
    __slots__ = ("registered", "signal", "outcome", "carried_operation", "carried_key_value", "compaction", "rescheduled", "group_state", "group_delivered", "group_settled", "schedule_upserted", "schedule_deleted", "group_retry")
    class OperationRegistered(_message.Message):
        __slots__ = ("purgatory", "operation_id", "keys", "timeout_ms", "condition", "payload", "due_wall_ms", "created_wall_ms", "requested_due_wall_ms", "extend_on_resend", "max_extend_ms")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
        KEYS_FIELD_NUMBER: _ClassVar[int]
        TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        CONDITION_FIELD_NUMBER: _ClassVar[int]
        PAYLOAD_FIELD_NUMBER: _ClassVar[int]
        DUE_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        CREATED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        REQUESTED_DUE_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        EXTEND_ON_RESEND_FIELD_NUMBER: _ClassVar[int]
        MAX_EXTEND_MS_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        operation_id: str
        keys: _containers.RepeatedScalarFieldContainer[str]
        timeout_ms: int
        condition: bytes
        payload: bytes
        due_wall_ms: int
        created_wall_ms: int
        requested_due_wall_ms: int
        extend_on_resend: bool
        max_extend_ms: int
        def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ..., condition: _Optional[bytes] = ..., payload: _Optional[bytes] = ..., due_wall_ms: _Optional[int] = ..., created_wall_ms: _Optional[int] = ..., requested_due_wall_ms: _Optional[int] = ..., extend_on_resend: _Optional[bool] = ..., max_extend_ms: _Optional[int] = ...) -> None: ...
    class SignalApplied(_message.Message):
        __slots__ = ("purgatory", "key", "amount", "value", "source", "data", "applied_wall_ms", "attributes")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        AMOUNT_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        APPLIED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        key: str
        amount: int
        value: int
        source: str
        data: bytes
        applied_wall_ms: int
        attributes: bytes
        def __init__(self, purgatory: _Optional[str] = ..., key: _Optional[str] = ..., amount: _Optional[int] = ..., value: _Optional[int] = ..., source: _Optional[str] = ..., data: _Optional[bytes] = ..., applied_wall_ms: _Optional[int] = ..., attributes: _Optional[bytes] = ...) -> None: ...
    class Outcome(_message.Message):
        __slots__ = ("operation_id", "state", "result", "sequence", "completed_wall_ms", "lateness_ms", "purgatory")
        class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            STATE_UNSPECIFIED: _ClassVar[JournalRecord.Outcome.State]
            STATE_WATCHING: _ClassVar[JournalRecord.Outcome.State]
            STATE_COMPLETED: _ClassVar[JournalRecord.Outcome.State]
            STATE_EXPIRED: _ClassVar[JournalRecord.Outcome.State]
            STATE_FORCE_COMPLETED: _ClassVar[JournalRecord.Outcome.State]
            STATE_CANCELLED: _ClassVar[JournalRecord.Outcome.State]
        STATE_UNSPECIFIED: JournalRecord.Outcome.State
        STATE_WATCHING: JournalRecord.Outcome.State
        STATE_COMPLETED: JournalRecord.Outcome.State
        STATE_EXPIRED: JournalRecord.Outcome.State
        STATE_FORCE_COMPLETED: JournalRecord.Outcome.State
        STATE_CANCELLED: JournalRecord.Outcome.State
        OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        RESULT_FIELD_NUMBER: _ClassVar[int]
        SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        COMPLETED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        operation_id: str
        state: JournalRecord.Outcome.State
        result: bytes
        sequence: int
        completed_wall_ms: int
        lateness_ms: int
        purgatory: str
        def __init__(self, operation_id: _Optional[str] = ..., state: _Optional[_Union[JournalRecord.Outcome.State, str]] = ..., result: _Optional[bytes] = ..., sequence: _Optional[int] = ..., completed_wall_ms: _Optional[int] = ..., lateness_ms: _Optional[int] = ..., purgatory: _Optional[str] = ...) -> None: ...
    class CarriedOperation(_message.Message):
        __slots__ = ("registration", "progress", "source_index")
        REGISTRATION_FIELD_NUMBER: _ClassVar[int]
        PROGRESS_FIELD_NUMBER: _ClassVar[int]
        SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
        registration: JournalRecord.OperationRegistered
        progress: _containers.RepeatedCompositeFieldContainer[JournalRecord.SignalApplied]
        source_index: int
        def __init__(self, registration: _Optional[_Union[JournalRecord.OperationRegistered, _Mapping]] = ..., progress: _Optional[_Iterable[_Union[JournalRecord.SignalApplied, _Mapping]]] = ..., source_index: _Optional[int] = ...) -> None: ...
    class CarriedKeyValue(_message.Message):
        __slots__ = ("purgatory", "key", "value", "source_index")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        key: str
        value: int
        source_index: int
        def __init__(self, purgatory: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[int] = ..., source_index: _Optional[int] = ...) -> None: ...
    class CompactionCheckpoint(_message.Message):
        __slots__ = ("dropped_before_index", "carried_operations", "carried_keys", "written_wall_ms", "last_sequence")
        DROPPED_BEFORE_INDEX_FIELD_NUMBER: _ClassVar[int]
        CARRIED_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
        CARRIED_KEYS_FIELD_NUMBER: _ClassVar[int]
        WRITTEN_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        dropped_before_index: int
        carried_operations: int
        carried_keys: int
        written_wall_ms: int
        last_sequence: int
        def __init__(self, dropped_before_index: _Optional[int] = ..., carried_operations: _Optional[int] = ..., carried_keys: _Optional[int] = ..., written_wall_ms: _Optional[int] = ..., last_sequence: _Optional[int] = ...) -> None: ...
    class OperationRescheduled(_message.Message):
        __slots__ = ("purgatory", "operation_id", "due_wall_ms")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
        DUE_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        operation_id: str
        due_wall_ms: int
        def __init__(self, purgatory: _Optional[str] = ..., operation_id: _Optional[str] = ..., due_wall_ms: _Optional[int] = ...) -> None: ...
    class ScheduleUpserted(_message.Message):
        __slots__ = ("purgatory", "schedule_id", "definition", "upserted_wall_ms", "carried", "source_index")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
        DEFINITION_FIELD_NUMBER: _ClassVar[int]
        UPSERTED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        CARRIED_FIELD_NUMBER: _ClassVar[int]
        SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        schedule_id: str
        definition: bytes
        upserted_wall_ms: int
        carried: bool
        source_index: int
        def __init__(self, purgatory: _Optional[str] = ..., schedule_id: _Optional[str] = ..., definition: _Optional[bytes] = ..., upserted_wall_ms: _Optional[int] = ..., carried: _Optional[bool] = ..., source_index: _Optional[int] = ...) -> None: ...
    class ScheduleDeleted(_message.Message):
        __slots__ = ("purgatory", "schedule_id", "deleted_wall_ms")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
        DELETED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        schedule_id: str
        deleted_wall_ms: int
        def __init__(self, purgatory: _Optional[str] = ..., schedule_id: _Optional[str] = ..., deleted_wall_ms: _Optional[int] = ...) -> None: ...
    class GroupState(_message.Message):
        __slots__ = ("purgatory", "group", "visibility_timeout_ms", "max_attempts", "last_sequence", "entries", "source_index", "deleted", "backoff_type", "backoff_delay_ms", "backoff_max_delay_ms", "backoff_jitter", "selection", "rate_window_ms", "rate_windows")
        class Entry(_message.Message):
            __slots__ = ("outcome", "attempts", "dead", "redriven_at", "lease_deadline_wall_ms", "retry_at_wall_ms")
            OUTCOME_FIELD_NUMBER: _ClassVar[int]
            ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
            DEAD_FIELD_NUMBER: _ClassVar[int]
            REDRIVEN_AT_FIELD_NUMBER: _ClassVar[int]
            LEASE_DEADLINE_WALL_MS_FIELD_NUMBER: _ClassVar[int]
            RETRY_AT_WALL_MS_FIELD_NUMBER: _ClassVar[int]
            outcome: JournalRecord.Outcome
            attempts: int
            dead: bool
            redriven_at: int
            lease_deadline_wall_ms: int
            retry_at_wall_ms: int
            def __init__(self, outcome: _Optional[_Union[JournalRecord.Outcome, _Mapping]] = ..., attempts: _Optional[int] = ..., dead: _Optional[bool] = ..., redriven_at: _Optional[int] = ..., lease_deadline_wall_ms: _Optional[int] = ..., retry_at_wall_ms: _Optional[int] = ...) -> None: ...
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        GROUP_FIELD_NUMBER: _ClassVar[int]
        VISIBILITY_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
        LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
        DELETED_FIELD_NUMBER: _ClassVar[int]
        BACKOFF_TYPE_FIELD_NUMBER: _ClassVar[int]
        BACKOFF_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
        BACKOFF_MAX_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
        BACKOFF_JITTER_FIELD_NUMBER: _ClassVar[int]
        SELECTION_FIELD_NUMBER: _ClassVar[int]
        RATE_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
        RATE_WINDOWS_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        group: str
        visibility_timeout_ms: int
        max_attempts: int
        last_sequence: int
        entries: _containers.RepeatedCompositeFieldContainer[JournalRecord.GroupState.Entry]
        source_index: int
        deleted: bool
        backoff_type: int
        backoff_delay_ms: int
        backoff_max_delay_ms: int
        backoff_jitter: float
        selection: bytes
        rate_window_ms: int
        rate_windows: _containers.RepeatedCompositeFieldContainer[JournalRecord.RateWindow]
        def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., visibility_timeout_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., last_sequence: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[JournalRecord.GroupState.Entry, _Mapping]]] = ..., source_index: _Optional[int] = ..., deleted: _Optional[bool] = ..., backoff_type: _Optional[int] = ..., backoff_delay_ms: _Optional[int] = ..., backoff_max_delay_ms: _Optional[int] = ..., backoff_jitter: _Optional[float] = ..., selection: _Optional[bytes] = ..., rate_window_ms: _Optional[int] = ..., rate_windows: _Optional[_Iterable[_Union[JournalRecord.RateWindow, _Mapping]]] = ...) -> None: ...
    class RateWindow(_message.Message):
        __slots__ = ("key", "delivered_wall_ms")
        KEY_FIELD_NUMBER: _ClassVar[int]
        DELIVERED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        key: str
        delivered_wall_ms: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, key: _Optional[str] = ..., delivered_wall_ms: _Optional[_Iterable[int]] = ...) -> None: ...
    class GroupDelivered(_message.Message):
        __slots__ = ("purgatory", "group", "sequence", "attempt", "lease_deadline_wall_ms", "delivered_wall_ms", "rate_key")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        GROUP_FIELD_NUMBER: _ClassVar[int]
        SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        ATTEMPT_FIELD_NUMBER: _ClassVar[int]
        LEASE_DEADLINE_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        DELIVERED_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        RATE_KEY_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        group: str
        sequence: int
        attempt: int
        lease_deadline_wall_ms: int
        delivered_wall_ms: int
        rate_key: str
        def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., lease_deadline_wall_ms: _Optional[int] = ..., delivered_wall_ms: _Optional[int] = ..., rate_key: _Optional[str] = ...) -> None: ...
    class GroupSettled(_message.Message):
        __slots__ = ("purgatory", "group", "sequences", "disposition")
        class Disposition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            DISPOSITION_UNSPECIFIED: _ClassVar[JournalRecord.GroupSettled.Disposition]
            DISPOSITION_ACKED: _ClassVar[JournalRecord.GroupSettled.Disposition]
            DISPOSITION_DEAD_LETTERED: _ClassVar[JournalRecord.GroupSettled.Disposition]
            DISPOSITION_REDRIVEN: _ClassVar[JournalRecord.GroupSettled.Disposition]
        DISPOSITION_UNSPECIFIED: JournalRecord.GroupSettled.Disposition
        DISPOSITION_ACKED: JournalRecord.GroupSettled.Disposition
        DISPOSITION_DEAD_LETTERED: JournalRecord.GroupSettled.Disposition
        DISPOSITION_REDRIVEN: JournalRecord.GroupSettled.Disposition
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        GROUP_FIELD_NUMBER: _ClassVar[int]
        SEQUENCES_FIELD_NUMBER: _ClassVar[int]
        DISPOSITION_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        group: str
        sequences: _containers.RepeatedScalarFieldContainer[int]
        disposition: JournalRecord.GroupSettled.Disposition
        def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequences: _Optional[_Iterable[int]] = ..., disposition: _Optional[_Union[JournalRecord.GroupSettled.Disposition, str]] = ...) -> None: ...
    class GroupRetry(_message.Message):
        __slots__ = ("purgatory", "group", "sequence", "attempt", "retry_at_wall_ms")
        PURGATORY_FIELD_NUMBER: _ClassVar[int]
        GROUP_FIELD_NUMBER: _ClassVar[int]
        SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        ATTEMPT_FIELD_NUMBER: _ClassVar[int]
        RETRY_AT_WALL_MS_FIELD_NUMBER: _ClassVar[int]
        purgatory: str
        group: str
        sequence: int
        attempt: int
        retry_at_wall_ms: int
        def __init__(self, purgatory: _Optional[str] = ..., group: _Optional[str] = ..., sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., retry_at_wall_ms: _Optional[int] = ...) -> None: ...
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CARRIED_OPERATION_FIELD_NUMBER: _ClassVar[int]
    CARRIED_KEY_VALUE_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    RESCHEDULED_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    GROUP_SETTLED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_UPSERTED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_DELETED_FIELD_NUMBER: _ClassVar[int]
    GROUP_RETRY_FIELD_NUMBER: _ClassVar[int]
    registered: JournalRecord.OperationRegistered
    signal: JournalRecord.SignalApplied
    outcome: JournalRecord.Outcome
    carried_operation: JournalRecord.CarriedOperation
    carried_key_value: JournalRecord.CarriedKeyValue
    compaction: JournalRecord.CompactionCheckpoint
    rescheduled: JournalRecord.OperationRescheduled
    group_state: JournalRecord.GroupState
    group_delivered: JournalRecord.GroupDelivered
    group_settled: JournalRecord.GroupSettled
    schedule_upserted: JournalRecord.ScheduleUpserted
    schedule_deleted: JournalRecord.ScheduleDeleted
    group_retry: JournalRecord.GroupRetry
    def __init__(self, registered: _Optional[_Union[JournalRecord.OperationRegistered, _Mapping]] = ..., signal: _Optional[_Union[JournalRecord.SignalApplied, _Mapping]] = ..., outcome: _Optional[_Union[JournalRecord.Outcome, _Mapping]] = ..., carried_operation: _Optional[_Union[JournalRecord.CarriedOperation, _Mapping]] = ..., carried_key_value: _Optional[_Union[JournalRecord.CarriedKeyValue, _Mapping]] = ..., compaction: _Optional[_Union[JournalRecord.CompactionCheckpoint, _Mapping]] = ..., rescheduled: _Optional[_Union[JournalRecord.OperationRescheduled, _Mapping]] = ..., group_state: _Optional[_Union[JournalRecord.GroupState, _Mapping]] = ..., group_delivered: _Optional[_Union[JournalRecord.GroupDelivered, _Mapping]] = ..., group_settled: _Optional[_Union[JournalRecord.GroupSettled, _Mapping]] = ..., schedule_upserted: _Optional[_Union[JournalRecord.ScheduleUpserted, _Mapping]] = ..., schedule_deleted: _Optional[_Union[JournalRecord.ScheduleDeleted, _Mapping]] = ..., group_retry: _Optional[_Union[JournalRecord.GroupRetry, _Mapping]] = ...) -> None: ...
