"""A worker group's retry backoff on the wire: ``RetryBackoff`` checked and converted.

Thread safety: pure functions.
"""

from __future__ import annotations

import math

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.groups.backoff import MAX_RETRY_DELAY_MS, BackoffType, RetryBackoff
from purgatory_server._service.model.errors import InvalidArgument

__all__ = ["backoff_from_proto", "backoff_to_proto"]


def backoff_from_proto(field: str, msg: pb.RetryBackoff) -> RetryBackoff:
    """A join's backoff, checked: type set, 1 ms <= delay_ms <= max_delay_ms <= 12 h,
    0 <= jitter <= 1."""
    if int(msg.type) not in (BackoffType.FIXED, BackoffType.EXPONENTIAL):
        raise InvalidArgument(f"{field}.type", "must be TYPE_FIXED or TYPE_EXPONENTIAL")
    if not 1 <= msg.delay_ms <= MAX_RETRY_DELAY_MS:
        raise InvalidArgument(
            f"{field}.delay_ms", f"{msg.delay_ms} is outside [1, {MAX_RETRY_DELAY_MS}]"
        )
    most = msg.max_delay_ms or MAX_RETRY_DELAY_MS
    if not msg.delay_ms <= most <= MAX_RETRY_DELAY_MS:
        raise InvalidArgument(
            f"{field}.max_delay_ms",
            f"{msg.max_delay_ms} is outside [delay_ms, {MAX_RETRY_DELAY_MS}] (0: the most)",
        )
    if not (math.isfinite(msg.jitter) and 0.0 <= msg.jitter <= 1.0):
        raise InvalidArgument(f"{field}.jitter", f"{msg.jitter!r:.20} is outside [0, 1]")
    return RetryBackoff(BackoffType(msg.type), msg.delay_ms, most, msg.jitter)


def backoff_to_proto(backoff: RetryBackoff) -> pb.RetryBackoff:
    return pb.RetryBackoff(
        type=int(backoff.type),  # type: ignore[arg-type]
        delay_ms=backoff.delay_ms,
        max_delay_ms=backoff.max_delay_ms,
        jitter=backoff.jitter,
    )
