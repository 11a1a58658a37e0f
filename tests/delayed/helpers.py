"""Servers for the delayed-message tests: one in-memory and one durable configuration."""

from __future__ import annotations

from pathlib import Path

from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service import ServerConfig
from purgatory_server._service.config.server_config import PurgatorySettings

from tests.durability.helpers import NAME, durable_config

LONG = 600_000
WATCHING = pb.OperationState.Value("OPERATION_STATE_WATCHING")
EXPIRED = pb.OperationState.Value("OPERATION_STATE_EXPIRED")
CANCELLED = pb.OperationState.Value("OPERATION_STATE_CANCELLED")
FORCED = pb.OperationState.Value("OPERATION_STATE_FORCE_COMPLETED")


def config_for(kind: str, data_dir: Path) -> ServerConfig:
    if kind == "durable":
        return durable_config(data_dir)
    return ServerConfig(
        listen="127.0.0.1:0",
        data_dir=str(data_dir),
        grace_s=0.5,
        purgatories=(PurgatorySettings(name=NAME, retained_events=1000),),
    )


def watch(op_id: str, keys: list[str], timeout_ms: int = LONG) -> pb.TryCompleteElseWatchRequest:
    return pb.TryCompleteElseWatchRequest(
        purgatory=NAME, operation_id=op_id, keys=keys, timeout_ms=timeout_ms
    )
