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

The policy is validated with the rest of the request (:mod:`.validation`). The move
itself is the journaled Reschedule path (:meth:`RemoteOperation.reschedule` and
``Journal.on_rescheduled``), so it is atomic against expiry and survives a restart; the
policy is journaled with the registration.

Only relative timeouts debounce: an absolute ``due_time_ms`` does not move when re-sent,
so asking for both is INVALID_ARGUMENT, as is a cap shorter than the timeout (the first
deadline would already break it) or longer than the server's ``max_timeout_ms``.
"""

from __future__ import annotations

from purgatory_server._engine.timer import Timer
from purgatory_server._service.core.operation import OperationDefinition, RemoteOperation

__all__ = ["extended_due", "push_back"]


def push_back(op: RemoteOperation, timer: Timer, now_ms: int) -> bool:
    """Debounce a re-send of pending ``op`` at ``now_ms``: move its deadline later (never
    earlier) through the atomic reschedule path; True if it moved (the caller journals)."""
    due = extended_due(op.definition, op.create_time_ms, now_ms)
    return due > op.due_time_ms and op.reschedule(timer, due - now_ms, due)


def extended_due(definition: OperationDefinition, create_time_ms: int, now_ms: int) -> int:
    """The deadline a re-send at ``now_ms`` asks for (wall-clock epoch ms), capped."""
    due = now_ms + definition.timeout_ms
    if definition.max_extend_ms:
        due = min(due, create_time_ms + definition.max_extend_ms)
    return due
