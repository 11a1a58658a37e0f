"""A full disk is capacity that frees up (issue 44): a real tmpfs of a few MB is filled.

While full, a write to the durable purgatory answers RESOURCE_EXHAUSTED with RetryInfo,
reads are answered from memory and the in-memory purgatory serves; once space is freed
the journal writes again by itself (the write stalled at the moment it filled included)
and nothing acknowledged is lost. A restart with the disk still full serves every
purgatory it can open; one it cannot answers UNAVAILABLE naming ENOSPC and is opened once
space is back. The filesystem test needs a tmpfs mount (root; skipped, saying so, where
there is none); the same outage runs everywhere through the journals' write seam.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    OperationSpec,
    ResourceExhaustedError,
    UnavailableError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig, create_server
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.durable.local_store import durable_factory

from tests.durability.helpers import NAME, running, watch
from tests.journal.helpers import Disk
from tests.service.helpers import until


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs, unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"no tmpfs mount here: {done.stderr.decode().strip()[:100]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last page with one file; it frees the space when deleted."""
    filler = disk / "filler"
    with filler.open("ab", buffering=0) as f:
        for size in (1 << 16, 4096, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def config(data_dir: Path, *more: PurgatorySettings) -> ServerConfig:
    return ServerConfig(
        listen="127.0.0.1:0",
        grace_s=0.5,
        data_dir=str(data_dir),
        fsync="always",
        purgatories=(
            PurgatorySettings(name=NAME, durable=True, retained_events=100),
            PurgatorySettings(name="mem", retained_events=100),
            *more,
        ),
    )


async def ok(stub: Any, op_id: str, purgatory: str = NAME) -> None:
    request = watch(op_id, ["k"], 600_000)
    request.purgatory = purgatory
    await stub.TryCompleteElseWatch(request, timeout=10)


async def _outage(
    server: Any, port: int, full: Callable[[], None], free: Callable[[], None]
) -> list[str]:
    """Fill the disk (``full``) under a running server, check what it answers, free it
    (``free``) and check the journal writes again; the ids acknowledged."""
    acknowledged = ["before"]
    target = f"127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(target)
    stalled: dict[str, asyncio.Future[Any]] = {}
    try:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        journal = server.registry.get(NAME).journal
        await ok(stub, "before")
        full()
        # The head's last page may still take a few records; the write that fills it
        # waits (its records are kept, in order) and the journal says why.
        for i in range(500):
            if journal.no_space is not None:
                break
            task = asyncio.ensure_future(ok(stub, f"w{i}"))
            await asyncio.wait({task}, timeout=0.3)
            if task.done():
                task.result()
                acknowledged.append(f"w{i}")
            else:
                stalled[f"w{i}"] = task
        assert journal.no_space is not None and "ENOSPC" in journal.no_space
        async with AsyncPurgatoryClient(target, purgatory=NAME, timeout=10) as client:
            with pytest.raises(ResourceExhaustedError, match="out of space") as refused:
                await client.try_complete_else_watch(["k"], 60_000, operation_id="refused")
            assert refused.value.retry_delay == 1.0
            with pytest.raises(ResourceExhaustedError):
                await client.check_and_complete("k")
            session = client.session()  # a Session frame: refused, the stream goes on
            ack = await session.send(watches=[OperationSpec(("k",), 60_000, operation_id="s")])
            assert isinstance(ack.error, ResourceExhaustedError)
            await session.close()
            assert (await client.get_operation("before")).operation_id == "before"
            listed = await client.list_operations()
            assert set(acknowledged) <= {op.operation_id for op in listed.operations}
            await ok(stub, "m1", purgatory="mem")  # the in-memory purgatory writes on
            free()  # space is back: no restart, the journal retries by itself

            async def writing() -> bool:
                return journal.no_space is None

            await until(writing, timeout_s=5)
            for op_id, task in stalled.items():
                await asyncio.wait_for(task, 5)  # written once space came back
                acknowledged.append(op_id)
            await client.try_complete_else_watch(["k"], 60_000, operation_id="after")
            acknowledged.append("after")
            ids = {op.operation_id for op in (await client.list_operations()).operations}
            assert not {"refused", "s"} & ids  # refused before they changed anything
    finally:
        for task in stalled.values():
            task.cancel()
        await channel.close()
    return acknowledged


async def test_full_disk_refuses_writes_serves_reads_and_resumes(disk: Path) -> None:
    data = disk / "data"
    server, port = await create_server("127.0.0.1:0", config(data))
    fillers: list[Path] = []
    try:
        acknowledged = await _outage(
            server, port, lambda: fillers.append(fill(disk)), lambda: fillers.pop().unlink()
        )
    finally:
        await server.stop(0.5)
    await _restart_full(disk, data, acknowledged)


async def test_the_same_outage_through_the_journal_write_seam(tmp_path: Path) -> None:
    """Where no tmpfs can be mounted: the journals' ``os.write`` runs out of space."""
    disk = Disk()
    loop = asyncio.get_running_loop()
    settings = config(tmp_path)
    factory = durable_factory(settings, loop, write=disk)
    server, port = await create_server("127.0.0.1:0", settings, journal_factory=factory)
    try:

        def full() -> None:
            disk.error = errno.ENOSPC

        def free() -> None:
            disk.error = None

        acknowledged = await _outage(server, port, full, free)
    finally:
        await server.stop(0.5)
    async with running(config(tmp_path)) as stub:  # nothing acknowledged lost
        listed = await stub.ListOperations(pb.ListOperationsRequest(purgatory=NAME))
        assert set(acknowledged) <= {op.operation_id for op in listed.operations}


async def _restart_full(disk: Path, data: Path, acknowledged: list[str]) -> None:
    """Restart with the disk full: every purgatory it can open serves, the new durable
    one answers UNAVAILABLE naming ENOSPC until space is back."""
    filler = fill(disk)
    more = PurgatorySettings(name="new", durable=True, retained_events=10)
    server, port = await create_server("127.0.0.1:0", config(data, more))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
            await client.try_complete_else_watch(["k"], 60_000, purgatory="mem")
            listed = await client.list_operations(purgatory=NAME)
            assert set(acknowledged) <= {op.operation_id for op in listed.operations}
            with pytest.raises(UnavailableError, match=r"'new' is not open yet.*ENOSPC"):
                await client.get_purgatory("new")
            os.unlink(filler)

            async def opened() -> bool:
                try:
                    await client.get_purgatory("new")
                except UnavailableError:
                    return False
                return True

            await until(opened, timeout_s=10)
            await client.try_complete_else_watch(["k"], 60_000, purgatory="new")
    finally:
        await server.stop(0.5)
