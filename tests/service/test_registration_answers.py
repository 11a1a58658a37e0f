"""A registration's answer carries no payload on the wire; the clients' statuses still do.

The unary TryCompleteElseWatchResponse never had a payload field; the batch form and a
Session's acks echoed every payload back, which cost the server more than registering
(docs/benchmarks.md, "Abuse patterns"). Outcomes (Subscribe, a Session's outcomes) and
GetOperation keep the payload: there it is news to the reader.
"""

from __future__ import annotations

import asyncio

import grpc
from purgatory_client import AsyncPurgatoryClient, OperationSpec
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

PAYLOAD = b"order-17" * 4


async def test_batch_and_session_answers_leave_the_payload_out(server: object) -> None:
    port = server.port  # type: ignore[attr-defined]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        spec = pb.OperationSpec(operation_id="b", keys=["kb"], timeout_ms=60_000, payload=PAYLOAD)
        answer = await stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(purgatory="default", operations=[spec])
        )
        assert answer.operations[0].operation_id == "b"
        assert answer.operations[0].payload == b""
        # The operation keeps it: GetOperation answers with it.
        got = await stub.GetOperation(pb.GetOperationRequest(purgatory="default", operation_id="b"))
        assert got.operation.payload == PAYLOAD

        call = stub.Session()
        watch = pb.OperationSpec(operation_id="s", keys=["ks"], timeout_ms=60_000, payload=PAYLOAD)
        await call.write(pb.SessionRequest(request_id=1, purgatory="default", watches=[watch]))
        first = await asyncio.wait_for(call.read(), 5)
        assert first.ack.operations[0].operation_id == "s"
        assert first.ack.operations[0].payload == b""
        # The outcome, when it comes, carries the payload.
        await call.write(
            pb.SessionRequest(request_id=2, purgatory="default", signals=[pb.KeySignal(key="ks")])
        )
        outcomes = []
        while not outcomes:
            message = await asyncio.wait_for(call.read(), 5)
            outcomes.extend(message.outcomes)
        assert outcomes[0].operation_id == "s" and outcomes[0].payload == PAYLOAD
        await call.done_writing()
        while await asyncio.wait_for(call.read(), 5) != grpc.aio.EOF:
            pass


async def test_the_clients_statuses_carry_the_payload_sent(client: AsyncPurgatoryClient) -> None:
    specs = [
        OperationSpec(("k1",), 60_000, payload=PAYLOAD, operation_id="c1"),
        OperationSpec(("k2",), 60_000, operation_id="c2"),
        OperationSpec(("k3",), 60_000, payload=b"third", operation_id="c3"),
    ]
    statuses = await client.batch_try_complete_else_watch(iter(specs))  # read once
    assert [(s.operation_id, s.payload) for s in statuses] == [
        ("c1", PAYLOAD),
        ("c2", b""),
        ("c3", b"third"),
    ]
    async with client.session() as session:
        ack = await session.send(
            watches=[OperationSpec(("k4",), 60_000, payload=b"fourth", operation_id="c4")]
        )
        assert [(s.operation_id, s.payload) for s in ack.operations] == [("c4", b"fourth")]
