"""ListOperations end to end on a real server: filters, progress, stable paging, tokens."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from purgatory_client import (
    AsyncPurgatoryClient,
    InvalidArgumentError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
)
from purgatory_client.cli import main
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server._service import create_server
from purgatory_server._service.core import listing
from purgatory_server._service.core.sorted_ids import SortedIds

from tests.delayed.helpers import CANCELLED, EXPIRED, FORCED, LONG, WATCHING, config_for, watch
from tests.durability.helpers import NAME, running
from tests.service.helpers import ServerThread

KINDS = ["memory", "durable"]


def _request(page_token: str = "", page_size: int = 0, **filter_: Any) -> Any:
    return pb.ListOperationsRequest(
        purgatory=NAME,
        filter=pb.ListOperationsFilter(**filter_),
        page_token=page_token,
        page_size=page_size,
    )


async def _all(stub: Any, page_size: int = 0, **filter_: Any) -> list[Any]:
    """Every page of a listing (bounded), checking ids rise strictly across pages."""
    out: list[Any] = []
    token = ""
    for _ in range(10_000):
        page = await stub.ListOperations(_request(token, page_size, **filter_))
        out.extend(page.operations)
        token = page.next_page_token
        if not token:
            ids = [s.operation_id for s in out]
            assert ids == sorted(set(ids))
            return out
    raise AssertionError("listing did not end")


def _ids(statuses: list[Any]) -> list[str]:
    return [s.operation_id for s in statuses]


@pytest.mark.parametrize("kind", KINDS)
async def test_every_filter(kind: str, tmp_path: Path) -> None:
    config = config_for(kind, tmp_path)
    async with running(config) as stub:
        await stub.TryCompleteElseWatch(watch("order-1", ["cart:1", "user:9"], 60_000))
        await stub.TryCompleteElseWatch(watch("order-2", ["cart:2"], 120_000))
        await stub.TryCompleteElseWatch(watch("remind-1", ["cart:1"], 180_000))
        await stub.TryCompleteElseWatch(watch("remind-2", [], 240_000))
        await stub.TryCompleteElseWatch(watch("gone", ["cart:1"], 240_000))
        await stub.Cancel(
            pb.CancelRequest(purgatory=NAME, operation_ids=pb.OperationIds(ids=["gone"]))
        )
        await stub.ForceComplete(pb.ForceCompleteRequest(purgatory=NAME, operation_id="remind-2"))
        pending = await _all(stub)
        assert _ids(pending) == ["order-1", "order-2", "remind-1"]
        assert all(s.state == WATCHING and s.sequence == 0 for s in pending)
        assert _ids(await _all(stub, key="cart:1")) == ["order-1", "remind-1"]
        assert _ids(await _all(stub, key="user:9")) == ["order-1"]
        assert _ids(await _all(stub, key="nobody")) == []
        assert _ids(await _all(stub, operation_id_prefix="order-")) == ["order-1", "order-2"]
        assert _ids(await _all(stub, operation_id_prefix="remind-", key="cart:1")) == ["remind-1"]
        due = {s.operation_id: s.due_time_ms for s in pending}
        window = await _all(stub, due_after_ms=due["order-2"], due_before_ms=due["remind-1"])
        assert _ids(window) == ["order-2"]
        assert _ids(await _all(stub, due_after_ms=due["order-2"])) == ["order-2", "remind-1"]
        assert _ids(await _all(stub, due_before_ms=due["order-2"])) == ["order-1"]
        ended = await _all(stub, states=[CANCELLED, FORCED])
        assert [(s.operation_id, s.state) for s in ended] == [
            ("gone", CANCELLED),
            ("remind-2", FORCED),
        ]
        assert all(s.sequence > 0 for s in ended)
        mixed = await _all(stub, states=[WATCHING, CANCELLED], key="cart:1")
        assert [(s.operation_id, s.state) for s in mixed] == [
            ("gone", CANCELLED),
            ("order-1", WATCHING),
            ("remind-1", WATCHING),
        ]
        assert _ids(await _all(stub, states=[EXPIRED])) == []
    if kind == "durable":
        async with running(config) as stub:  # recovered operations are listed again
            assert _ids(await _all(stub)) == ["order-1", "order-2", "remind-1"]
            again = await _all(stub, states=[CANCELLED, FORCED])
            assert _ids(again) == ["gone", "remind-2"]


async def test_progress_is_included(tmp_path: Path) -> None:
    async with running(config_for("memory", tmp_path)) as stub:
        condition = pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=10))
        request = watch("pay-1", ["pay:1"])
        request.condition.CopyFrom(condition)
        await stub.TryCompleteElseWatch(request)
        await stub.CheckAndComplete(
            pb.CheckAndCompleteRequest(
                purgatory=NAME, key="pay:1", signal=pb.Signal(amount=4, source="card")
            )
        )
        (status,) = await _all(stub)
        assert status.state == WATCHING
        assert (status.result.signal_count, status.result.amount_sum) == (1, 4)
        assert list(status.result.sources) == ["card"]


async def test_paging_is_stable_under_concurrent_register_and_end(tmp_path: Path) -> None:
    rng = random.Random(16)
    async with running(config_for("memory", tmp_path)) as stub:
        initial = [f"op-{i:04d}" for i in range(600)]
        await stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(
                purgatory=NAME,
                operations=[
                    pb.OperationSpec(operation_id=i, keys=["k"], timeout_ms=600_000)
                    for i in initial
                ],
            )
        )
        # Half of them end while the listing runs; the other half stay pending throughout.
        to_end = set(rng.sample(initial, 300))
        stay = [i for i in initial if i not in to_end]
        order = sorted(to_end)
        rng.shuffle(order)
        seen: list[str] = []
        token = ""
        pages = 0
        added = 0
        while True:
            page = await stub.ListOperations(_request(token, 37))
            assert len(page.operations) <= 37
            seen.extend(_ids(list(page.operations)))
            pages += 1
            token = page.next_page_token
            if not token:
                break
            # Between pages: end a few, register new ones on both sides of the cursor.
            batch, order = order[:20], order[20:]
            if batch:
                await stub.Cancel(
                    pb.CancelRequest(purgatory=NAME, operation_ids=pb.OperationIds(ids=batch))
                )
            fresh = [f"op-{rng.randrange(10_000):04d}-new{added + j}" for j in range(5)]
            added += 5
            await stub.BatchTryCompleteElseWatch(
                pb.BatchTryCompleteElseWatchRequest(
                    purgatory=NAME,
                    operations=[
                        pb.OperationSpec(operation_id=i, keys=["k"], timeout_ms=600_000)
                        for i in fresh
                    ],
                )
            )
        assert pages > 10
        assert seen == sorted(seen) and len(seen) == len(set(seen)), "an id twice or out of order"
        missing = set(stay) - set(seen)
        assert not missing, f"pending throughout but not listed: {sorted(missing)[:5]}"


async def test_tokens_and_page_sizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(config_for("memory", tmp_path)) as stub:
        await stub.BatchTryCompleteElseWatch(
            pb.BatchTryCompleteElseWatchRequest(
                purgatory=NAME,
                operations=[
                    pb.OperationSpec(operation_id=f"t-{i:05d}", timeout_ms=600_000)
                    for i in range(1200)
                ],
            )
        )
        first = await stub.ListOperations(_request())
        assert len(first.operations) == listing.DEFAULT_PAGE_SIZE and first.next_page_token
        big = await stub.ListOperations(_request(page_size=5000))
        assert len(big.operations) == listing.MAX_PAGE_SIZE
        # A token is bound to its filter (and purgatory): anything else is refused.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListOperations(_request(first.next_page_token, operation_id_prefix="t-"))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "page_token" in (info.value.details() or "")
        for bad in ("garbage!", "bm90LWEtdG9rZW4"):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ListOperations(_request(bad))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        for bad_filter, field in (
            ({"states": [0]}, "filter.states[0]"),
            ({"due_after_ms": 10, "due_before_ms": 10}, "filter.due_before_ms"),
            ({"operation_id_prefix": "x" * 500}, "filter.operation_id_prefix"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ListOperations(_request(**bad_filter))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert field in (info.value.details() or "")
        # A selective filter over many non-matching operations: pages stay bounded (short
        # or empty ones carry a token) and paging still finds every match.
        monkeypatch.setattr(listing, "MAX_EXAMINED", 50)
        await stub.TryCompleteElseWatch(watch("t-99999", [], 60_000))  # due first
        pages = 0
        token = ""
        found: list[str] = []
        while True:
            page = await stub.ListOperations(
                _request(token, due_before_ms=2**62, due_after_ms=1, page_size=10)
            )
            found.extend(_ids(list(page.operations)))
            pages += 1
            token = page.next_page_token
            if not token:
                break
        assert len(found) == 1201
        pages_all = pages
        token, found, pages = "", [], 0
        near = (
            await stub.GetOperation(pb.GetOperationRequest(purgatory=NAME, operation_id="t-99999"))
        ).operation.due_time_ms
        while True:
            page = await stub.ListOperations(_request(token, due_before_ms=near + 1))
            found.extend(_ids(list(page.operations)))
            pages += 1
            token = page.next_page_token
            if not token:
                break
        assert found == ["t-99999"]
        assert pages >= 1200 // 50 and pages_all >= 120


def test_sorted_ids_matches_a_sorted_set() -> None:
    rng = random.Random(7)
    ids = SortedIds(load=4)
    assert list(SortedIds(["b", "a", "c", "a"], load=2)) == ["a", "b", "c"]
    ref: set[str] = set()
    for _ in range(5000):
        value = f"{rng.randrange(400):03d}"
        if rng.random() < 0.6:
            ids.add(value)
            ref.add(value)
        else:
            ids.discard(value)
            ref.discard(value)
        if rng.random() < 0.05:
            ids.check()
            cursor = f"{rng.randrange(400):03d}"
            assert list(ids.iter_from(cursor, inclusive=False)) == sorted(
                x for x in ref if x > cursor
            )
            assert list(ids.iter_from(cursor, inclusive=True)) == sorted(
                x for x in ref if x >= cursor
            )
    ids.check()
    assert list(ids) == sorted(ref) and len(ids) == len(ref)
    assert all((x in ids) == (x in ref) for x in ("000", "200", "399", "zzz"))


async def test_async_client_pages_and_iterates(tmp_path: Path) -> None:
    server, port = await create_server("127.0.0.1:0", config_for("memory", tmp_path))
    try:
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", purgatory=NAME, timeout=10) as c:
            specs = [
                OperationSpec((f"k{i % 3}",), LONG, operation_id=f"a-{i:03d}") for i in range(25)
            ]
            await c.batch_try_complete_else_watch(specs)
            await c.cancel(["a-000"])
            page = await c.list_operations(page_size=10)
            assert [s.operation_id for s in page.operations] == [f"a-{i:03d}" for i in range(1, 11)]
            assert page.next_page_token
            nxt = await c.list_operations(page_size=10, page_token=page.next_page_token)
            assert nxt.operations[0].operation_id == "a-011"
            every = [s.operation_id async for s in c.iter_operations(page_size=7)]
            assert every == [f"a-{i:03d}" for i in range(1, 25)]
            on_k1 = [s.operation_id async for s in c.iter_operations(key="k1")]
            assert on_k1 == [f"a-{i:03d}" for i in range(1, 25) if i % 3 == 1]
            ended = [s async for s in c.iter_operations(states=[OperationState.CANCELLED])]
            assert [(s.operation_id, s.state) for s in ended] == [("a-000", CANCELLED)]
            with pytest.raises(InvalidArgumentError):
                await c.list_operations(page_token=page.next_page_token, key="k1")
    finally:
        await server.stop(0.5)


def test_sync_client_and_cli_ls(capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread() as st, PurgatoryClient(st.target, timeout=10) as c:
        for i in range(12):
            c.try_complete_else_watch([f"cart:{i % 2}"], 600_000, operation_id=f"order-{i:02d}")
        c.try_complete_else_watch(["x"], 600_000, operation_id="remind-1")
        assert [s.operation_id for s in c.iter_operations(prefix="order-", page_size=5)] == [
            f"order-{i:02d}" for i in range(12)
        ]
        t = ("--target", st.target)
        assert main([*t, "ls", "--key", "cart:1"]) == 0
        out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [o["operation_id"] for o in out] == [f"order-{i:02d}" for i in range(1, 12, 2)]
        assert all(o["state"] == "WATCHING" for o in out)
        assert main([*t, "ls", "--limit", "3"]) == 0
        out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [o["operation_id"] for o in out] == ["order-00", "order-01", "order-02"]
        assert main([*t, "ls", "--page-size", "10"]) == 0
        out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert len(out) == 11 and out[-1]["next_page_token"]
        assert main([*t, "ls", "--page-token", out[-1]["next_page_token"]]) == 0
        rest = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [o.get("operation_id") for o in rest] == ["order-10", "order-11", "remind-1", None]
        assert rest[-1] == {"next_page_token": ""}
        c.cancel(key="x")
        assert main([*t, "ls", "--state", "cancelled"]) == 0
        out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(o["operation_id"], o["state"]) for o in out] == [("remind-1", "CANCELLED")]
        assert main([*t, "ls", "--due-before-ms", "5", "--due-after-ms", "5"]) == 1
        assert "due_before_ms" in capsys.readouterr().err
        # watch --extend-on-resend: a re-send of the id pushes the deadline back.
        debounce = ("watch", "--id", "d1", "--timeout-ms", "60000", "--no-wait")
        assert main([*t, *debounce, "--extend-on-resend", "--max-extend-ms", "90000"]) == 0
        first = json.loads(capsys.readouterr().out)
        time.sleep(0.01)
        assert main([*t, *debounce]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["created"] is False and again["due_time_ms"] > first["due_time_ms"]
        assert main([*t, "watch", "k", "--timeout-ms", "1000", "--max-extend-ms", "5000"]) == 1
        assert "max_extend_ms" in capsys.readouterr().err
