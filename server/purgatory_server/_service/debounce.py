"""Debounce: a re-send of a pending operation pushes its deadline back (issue 16, item 1).

An operation registered with ``extend_on_resend`` moves its deadline to *now + timeout_ms*
each time its id is registered again (same definition) while it is pending, like
re-arming a debounce timer; ``max_extend_ms`` (0: none) caps how far: never past
``create_time_ms + max_extend_ms``, so a steady stream of re-sends cannot keep it alive
forever. The policy belongs to the operation and is fixed at its creation: a re-send is
the same operation whatever options it carries (they are not part of the definition
that must match), so a producer that re-sends the same request always gets the same
behaviour. A deadline is only ever pushed later by a re-send, never earlier (an explicit
Reschedule may have moved it further; the cap then stops further pushes).

The move itself is the journaled Reschedule path (:meth:`RemoteOperation.reschedule` and
``Journal.on_rescheduled``), so it is atomic against expiry and survives a restart; the
policy is journaled with the registration.

Only relative timeouts debounce: an absolute ``due_time_ms`` does not move when re-sent,
so asking for both is INVALID_ARGUMENT, as is a cap shorter than the timeout (the first
deadline would already break it) or longer than the server's ``max_timeout_ms``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from purgatory_server._service.config import Limits
from purgatory_server._service.errors import InvalidArgument
from purgatory_server._service.operation import OperationDefinition

if TYPE_CHECKING:
    from purgatory_server._service.purgatory import OperationRequest

__all__ = ["extended_due", "with_debounce"]


def with_debounce(
    prefix: str, msg: Any, request: OperationRequest, limits: Limits
) -> OperationRequest:
    """``request`` with the debounce policy of ``msg`` (an OperationSpec or
    TryCompleteElseWatchRequest), validated; unchanged when it asks for none."""
    extend, cap = msg.extend_on_resend, msg.max_extend_ms
    if not extend:
        if cap:
            raise InvalidArgument(f"{prefix}max_extend_ms", "needs extend_on_resend")
        return request
    definition = request.definition
    if definition.due_time_ms:
        raise InvalidArgument(
            f"{prefix}extend_on_resend",
            "needs timeout_ms: an absolute due_time_ms does not move on a re-send",
        )
    if cap and cap < definition.timeout_ms:
        raise InvalidArgument(
            f"{prefix}max_extend_ms", f"{cap} is below timeout_ms ({definition.timeout_ms})"
        )
    if cap > limits.max_timeout_ms:
        raise InvalidArgument(
            f"{prefix}max_extend_ms", f"{cap} exceeds max_timeout_ms ({limits.max_timeout_ms})"
        )
    debounced = dataclasses.replace(definition, extend_on_resend=True, max_extend_ms=cap)
    return dataclasses.replace(request, definition=debounced)


def extended_due(definition: OperationDefinition, create_time_ms: int, now_ms: int) -> int:
    """The deadline a re-send at ``now_ms`` asks for (wall-clock epoch ms), capped."""
    due = now_ms + definition.timeout_ms
    if definition.max_extend_ms:
        due = min(due, create_time_ms + definition.max_extend_ms)
    return due
