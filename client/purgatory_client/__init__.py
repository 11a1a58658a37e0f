"""Python clients for the Purgatory gRPC service.

``PurgatoryClient`` (blocking) and ``AsyncPurgatoryClient`` (asyncio) have the same
methods: the blocking client is generated from the asyncio one (``client/generate_sync.py``;
the layout is in :mod:`purgatory_client._base`). Results are frozen dataclasses from
``purgatory_client._models`` re-exported here, errors come from the single tree in
:mod:`purgatory_client.errors`. ``session()`` opens the streaming Session RPC;
``watch_many()`` rides it; :class:`BatchingDispatcher` and
:class:`AsyncBatchingDispatcher` are Eureka's task batcher over it.
"""

from purgatory_client._async import AsyncPurgatoryClient
from purgatory_client._async_session import AsyncSession
from purgatory_client._batcher import (
    DispatcherConfig,
    DispatcherCounters,
    ProcessingResult,
    TaskExpiredError,
    TaskOverflowError,
)
from purgatory_client._dispatch_tasks import ForceCompleteTask, SignalTask, WatchTask
from purgatory_client._groups_base import (
    AckEntry,
    AckResult,
    AsyncDelivery,
    DeadLetterPage,
    Delivery,
    FirstKey,
    GroupInfo,
    GroupPriority,
    GroupRateLimit,
    GroupSelection,
    IdPrefix,
    NackResult,
    RetryBackoff,
)
from purgatory_client._listing import OperationPage
from purgatory_client._models import (
    BatchSignalResult,
    Condition,
    ConditionKind,
    Event,
    ForceCompleteResult,
    OperationResult,
    OperationSpec,
    OperationState,
    OperationStatus,
    PurgatoryConfig,
    PurgatoryInfo,
    Signal,
)
from purgatory_client._resume import ResumePolicy
from purgatory_client._schedules import Schedule, ScheduleUpsert
from purgatory_client._session_base import SessionAck
from purgatory_client._sync import PurgatoryClient
from purgatory_client._sync_session import SyncSession
from purgatory_client.async_dispatcher import AsyncBatchingDispatcher, AsyncSessionTransport
from purgatory_client.dispatcher import BatchingDispatcher, SessionTransport
from purgatory_client.errors import (
    AlreadyExistsError,
    CancelledError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PurgatoryError,
    ResourceExhaustedError,
    ServerError,
    SlowSubscriberError,
    StreamResetError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = [
    "AckEntry",
    "AckResult",
    "AlreadyExistsError",
    "AsyncBatchingDispatcher",
    "AsyncDelivery",
    "AsyncPurgatoryClient",
    "AsyncSession",
    "AsyncSessionTransport",
    "BatchSignalResult",
    "BatchingDispatcher",
    "CancelledError",
    "Condition",
    "ConditionKind",
    "DeadLetterPage",
    "DeadlineExceededError",
    "Delivery",
    "DispatcherConfig",
    "DispatcherCounters",
    "Event",
    "FailedPreconditionError",
    "FirstKey",
    "ForceCompleteResult",
    "ForceCompleteTask",
    "GroupInfo",
    "GroupPriority",
    "GroupRateLimit",
    "GroupSelection",
    "IdPrefix",
    "InvalidArgumentError",
    "NackResult",
    "NotFoundError",
    "OperationPage",
    "OperationResult",
    "OperationSpec",
    "OperationState",
    "OperationStatus",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ProcessingResult",
    "PurgatoryClient",
    "PurgatoryConfig",
    "PurgatoryError",
    "PurgatoryInfo",
    "ResourceExhaustedError",
    "ResumePolicy",
    "RetryBackoff",
    "Schedule",
    "ScheduleUpsert",
    "ServerError",
    "SessionAck",
    "SessionTransport",
    "Signal",
    "SignalTask",
    "SlowSubscriberError",
    "StreamResetError",
    "SyncSession",
    "TaskExpiredError",
    "TaskOverflowError",
    "UnauthenticatedError",
    "UnavailableError",
    "WatchTask",
]
