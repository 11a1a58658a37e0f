"""A purgatory server subprocess for the pipeline tests: fixed loopback port, restartable.

The port is chosen once (bind 127.0.0.1:0, read it, close) and reused on restart, so a
streaming query keeps the same target across a server restart, as in production.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc

NAME = "d"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``python -m purgatory_server`` on 127.0.0.1:``port``; start/stop/restart, bounded."""

    def __init__(self, data_dir: Path, *, durable: bool = True, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.durable = durable
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"server-{self.port}.log"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Server:
        args = [
            sys.executable,
            "-m",
            "purgatory_server",
            "--listen",
            self.target,
            "--data-dir",
            str(self.data_dir),
            "--purgatory",
            NAME,
            "--log-level",
            "WARNING",
        ]
        if self.durable:
            args += ["--durable", "--fsync", "always"]
        env = dict(os.environ, PURGATORY_DEFAULTS_RETAINED_EVENTS="100000")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}: {self.log}")
            try:
                with grpc.insecure_channel(self.target) as channel:
                    stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
                    stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=1.0)
                return
            except grpc.RpcError:
                time.sleep(0.05)
        raise AssertionError("server did not become ready in time")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (the durable journal was fsynced per write)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class Client:
    """Raw gRPC calls against purgatory ``d`` (sync, bounded)."""

    def __init__(self, target: str) -> None:
        self.channel = grpc.insecure_channel(target)
        self.stub: Any = pb_grpc.PurgatoryServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.channel.close()

    def watch(
        self,
        op_id: str,
        keys: list[str],
        timeout_ms: int,
        condition: Any = None,
        *,
        extend_on_resend: bool = False,
        max_extend_ms: int = 0,
    ) -> Any:
        return self.stub.TryCompleteElseWatch(
            pb.TryCompleteElseWatchRequest(
                purgatory=NAME,
                operation_id=op_id,
                keys=keys,
                timeout_ms=timeout_ms,
                condition=condition if condition is not None else pb.Condition(),
                extend_on_resend=extend_on_resend,
                max_extend_ms=max_extend_ms,
            ),
            timeout=10,
        )

    def reschedule(self, op_id: str, due_time_ms: int) -> Any:
        return self.stub.Reschedule(
            pb.RescheduleRequest(purgatory=NAME, operation_id=op_id, due_time_ms=due_time_ms),
            timeout=10,
        ).operation

    def signal(
        self, key: str, *, source: str = "", amount: int = 0, value: int | None = None
    ) -> Any:
        sig = pb.Signal(amount=amount, source=source)
        if value is not None:
            sig.value = value
        return self.stub.CheckAndComplete(
            pb.CheckAndCompleteRequest(purgatory=NAME, key=key, signal=sig), timeout=10
        )

    def force(self, op_id: str) -> Any:
        return self.stub.ForceComplete(
            pb.ForceCompleteRequest(purgatory=NAME, operation_id=op_id), timeout=10
        )

    def info(self) -> Any:
        return self.stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME), timeout=10).purgatory

    def wait_last_sequence(self, at_least: int, timeout_s: float = 15.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            last = int(self.info().last_sequence)
            if last >= at_least:
                return last
            time.sleep(0.05)
        raise AssertionError(f"last_sequence did not reach {at_least}")
