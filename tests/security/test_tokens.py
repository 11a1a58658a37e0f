"""Bearer tokens: UNAUTHENTICATED without a valid one, PERMISSION_DENIED without the
permission the RPC needs on that purgatory, health open, tokens never logged."""

from __future__ import annotations

import asyncio
import logging
import tomllib
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from purgatory_client import (
    AsyncPurgatoryClient,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_proto.v1 import purgatory_pb2_grpc as pb_grpc
from purgatory_server._service import ServerConfig
from purgatory_server._service.config.server_config import ConfigError, from_mapping

from tests.security.conftest import ADMIN, FORCER, SECRETS, SIGNALLER, SUBSCRIBER, WATCHER
from tests.service.helpers import TEST_CONFIG


def _client(port: int, token: str | None) -> AsyncPurgatoryClient:
    return AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10, token=token, trust_env=False)


async def test_no_token_or_a_wrong_one_is_unauthenticated_and_health_stays_open(
    serve: Any, token_config: ServerConfig
) -> None:
    _, port = await serve(token_config)
    for token in (None, "not-a-configured-token", ADMIN + "x"):
        async with _client(port, token) as client:
            for call in (
                client.list_purgatories(),
                client.get_purgatory(),
                client.check_and_complete("k"),
                client.try_complete_else_watch(["k"], 1000),
            ):
                with pytest.raises(UnauthenticatedError) as raised:
                    await call
                assert raised.value.code is grpc.StatusCode.UNAUTHENTICATED
                if token is not None:
                    assert token not in str(raised.value)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        # A malformed header is UNAUTHENTICATED too, not a crash.
        stub_call = channel.unary_unary("/purgatory.v1.PurgatoryService/ListPurgatories")
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await stub_call(b"", metadata=(("authorization", "Basic abc"),), timeout=5)
        assert raw.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        await channel.close()


async def test_each_permission_allows_its_rpcs_only(serve: Any, token_config: ServerConfig) -> None:
    _, port = await serve(token_config)
    async with (
        _client(port, ADMIN) as admin,
        _client(port, WATCHER) as watcher,
        _client(port, SIGNALLER) as signaller,
        _client(port, FORCER) as forcer,
        _client(port, SUBSCRIBER) as subscriber,
    ):
        await admin.create_purgatory("other")
        # watch: register and read operations on "default" only.
        await watcher.try_complete_else_watch(["k1"], 60_000, operation_id="w1")
        assert (await watcher.get_operation("w1")).operation_id == "w1"
        assert (await watcher.get_purgatory()).name == "default"
        assert [p.name for p in await watcher.list_purgatories()] == ["default", "other"]
        # signal: complete it; force: end another; subscribe: see both outcomes.
        assert await signaller.check_and_complete("k1") == 1
        await watcher.try_complete_else_watch([], 60_000, operation_id="w2")
        assert (await forcer.force_complete("w2")).completed
        events = subscriber.subscribe(after_sequence=0)
        got = [await asyncio.wait_for(anext(events), 5) for _ in range(2)]
        await events.aclose()
        assert [e.operation_id for e in got] == ["w1", "w2"]
        # force also covers Cancel and Reschedule.
        await watcher.try_complete_else_watch([], 60_000, operation_id="w3")
        assert (await forcer.reschedule("w3", timeout_ms=120_000)).operation_id == "w3"
        assert [s.operation_id for s in await forcer.cancel(["w3"])] == ["w3"]
        # watch covers ListOperations.
        assert [s.operation_id for s in (await watcher.list_operations()).operations] == []
        # subscribe covers DiscardDeadLetters, as Redrive: past the check, the unknown
        # group is NOT_FOUND.
        with pytest.raises(NotFoundError):
            await subscriber.discard_dead_letters("billing")
        denied: list[tuple[AsyncPurgatoryClient, Any]] = [
            (watcher, lambda c: c.check_and_complete("k1")),
            (watcher, lambda c: c.force_complete("w1")),
            (watcher, lambda c: c.create_purgatory("x")),
            (watcher, lambda c: c.try_complete_else_watch(["k"], 1000, purgatory="other")),
            (watcher, lambda c: c.get_purgatory("other")),
            (signaller, lambda c: c.try_complete_else_watch(["k"], 1000)),
            (signaller, lambda c: c.check_and_complete("k1", purgatory="other")),
            (forcer, lambda c: c.get_operation("w1")),
            (watcher, lambda c: c.cancel(["w1"])),
            (signaller, lambda c: c.reschedule("w1", timeout_ms=1000)),
            (forcer, lambda c: c.list_operations()),
            (watcher, lambda c: c.list_operations(purgatory="other")),
            (forcer, lambda c: c.batch_check_and_complete(["k1"])),
            (subscriber, lambda c: c.check_and_complete("k1")),
            (subscriber, lambda c: c.delete_purgatory("other")),
            (watcher, lambda c: c.discard_dead_letters("billing")),
            (forcer, lambda c: c.discard_dead_letters("billing", [1])),
            (subscriber, lambda c: c.discard_dead_letters("billing", purgatory="other")),
        ]
        for client, call in denied:
            with pytest.raises(PermissionDeniedError) as raised:
                await call(client)
            assert "permission" in raised.value.details
        with pytest.raises(PermissionDeniedError):
            async for _ in watcher.subscribe(after_sequence=0):
                pass
        # admin implies every permission, on every purgatory.
        await admin.try_complete_else_watch(["k"], 60_000, operation_id="a1", purgatory="other")
        assert await admin.check_and_complete("k", purgatory="other") == 1
        assert await admin.delete_purgatory("other") == 0


async def test_schedules_need_force_to_change_and_watch_to_list(
    serve: Any, token_config: ServerConfig
) -> None:
    """Upserting or deleting a schedule can cancel its armed occurrence: ``force``, as
    Cancel; listing schedules reads: ``watch``."""
    _, port = await serve(token_config)
    async with (
        _client(port, WATCHER) as watcher,
        _client(port, SIGNALLER) as signaller,
        _client(port, FORCER) as forcer,
    ):
        await forcer.upsert_schedule("nightly", every_ms=3_600_000)
        await forcer.upsert_schedule("nightly", every_ms=7_200_000)  # replaces: cancels
        assert [s.schedule_id for s in await watcher.list_schedules()] == ["nightly"]
        denied: list[tuple[AsyncPurgatoryClient, Any]] = [
            (watcher, lambda c: c.upsert_schedule("nightly", every_ms=60_000)),
            (watcher, lambda c: c.delete_schedule("nightly")),
            (signaller, lambda c: c.upsert_schedule("other", every_ms=60_000)),
            (signaller, lambda c: c.list_schedules()),
            (forcer, lambda c: c.list_schedules()),
        ]
        for client, call in denied:
            with pytest.raises(PermissionDeniedError, match="permission"):
                await call(client)
        assert (await forcer.delete_schedule("nightly")) is not None


async def test_tokens_never_reach_the_logs(
    serve: Any, token_config: ServerConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server, port = await serve(token_config)
    for token in (*SECRETS, "wrong-secret-token-zz"):
        async with _client(port, token) as client:
            try:
                await client.try_complete_else_watch(["k"], 50, purgatory="default")
                await client.check_and_complete("k")
            except (PermissionDeniedError, UnauthenticatedError):
                pass
    await server.stop(0.2)
    text = caplog.text + repr(token_config) + repr(token_config.auth)
    assert caplog.records  # the server did log (start-up, shutdown): the check is not vacuous
    for token in (*SECRETS, "wrong-secret-token-zz"):
        assert token not in text


def test_bad_token_configuration_is_a_config_error() -> None:
    bad: list[dict[str, Any]] = [
        {"tokens": [{"permissions": ["watch"]}]},  # no secret
        {"tokens": [{"token": "a", "sha256": "00", "permissions": ["watch"]}]},  # two
        {"tokens": [{"token": "a", "permissions": ["fly"]}]},
        {"tokens": [{"sha256": "abc", "permissions": ["watch"]}]},
        {"tokens": [{"token_env": "UNSET_VAR", "permissions": ["watch"]}]},
        {"tokens": [{"token_file": "/nonexistent/token", "permissions": ["watch"]}]},
        {"tokens": [{"token": "a", "permissions": ["watch"], "colour": "red"}]},
        {"tokens": [{"token": "a", "permissions": ["watch"]}, {"token": "a", "permissions": []}]},
        {"bogus": 1},
    ]
    for auth in bad:
        with pytest.raises(ConfigError):
            from_mapping({"auth": auth}, TEST_CONFIG, {})


async def test_a_token_with_no_permissions_may_list_purgatories_only(serve: Any) -> None:
    # docs/service.md: "ListPurgatories any valid token", permissions = [] included.
    text = f'[[auth.tokens]]\nname = "viewer"\ntoken = "{ADMIN}"\npermissions = []\n'
    _, port = await serve(from_mapping(tomllib.loads(text), TEST_CONFIG, {}))
    async with _client(port, ADMIN) as viewer:
        assert [p.name for p in await viewer.list_purgatories()] == ["default"]
        for call in (viewer.get_purgatory(), viewer.try_complete_else_watch(["k"], 1000)):
            with pytest.raises(PermissionDeniedError):
                await call


async def test_ack_stream_requests_are_authorized_one_by_one(
    serve: Any, token_config: ServerConfig
) -> None:
    """Each AckStream request needs subscribe on the purgatory it names: a refused one
    is answered PERMISSION_DENIED in its response and the stream goes on; without a
    valid token the stream does not open."""
    _, port = await serve(token_config)
    async with _client(port, ADMIN) as admin:
        await admin.create_purgatory("other")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.PurgatoryServiceStub(channel)
        acks = stub.AckStream(metadata=(("authorization", f"Bearer {SUBSCRIBER}"),))
        for purgatory in ("other", "default", "other"):
            entry = pb.AckBatchEntry(sequence=1)
            await acks.write(pb.AckStreamRequest(purgatory=purgatory, group="g", entries=[entry]))
        answers = [await asyncio.wait_for(acks.read(), 10) for _ in range(3)]
        await acks.done_writing()
        assert await acks.code() is grpc.StatusCode.OK
        assert [a.code for a in answers] == [
            grpc.StatusCode.PERMISSION_DENIED.value[0],
            grpc.StatusCode.NOT_FOUND.value[0],  # allowed: past the check, no group "g"
            grpc.StatusCode.PERMISSION_DENIED.value[0],
        ]
        assert "permission" in answers[0].message
        anonymous = stub.AckStream()
        await anonymous.write(pb.AckStreamRequest(purgatory="default", group="g"))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await anonymous.read()
        assert raised.value.code() is grpc.StatusCode.UNAUTHENTICATED
