"""The base of both clients: the state every feature mixin of a client relies on.

Each client is one class per flavor, :class:`~purgatory_client.AsyncPurgatoryClient`
(asyncio, written by hand) and :class:`~purgatory_client.PurgatoryClient` (blocking,
generated from it by ``client/generate_sync.py``), assembled from feature mixins:

- ``_async``: the client itself (channel, calls, admin, operations);
- ``_async_delayed``: cancel, reschedule, list and iterate operations;
- ``_async_schedules``: recurring schedules;
- ``_async_streams``: ``subscribe``, ``watch_many``, the batching ``dispatcher``;
- ``_async_groups``: worker groups (join, ack, lease, dead letters);
- ``_async_session``: ``session()`` and the Session stream (hand-written in both flavors:
  gRPC's two APIs stream requests differently).

What the two flavors share with no I/O lives beside them: ``_requests`` (requests, with
the argument checks), ``_responses`` (results), ``_resume`` (``ResumePolicy`` and the
loops that ride out a dropped call), ``_liveness`` (heartbeats, dead streams),
``_routing`` (replicated purgatories' owners), ``_session_base``, ``_groups_base``,
``_schedules``, ``_listing``, ``_long_poll``, ``_security``, ``_models``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from purgatory_client._resume import ResumePolicy
from purgatory_client._routing import Router

__all__ = ["ClientBase"]


class ClientBase:
    """What a client's constructor sets and its mixins read.

    ``_call(method, request, timeout)`` performs one unary call (blocking or awaitable),
    following a replicated purgatory's owner and raising the client's errors;
    ``_find_owner(name)`` learns where ``name`` lives before a Session stream is opened
    there.
    """

    purgatory: str
    timeout: float | None
    _stub: Any
    _metadata: Any
    _router: Router  # replicated purgatories: calls and streams go to the owner (_routing)
    _resume: ResumePolicy
    _call: Callable[..., Any]
    _find_owner: Callable[[str], Any]

    def _name(self, purgatory: str | None) -> str:
        return self.purgatory if purgatory is None else purgatory
