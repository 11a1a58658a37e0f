"""The transport ceiling: a bare grpc.aio server whose wait/signal RPCs only park and
resolve an asyncio Future, with the same messages as the real service.

``python -m bench.service_bare --listen 127.0.0.1:0 --port-file FILE`` (the purgatory
server's own flags, so :func:`bare_server` runs it under the same harness) serves
``TryCompleteElseWatch`` (the long-poll: a Future per key, awaited) and
``CheckAndComplete`` (resolves the key's Futures), their batch forms and a GetPurgatory
that counts parked calls, and nothing else: no engine, no timer, no sequence, no
subscribers. Its ``Session`` answers the streaming shape the
same way: a watch frame is acknowledged with a status per watch; a signal frame resolves
the keys' watches and answers with one message holding the acknowledgement and their
outcomes.

With ``--expire`` a unary long-poll with a ``timeout_ms`` also expires: one
``loop.call_later`` per call answers it EXPIRED when nobody signalled it in time. That is
the least any grpc.aio long-poll server with timeouts does (asyncio's own timer, on the
loop, no other thread), and ``bench.lateness_bench --bare`` measures its lateness next to
the real server's. Off by default, so the throughput benchmarks' ceiling stays as it was.
Whatever the real server does beyond this is the engine's and the service's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig
from purgatory_server._service.api.app import server_options

from harness import ServerProcess

COMPLETED = pb.OPERATION_STATE_COMPLETED
EXPIRED = pb.OPERATION_STATE_EXPIRED
WATCHING = pb.OPERATION_STATE_WATCHING


class BareServicer(pb_grpc.PurgatoryServiceServicer):  # type: ignore[misc]
    def __init__(self, expire: bool = False) -> None:
        self._waiting: dict[str, list[asyncio.Future[int]]] = {}
        self._loop = asyncio.get_running_loop()
        self._expire = expire

    def _park(self, key: str) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = self._loop.create_future()
        self._waiting.setdefault(key, []).append(fut)
        return fut

    def _resolve(self, key: str) -> int:
        futures = self._waiting.pop(key, ())
        for fut in futures:
            if not fut.done():
                fut.set_result(COMPLETED)
        return len(futures)

    def _expire_one(self, key: str, fut: asyncio.Future[int]) -> None:
        if fut.done():
            return
        fut.set_result(EXPIRED)
        futures = self._waiting.get(key)
        if futures is not None:
            futures.remove(fut)
            if not futures:
                del self._waiting[key]

    async def TryCompleteElseWatch(self, request: Any, context: Any) -> Any:
        key = request.keys[0]
        fut = self._park(key)
        if not (self._expire and request.timeout_ms > 0):
            return pb.TryCompleteElseWatchResponse(
                operation_id=request.operation_id, state=await fut
            )
        timer = self._loop.call_later(request.timeout_ms / 1000.0, self._expire_one, key, fut)
        state = await fut
        timer.cancel()
        return pb.TryCompleteElseWatchResponse(operation_id=request.operation_id, state=state)

    async def BatchTryCompleteElseWatch(self, request: Any, context: Any) -> Any:
        futures = [self._park(op.keys[0]) for op in request.operations]
        await asyncio.gather(*futures)
        return pb.BatchTryCompleteElseWatchResponse(
            operations=[
                pb.OperationStatus(operation_id=op.operation_id, state=COMPLETED)
                for op in request.operations
            ]
        )

    async def ListPurgatories(self, request: Any, context: Any) -> Any:
        return pb.ListPurgatoriesResponse()

    async def GetPurgatory(self, request: Any, context: Any) -> Any:
        pending = sum(len(futures) for futures in self._waiting.values())
        return pb.GetPurgatoryResponse(purgatory=pb.Purgatory(name=request.name, pending=pending))

    async def CheckAndComplete(self, request: Any, context: Any) -> Any:
        return pb.CheckAndCompleteResponse(completed=self._resolve(request.key))

    async def BatchCheckAndComplete(self, request: Any, context: Any) -> Any:
        counts = [self._resolve(s.key) for s in request.signals]
        return pb.BatchCheckAndCompleteResponse(completed=sum(counts), completed_per_signal=counts)

    async def Session(self, request_iterator: Any, context: Any) -> Any:
        waiting: dict[str, str] = {}  # key -> operation id, per stream
        serial = 0
        async for frame in request_iterator:
            ack = pb.SessionAck(request_id=frame.request_id)
            add = ack.operations.add
            for op in frame.watches:
                serial += 1
                op_id = op.operation_id or f"s{serial}"
                waiting[op.keys[0]] = op_id
                add(operation_id=op_id, state=WATCHING, created=True)
            events = []
            for sig in frame.signals:
                op_id = waiting.pop(sig.key, None)
                ack.completed_per_signal.append(0 if op_id is None else 1)
                if op_id is not None:
                    events.append(
                        pb.OperationEvent(operation_id=op_id, state=COMPLETED, keys=[sig.key])
                    )
            yield pb.SessionResponse(ack=ack, outcomes=events)


async def serve(
    listen: str, port_file: str | None, max_concurrent_rpcs: int | None, expire: bool = False
) -> None:
    server = grpc.aio.server(
        # The real server's own channel arguments, so the two transports cannot drift apart.
        options=server_options(ServerConfig()),
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    pb_grpc.add_PurgatoryServiceServicer_to_server(BareServicer(expire), server)
    port = server.add_insecure_port(listen)
    await server.start()
    if port_file:
        tmp = Path(port_file + ".tmp")
        tmp.write_text(f"{port}\n")
        tmp.replace(port_file)  # as the purgatory server does: never seen half-written
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop(1)


def bare_server(
    root: Path, label: str, max_concurrent_rpcs: int | None = None, expire: bool = False
) -> ServerProcess:
    """This server as a process under the tests' and benchmarks' harness (not started)."""
    args = ["--max-concurrent-rpcs", str(max_concurrent_rpcs)] if max_concurrent_rpcs else []
    if expire:
        args.append("--expire")
    command = [sys.executable, "-m", "bench.service_bare"]
    return ServerProcess(root, args, label=label, command=command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any)")
    parser.add_argument("--port-file", help="write the bound port to this file once serving")
    parser.add_argument(
        "--max-concurrent-rpcs",
        type=int,
        default=None,
        help="grpc.aio's RPC limiter, as the purgatory server configures it (default: off)",
    )
    parser.add_argument(
        "--expire",
        action="store_true",
        help="expire a unary long-poll after its timeout_ms (asyncio's timer; default: never)",
    )
    a = parser.parse_args()
    asyncio.run(serve(a.listen, a.port_file, a.max_concurrent_rpcs, a.expire))


if __name__ == "__main__":
    main()
