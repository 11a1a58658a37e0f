"""How a Session packs acknowledgements and outcomes into messages (pure function)."""

from __future__ import annotations

from collections import deque

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service.api.session_messages import (
    MESSAGE_BYTES,
    OUTCOMES_PER_MESSAGE,
    Ack,
    pack,
)
from purgatory_server._service.model.conditions import EMPTY_RESULT
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome


def _outcome(i: int, payload: bytes = b"") -> Outcome:
    return Outcome(
        i, "p", f"op{i}", OperationState.COMPLETED, ("k",), payload, EMPTY_RESULT, 1, 2, 3
    )


def _ack(request_id: int, *stash: Outcome) -> Ack:
    ack = Ack(request_id)
    ack.stash.extend(stash)
    return ack


def _shape(messages: list[pb.SessionResponse]) -> list[tuple[int | None, list[str]]]:
    return [
        (m.ack.request_id if m.HasField("ack") else None, [o.operation_id for o in m.outcomes])
        for m in messages
    ]


def test_an_ack_joins_earlier_loose_outcomes_and_carries_its_stash() -> None:
    out: deque[Ack | Outcome] = deque([_outcome(1), _ack(7, _outcome(2)), _outcome(3), _ack(8)])
    assert _shape(pack(out)) == [(7, ["op1", "op2", "op3"]), (8, [])]
    assert not out


def test_messages_are_split_by_count_and_by_bytes() -> None:
    many: deque[Ack | Outcome] = deque(_outcome(i) for i in range(OUTCOMES_PER_MESSAGE + 1))
    assert [len(m.outcomes) for m in pack(many)] == [OUTCOMES_PER_MESSAGE, 1]
    big = b"x" * (MESSAGE_BYTES // 3)
    heavy: deque[Ack | Outcome] = deque(_outcome(i, big) for i in range(4))
    sizes = [len(m.outcomes) for m in pack(heavy)]
    assert sum(sizes) == 4 and max(sizes) <= 3 and len(sizes) >= 2
    assert all(
        m.ByteSize() < 4 * 1024 * 1024 for m in pack(deque(_outcome(i, big) for i in range(9)))
    )


def test_events_carry_every_field_of_the_outcome() -> None:
    (message,) = pack(deque([_ack(0, _outcome(5, b"pay"))]))
    assert message.HasField("ack") and message.ack.request_id == 0
    event = message.outcomes[0]
    assert (event.sequence, event.purgatory, event.operation_id, event.payload) == (
        5,
        "p",
        "op5",
        b"pay",
    )
    assert (event.state, list(event.keys)) == (pb.OPERATION_STATE_COMPLETED, ["k"])
    assert (event.create_time_ms, event.due_time_ms, event.complete_time_ms) == (1, 2, 3)


def test_an_acks_size_estimate_counts_against_its_message() -> None:
    """pack budgets an acknowledgement by ``Ack.size`` (kept by the session as it adds
    statuses), so outcomes stashed behind a large acknowledgement spill into the next
    message."""
    light = _ack(1, _outcome(1), _outcome(2))
    assert _shape(pack(deque([light]))) == [(1, ["op1", "op2"])]
    heavy = _ack(2, _outcome(3), _outcome(4))
    heavy.size = MESSAGE_BYTES
    assert _shape(pack(deque([heavy]))) == [(2, ["op3"]), (None, ["op4"])]
