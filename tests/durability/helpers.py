"""Shared helpers of the durability tests: configs with a data dir, raw gRPC calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings

NAME = "d"


def durable_config(data_dir: Path, *, fsync: str = "always", **extra: Any) -> ServerConfig:
    settings = PurgatorySettings(name=NAME, durable=True, retained_events=1000)
    return ServerConfig(
        listen="127.0.0.1:0",
        grace_s=0.5,
        data_dir=str(data_dir),
        fsync=fsync,
        purgatories=(settings,),
        **extra,
    )


@asynccontextmanager
async def running(config: ServerConfig) -> AsyncIterator[Any]:
    """A server on this loop and a stub connected to it; both closed on exit."""
    server, port = await create_server("127.0.0.1:0", config)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        await channel.close()
        await server.stop(0.5)


def watch(op_id: str, keys: list[str], timeout_ms: int, condition: Any = None) -> Any:
    return pb.TryCompleteElseWatchRequest(
        purgatory=NAME,
        operation_id=op_id,
        keys=keys,
        timeout_ms=timeout_ms,
        condition=condition if condition is not None else pb.Condition(),
    )


def signal(key: str, *, amount: int = 0, value: int | None = None, source: str = "") -> Any:
    sig = pb.Signal(amount=amount, source=source)
    if value is not None:
        sig.value = value
    return pb.CheckAndCompleteRequest(purgatory=NAME, key=key, signal=sig)


async def events_after(stub: Any, after: int, count: int) -> list[Any]:
    """The first ``count`` events of Subscribe(after_sequence=after) (bounded)."""
    call = stub.Subscribe(pb.SubscribeRequest(purgatory=NAME, after_sequence=after), timeout=5.0)
    out: list[Any] = []
    try:
        async for event in call:
            out.append(event)
            if len(out) >= count:
                break
    finally:
        call.cancel()
    return out
