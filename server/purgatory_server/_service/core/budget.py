"""Server-wide capacity shared by every purgatory of one server.

Per-purgatory limits (``max_pending``, ``retained_events``) do not bound the server: 256
purgatories of a million pending operations each would. :class:`ServerBudget` counts,
over all purgatories, the pending operations, the payload bytes they hold and the
retained-event slots configured, and refuses new ones past ``max_total_pending``,
``max_pending_payload_bytes`` and ``max_total_retained_events`` with RESOURCE_EXHAUSTED:
unlike a malformed request, this capacity frees up as operations end or purgatories are
deleted, so backing off and retrying is the right reaction. A single request asking for
more than a limit in total can never fit, whatever the load: INVALID_ARGUMENT.

Recovered operations (durable purgatories at start-up) are counted but never refused:
what a restart brings back is kept even beyond a limit, and new operations are refused
until enough have ended.

Thread-safety: loop-confined, like the registry and purgatories that update it.
"""

from __future__ import annotations

from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.errors import InvalidArgument, LimitExceeded

__all__ = ["ServerBudget"]


class ServerBudget:
    __slots__ = ("_limits", "payload_bytes", "pending", "retained_events")

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.pending = 0
        self.payload_bytes = 0
        self.retained_events = 0

    def reserve(self, operations: int, payload_bytes: int, field: str = "operations") -> None:
        """Count ``operations`` new pending operations; LimitExceeded past a budget, or
        InvalidArgument (naming ``field``) for a request that could never fit one."""
        limits = self._limits
        if operations > limits.max_total_pending:
            raise InvalidArgument(
                field,
                f"{operations} new operations in one request can never fit: "
                f"max_total_pending is {limits.max_total_pending} (send smaller batches)",
            )
        if payload_bytes > limits.max_pending_payload_bytes:
            raise InvalidArgument(
                field,
                f"{payload_bytes} payload bytes in one request can never fit: "
                f"max_pending_payload_bytes is {limits.max_pending_payload_bytes}",
            )
        if self.pending + operations > limits.max_total_pending:
            raise LimitExceeded(
                f"the server has {self.pending} pending operations; "
                f"max_total_pending is {limits.max_total_pending}"
            )
        if self.payload_bytes + payload_bytes > limits.max_pending_payload_bytes:
            raise LimitExceeded(
                f"pending operations hold {self.payload_bytes} payload bytes; "
                f"max_pending_payload_bytes is {limits.max_pending_payload_bytes}"
            )
        self.pending += operations
        self.payload_bytes += payload_bytes

    def restored(self, payload_bytes: int) -> None:
        """Count a recovered operation (never refused; see module docstring)."""
        self.pending += 1
        self.payload_bytes += payload_bytes

    def release(self, payload_bytes: int) -> None:
        """An operation stopped being pending."""
        self.pending -= 1
        self.payload_bytes -= payload_bytes

    def release_many(self, operations: int, payload_bytes: int) -> None:
        """``operations`` operations holding ``payload_bytes`` stopped being pending."""
        self.pending -= operations
        self.payload_bytes -= payload_bytes

    def reserve_retained(self, events: int) -> None:
        limits = self._limits
        if self.retained_events + events > limits.max_total_retained_events:
            raise LimitExceeded(
                f"purgatories retain up to {self.retained_events} events together; "
                f"max_total_retained_events is {limits.max_total_retained_events}"
            )
        self.retained_events += events

    def release_retained(self, events: int) -> None:
        self.retained_events -= events
