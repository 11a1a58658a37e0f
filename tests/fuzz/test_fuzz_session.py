"""Fuzz of the Session stream: random frames (the RPC fuzz's strategies for watches,
signals, ids and purgatory names) on one stream against a real server. Every frame gets
exactly one acknowledgement, in order, with a status the policy allows for a frame (never
UNKNOWN or INTERNAL) and a short message; outcomes come only for operations the stream
watched; the stream itself never fails; nothing is left pending at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from purgatory_client import PurgatoryClient
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

from tests.fuzz.rpc_requests import keys, op_ids, purgatories, signals, specs
from tests.service.helpers import ServerThread

EXAMPLES = int(os.environ.get("FUZZ_SESSION_EXAMPLES", "60"))
C = grpc.StatusCode
FRAME_CODES = {
    C.OK,
    C.INVALID_ARGUMENT,
    C.NOT_FOUND,
    C.ALREADY_EXISTS,
    C.RESOURCE_EXHAUSTED,
}
CODE_BY_NUMBER = {code.value[0]: code for code in C}


@st.composite
def frames(draw: Any) -> Any:
    frame = pb.SessionRequest(purgatory=draw(purgatories))
    frame.watches.extend(draw(st.lists(specs(), max_size=3)))
    for key in draw(st.lists(keys, max_size=3)):
        item = frame.signals.add(key=key)
        sig = draw(signals())
        if sig is not None:
            item.signal.CopyFrom(sig)
    frame.force_complete.extend(draw(st.lists(op_ids, max_size=2)))
    return frame


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread() as st_:
        yield st_
        with PurgatoryClient(st_.target, timeout=10) as client:
            info = {p.name: p.pending for p in client.list_purgatories()}
        assert all(n == 0 for n in info.values()), info


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(st.lists(frames(), min_size=1, max_size=5))
def test_every_frame_is_acknowledged_once_in_order(server: ServerThread, drawn: list[Any]) -> None:
    for i, frame in enumerate(drawn, 1):
        frame.request_id = i
    with grpc.insecure_channel(server.target) as channel:
        call = pb_grpc.PurgatoryServiceStub(channel).Session(iter(drawn), timeout=10)  # type: ignore[no-untyped-call]
        acks: list[Any] = []
        watched: set[str] = set()
        registered: list[tuple[str, str]] = []
        try:
            for message in call:
                if message.HasField("ack"):
                    ack = message.ack
                    acks.append(ack)
                    code = CODE_BY_NUMBER.get(ack.code, C.UNKNOWN)
                    assert code in FRAME_CODES, f"frame answered {code.name}: {ack.message}"
                    assert len(ack.message) < 400
                    frame = drawn[ack.request_id - 1]
                    if code is C.OK:
                        assert len(ack.operations) == len(frame.watches)
                        assert len(ack.completed_per_signal) == len(frame.signals)
                        assert len(ack.force_completed) == len(frame.force_complete)
                        for status in ack.operations:
                            watched.add(status.operation_id)
                            registered.append((frame.purgatory, status.operation_id))
                    else:
                        assert not (ack.operations or ack.completed_per_signal)
                for event in message.outcomes:
                    assert event.operation_id in watched
                if len(acks) == len(drawn):
                    break
        finally:
            call.cancel()
        assert [a.request_id for a in acks] == list(range(1, len(drawn) + 1))
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        for purgatory, op_id in registered:  # leave nothing pending for the next example
            try:
                stub.ForceComplete(
                    pb.ForceCompleteRequest(purgatory=purgatory, operation_id=op_id), timeout=5
                )
            except grpc.RpcError as exc:
                assert exc.code() is C.NOT_FOUND
