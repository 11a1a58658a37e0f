"""What a Session sends: acknowledgements queued in frame order, how the ready ones and
the outcomes are packed into ``SessionResponse`` messages (see :mod:`.session_rpc`), and
the heartbeat.

Heartbeats: both server-streaming RPCs send one after a client-chosen interval of
silence (``heartbeat_interval_ms``; 0: none), so proxies never see an idle stream and
clients can tell a silent stream from a dead one.

Pure functions and a plain record: no I/O, no loop; :class:`~.session_rpc.SessionStream`
owns every instance (loop-confined).
"""

from __future__ import annotations

import time
from collections import deque

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.wire.convert import add_event

__all__ = [
    "ACK_BYTES",
    "MESSAGE_BYTES",
    "OUTCOMES_PER_MESSAGE",
    "Ack",
    "OpKey",
    "outcome_size",
    "pack",
    "session_heartbeat",
    "status_size",
    "watch_size",
]

# Loose outcomes packed into one SessionResponse.
OUTCOMES_PER_MESSAGE = 1000
# About how many bytes of outcomes one SessionResponse carries (clients accept 4 MiB).
MESSAGE_BYTES = 1 << 20

OpKey = tuple[str, str]  # (purgatory name, operation id)

# An acknowledgement's estimated size before its statuses (see Ack.size).
ACK_BYTES = 64


class Ack:
    """One frame's acknowledgement, queued until its barrier passes (in frame order);
    built in place in the ``SessionResponse`` that carries it."""

    __slots__ = ("keys", "message", "ready", "response", "size", "stash")

    def __init__(self, request_id: int) -> None:
        self.response = pb.SessionResponse()
        self.message = self.response.ack
        self.message.SetInParent()
        self.message.request_id = request_id
        self.ready = False
        # About how many bytes the acknowledgement encodes to, kept by whoever adds to
        # it (:func:`status_size` per status).
        self.size = ACK_BYTES
        self.keys: list[OpKey] = []  # operations watched by this frame
        self.stash: list[Outcome] = []  # their outcomes that ended before the ack left


def pack(out: deque[Ack | Outcome], sizes: list[int] | None = None) -> list[pb.SessionResponse]:
    """Everything in ``out`` (emptied), as SessionResponse messages.

    An acknowledgement joins the message being filled only when that has none yet (so no
    outcome precedes its own acknowledgement) and carries its stashed outcomes while they
    fit. A message holds up to :data:`OUTCOMES_PER_MESSAGE` outcomes or about
    :data:`MESSAGE_BYTES`. ``sizes``, if given, gets each message's estimated bytes.
    """
    groups: list[tuple[Ack | None, list[Outcome]]] = []
    ack: Ack | None = None
    events: list[Outcome] = []
    budget = MESSAGE_BYTES
    while out:
        item = out.popleft()
        if isinstance(item, Ack):
            size = item.size
            if ack is not None or (events and size > budget):
                groups.append((ack, events))
                events, budget = [], MESSAGE_BYTES
            ack = item
            budget -= size
            outcomes: list[Outcome] = item.stash
        else:
            outcomes = [item]
        for outcome in outcomes:
            size = outcome_size(outcome)
            if events and (len(events) >= OUTCOMES_PER_MESSAGE or size > budget):
                groups.append((ack, events))
                ack, events, budget = None, [], MESSAGE_BYTES
            events.append(outcome)
            budget -= size
    if ack is not None or events:
        groups.append((ack, events))
    messages = []
    for group_ack, group_events in groups:
        if sizes is not None:
            estimate = sum(outcome_size(outcome) for outcome in group_events)
            sizes.append(estimate + (group_ack.size if group_ack is not None else 0))
        message = group_ack.response if group_ack is not None else pb.SessionResponse()
        add = message.outcomes.add
        for outcome in group_events:
            add_event(add, outcome)
        messages.append(message)
    return messages


def outcome_size(outcome: Outcome) -> int:
    """An upper-ish estimate of an outcome's encoded size, without encoding it."""
    return (
        96
        + len(outcome.payload)
        + len(outcome.result.data)
        + 40 * len(outcome.keys)
        + len(outcome.traceparent)
    )


def watch_size(payload: bytes, keys: tuple[str, ...]) -> int:
    """An estimate of a watched operation's outcome before it ends (no result data yet):
    what the session counts for it while it is open (:func:`outcome_size`'s terms)."""
    return 96 + len(payload) + 40 * len(keys)


def status_size(result_data: bytes) -> int:
    """An upper-ish estimate of one acknowledged status's encoded size (Ack.size); a
    registration's status carries no payload (:func:`.convert.add_status`)."""
    return 96 + len(result_data)


def session_heartbeat() -> pb.SessionResponse:
    """A Session heartbeat, stamped with the server's wall clock (epoch ms)."""
    return pb.SessionResponse(heartbeat=True, server_time_ms=time.time_ns() // 1_000_000)
