"""Python clients for the Purgatory gRPC service.

``PurgatoryClient`` (blocking) and ``AsyncPurgatoryClient`` (asyncio) have the same
methods; results are frozen dataclasses from ``purgatory_client._models`` re-exported
here, errors come from the single tree in :mod:`purgatory_client.errors`.
"""

from purgatory_client._async import AsyncPurgatoryClient
from purgatory_client._base import ResumePolicy
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
from purgatory_client._sync import PurgatoryClient
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
    "AlreadyExistsError",
    "AsyncPurgatoryClient",
    "BatchSignalResult",
    "CancelledError",
    "Condition",
    "ConditionKind",
    "DeadlineExceededError",
    "Event",
    "FailedPreconditionError",
    "ForceCompleteResult",
    "InvalidArgumentError",
    "NotFoundError",
    "OperationResult",
    "OperationSpec",
    "OperationState",
    "OperationStatus",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PurgatoryClient",
    "PurgatoryConfig",
    "PurgatoryError",
    "PurgatoryInfo",
    "ResourceExhaustedError",
    "ResumePolicy",
    "ServerError",
    "Signal",
    "SlowSubscriberError",
    "StreamResetError",
    "UnauthenticatedError",
    "UnavailableError",
]
