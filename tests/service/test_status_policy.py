"""The status policy (docs/service.md "Errors"): every status code is an API. One
regression test per way the server once broke it, each named for it: UNKNOWN, a hang,
RESOURCE_EXHAUSTED for a fixed limit, an oversized status, a bare ValueError...
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from purgatory_client import (
    AsyncPurgatoryClient,
    Condition,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OperationSpec,
    PurgatoryClient,
    PurgatoryConfig,
    ResourceExhaustedError,
    ServerError,
    Signal,
    UnavailableError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig

from tests.service.helpers import TEST_CONFIG, TEST_LIMITS, config_with

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
SERVICE = "/purgatory.v1.PurgatoryService/"


async def _raw(port: int, method: str, body: bytes) -> grpc.aio.AioRpcError:
    """Send ``body`` as-is to ``method``; the error it fails with."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(SERVICE + method)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(body, timeout=5)
        return raised.value


async def _healthy(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


# -- Why 1: wheel_size 4294967295 hung the server; wheel_size 1 was UNKNOWN ------------
@pytest.mark.parametrize(
    ("config", "field"),
    [
        (PurgatoryConfig(wheel_size=4_294_967_295), "config.wheel_size"),
        (PurgatoryConfig(wheel_size=1), "config.wheel_size"),
        (PurgatoryConfig(tick_ms=4_294_967_295), "config.tick_ms"),
        (PurgatoryConfig(retained_events=4_294_967_295), "config.retained_events"),
    ],
)
async def test_bad_purgatory_config_is_invalid_argument_and_the_server_keeps_serving(
    server: Any, client: AsyncPurgatoryClient, config: PurgatoryConfig, field: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        await asyncio.wait_for(client.create_purgatory("big", config), 5)
    assert raised.value.details.startswith(f"{field}:")
    assert raised.value.field_violations[0][0] == field
    await _healthy(server.port)
    assert (await client.get_purgatory()).name == "default"
    with pytest.raises(NotFoundError):
        await client.get_purgatory("big")


# -- Why 2: fixed per-request limits were RESOURCE_EXHAUSTED --------------------------
async def test_fixed_limits_are_invalid_argument_whatever_the_load(serve: Any) -> None:
    _, port = await serve(config_with(max_batch_size=10_000, max_keys_per_operation=1024))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        cases: list[tuple[Any, str]] = [
            (client.try_complete_else_watch(["k"], 0), "timeout_ms"),
            (client.try_complete_else_watch(["k" * 33], 1000), "keys[0]"),
            (client.try_complete_else_watch(["k"], 1000, payload=b"p" * 65_537), "payload"),
            (client.try_complete_else_watch([f"k{i}" for i in range(1025)], 1000), "keys"),
            (
                client.batch_try_complete_else_watch([OperationSpec((), 1000)] * 10_001),
                "operations",
            ),
            (client.batch_check_and_complete(["a"] * 10_001), "signals"),
        ]
        for call, field in cases:
            with pytest.raises(InvalidArgumentError) as raised:
                await call
            assert raised.value.details.startswith(f"{field}:"), raised.value.details
            assert raised.value.field_violations == (
                (field, raised.value.details[len(field) + 2 :]),
            )
    # A Node.js client's timeout_ms = -1 arrives as 2**64 - 1.
    body = pb.TryCompleteElseWatchRequest(
        purgatory="default", keys=["k"], timeout_ms=2**64 - 1
    ).SerializeToString()
    err = await _raw(port, "TryCompleteElseWatch", body)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("timeout_ms:")


# -- Why 3: invalid UTF-8 on the wire was UNKNOWN -------------------------------------
@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("CheckAndComplete", b"\x0a\x02\xff\xfe\x12\x01k"),  # purgatory: invalid UTF-8
        ("TryCompleteElseWatch", b"\x1a\x03\xc3\x28a"),  # keys[0]: invalid UTF-8
        ("GetPurgatory", b"\x0a\x05ab"),  # truncated
        ("Subscribe", b"\x0a\x07default\x22\x02\xed\xa0"),  # incarnation: surrogate
        ("ListPurgatories", b"\xff\xff\xff\xff"),  # garbage
    ],
)
async def test_undecodable_requests_are_invalid_argument(
    server: Any, method: str, body: bytes
) -> None:
    err = await _raw(server.port, method, body)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err
    assert (err.details() or "").startswith("request: cannot be decoded")
    await _healthy(server.port)


# -- Why 4: error messages echoed whole values (a 48 KB id broke the trailers) ---------
async def test_messages_quote_at_most_about_100_characters(client: AsyncPurgatoryClient) -> None:
    huge = "x" * 48_000
    calls = [
        (client.force_complete(huge), InvalidArgumentError),
        (client.get_operation(huge), InvalidArgumentError),
        (client.try_complete_else_watch(["k"], 1000, operation_id=huge), InvalidArgumentError),
        (client.try_complete_else_watch([huge], 1000), InvalidArgumentError),
        (client.try_complete_else_watch(["a", "a"], 1000), InvalidArgumentError),
        # A name no purgatory can have: INVALID_ARGUMENT, as CreatePurgatory (issue 25).
        (client.get_purgatory(huge), InvalidArgumentError),
        (client.check_and_complete("k", purgatory=huge), InvalidArgumentError),
        (client.force_complete("y" * 40), NotFoundError),
    ]
    for call, error in calls:
        with pytest.raises(error) as raised:
            await call
        assert len(raised.value.details) < 250, raised.value.details[:300]
        assert sum(len(v) for v in raised.value.metadata.values()) < 500
    with pytest.raises(NotFoundError) as missing:
        await client.get_purgatory("x" * 32)  # the longest valid name (TEST_CONFIG)
    assert missing.value.resource_info == ("purgatory", "x" * 32)


# -- Why 5: sums past int64 made GetOperation/ForceComplete UNKNOWN -------------------
async def test_sums_saturate_at_the_int64_range(client: AsyncPurgatoryClient) -> None:
    high = Condition.sum_at_least(INT64_MAX)
    await client.try_complete_else_watch(["up"], 60_000, operation_id="up", condition=high)
    await client.check_and_complete("up", Signal(amount=2**62))
    assert await client.check_and_complete("up", Signal(amount=2**62)) == 1
    done = await client.get_operation("up")
    assert done.result.amount_sum == INT64_MAX
    await client.try_complete_else_watch(["down"], 60_000, operation_id="down", condition=high)
    for _ in range(3):
        await client.check_and_complete("down", Signal(amount=-(2**62)))
    assert (await client.get_operation("down")).state.name == "WATCHING"
    forced = await client.force_complete("down")
    assert forced.operation.result.amount_sum == INT64_MIN
    assert (await client.get_operation("down")).result.amount_sum == INT64_MIN


# -- Why 6: a durable purgatory on an unwritable data directory was UNKNOWN -----------
async def test_unwritable_data_dir_is_failed_precondition(serve: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    # Root ignores file modes, so "cannot write" is made with a file where a directory
    # must go: mkdir fails with an OSError like a read-only directory's.
    _, port = await serve(replace(TEST_CONFIG, data_dir=str(blocker / "data")))
    body = pb.CreatePurgatoryRequest(
        name="d", config=pb.PurgatoryConfig(durable=True)
    ).SerializeToString()
    err = await _raw(port, "CreatePurgatory", body)
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "data directory" in (err.details() or "")
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        with pytest.raises(NotFoundError):
            await client.get_purgatory("d")
        await client.create_purgatory("d")  # in memory: fine, and the name is free
    await _healthy(port)


# -- Why 7: the client raised a bare ValueError for a negative timeout -----------------
async def test_clients_raise_typed_errors_before_sending() -> None:
    # Nothing listens on port 1: these fail before any call is made.
    async with AsyncPurgatoryClient("127.0.0.1:1", trust_env=False) as client:
        cases: list[tuple[Any, str]] = [
            (client.try_complete_else_watch("orders-7", 1000), "keys"),  # a str, not a list
            (client.try_complete_else_watch(["k"], -1), "timeout_ms"),
            (client.try_complete_else_watch(["k"], 2**64), "timeout_ms"),
            (client.try_complete_else_watch([7], 1000), "keys[0]"),  # type: ignore[list-item]
            (client.check_and_complete("k", Signal(amount=2**63)), "signal.amount"),
            (client.batch_check_and_complete("abc"), "signals"),
            (
                client.batch_try_complete_else_watch([OperationSpec("k", 1000)]),  # type: ignore[arg-type]
                "operations[0].keys",
            ),
            (client.create_purgatory("p", PurgatoryConfig(wheel_size=-1)), "config.wheel_size"),
            (client.get_operation(7), "operation_id"),  # type: ignore[arg-type]
        ]
        for call, field in cases:
            with pytest.raises(InvalidArgumentError) as raised:
                await call
            assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
            assert raised.value.field_violations[0][0] == field, raised.value
    with PurgatoryClient("127.0.0.1:1", trust_env=False) as sync_client:
        with pytest.raises(InvalidArgumentError):
            sync_client.try_complete_else_watch("orders-7", 1000)
        with pytest.raises(InvalidArgumentError):
            sync_client.wait(["k"], -5)


# -- Why 8: recovered durable operations were not counted against max_pending ----------
async def test_max_pending_counts_recovered_operations(serve: Any, tmp_path: Path) -> None:
    from tests.durability.helpers import NAME, durable_config

    config = durable_config(tmp_path)
    config = replace(
        config, purgatories=(replace(config.purgatories[0], max_pending=3),), limits=TEST_LIMITS
    )
    server, port = await serve(config)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, purgatory=NAME) as client:
        for i in range(3):
            await client.try_complete_else_watch([f"k{i}"], 600_000, operation_id=f"op{i}")
    await server.stop(0.2)
    _, port = await serve(config)
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, purgatory=NAME) as client:
        assert (await client.get_purgatory()).pending == 3
        with pytest.raises(ResourceExhaustedError, match="max_pending"):
            await client.try_complete_else_watch(["new"], 600_000, operation_id="new")
        assert await client.check_and_complete("k0") == 1
        await client.try_complete_else_watch(["new"], 600_000, operation_id="new")


# -- Server-wide capacity: RESOURCE_EXHAUSTED with RetryInfo, frees up ------------------
async def test_server_wide_caps_are_resource_exhausted_and_free_up(serve: Any) -> None:
    _, port = await serve(config_with(max_total_pending=3, max_pending_payload_bytes=100))
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as client:
        await client.create_purgatory("other", PurgatoryConfig(retained_events=70))
        await client.try_complete_else_watch(["a"], 60_000)
        await client.try_complete_else_watch(["b"], 60_000, purgatory="other")
        await client.try_complete_else_watch(["c"], 60_000, payload=b"p" * 60)
        with pytest.raises(ResourceExhaustedError, match="max_total_pending") as raised:
            await client.try_complete_else_watch(["d"], 60_000, purgatory="other")
        assert raised.value.retry_delay == 1.0
        assert await client.check_and_complete("a") == 1
        with pytest.raises(ResourceExhaustedError, match="max_pending_payload_bytes"):
            await client.try_complete_else_watch(["d"], 60_000, payload=b"p" * 50)
        await client.try_complete_else_watch(["d"], 60_000, payload=b"p" * 40)
        await client.delete_purgatory("other")  # frees its pending op
        await client.try_complete_else_watch(["e"], 60_000)


# -- Details and INTERNAL ------------------------------------------------------------
async def test_unavailable_carries_retry_info(server: Any, client: AsyncPurgatoryClient) -> None:
    server.registry.begin_shutdown()
    with pytest.raises(UnavailableError) as raised:
        await client.get_purgatory()
    assert raised.value.retry_delay == 1.0


async def test_a_bug_is_internal_logged_once_with_its_traceback(
    server: Any, client: AsyncPurgatoryClient, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("secret request data")

    caplog.set_level(logging.DEBUG)
    server.registry.all_purgatories = broken
    with pytest.raises(ServerError) as raised:
        await client.list_purgatories()
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert "secret" not in raised.value.details
    bugs = [r for r in caplog.records if r.exc_info and r.exc_info[0] is ZeroDivisionError]
    assert len(bugs) == 1
    assert "ListPurgatories" in bugs[0].getMessage()
    assert (await client.get_purgatory()).name == "default"  # later requests unaffected


def test_config_bounds_apply_to_the_server_configuration_too() -> None:
    from purgatory_server._service.config.server_config import ConfigError, PurgatorySettings

    for bad in (
        PurgatorySettings(wheel_size=1),
        PurgatorySettings(wheel_size=4_294_967_295),
        PurgatorySettings(tick_ms=10**9),
    ):
        with pytest.raises(ConfigError):
            replace(TEST_CONFIG, purgatories=(bad,)).validate()
    with pytest.raises(ConfigError):
        replace(TEST_CONFIG, limits=replace(TEST_LIMITS, max_timeout_ms=2**62)).validate()
    assert isinstance(TEST_CONFIG, ServerConfig)


async def test_a_journal_that_cannot_write_is_failed_precondition(
    serve: Any, tmp_path: Path
) -> None:
    """Disk full or an I/O error is the server's state, not a bug: not INTERNAL."""
    from tests.durability.helpers import NAME, durable_config

    server, port = await serve(replace(durable_config(tmp_path), limits=TEST_LIMITS))

    async def disk_full() -> None:
        raise OSError(28, "No space left on device")

    server.registry.get(NAME).barrier = disk_full
    async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, purgatory=NAME) as client:
        with pytest.raises(FailedPreconditionError, match="cannot write its journal"):
            await client.check_and_complete("k")


# -- gRPC's own transport limits ---------------------------------------------------------
async def test_metadata_over_the_limit_is_always_refused_under_it_always_served(
    serve: Any,
) -> None:
    """One metadata limit (16 KiB, soft = hard): the same headers get the same answer
    every time (between core's default soft and hard limits it refused a random share)."""
    _, port = await serve()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)  # type: ignore[no-untyped-call]
        request = pb.GetPurgatoryRequest(name="default")
        under = (("x-probe", "v" * 12_000),)
        answers = await asyncio.gather(
            *(stub.GetPurgatory(request, metadata=under, timeout=10) for _ in range(20))
        )
        assert all(a.purgatory.name == "default" for a in answers)
        over = (("x-probe", "v" * 17_000),)
        for _ in range(3):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetPurgatory(request, metadata=over, timeout=10)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
