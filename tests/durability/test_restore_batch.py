"""Recovery's batch path: the caching decoder, and re-arming in batches.

``PendingDecoder`` must decode exactly what ``decode_pending`` decodes while sharing one
condition and one key string between operations; a restart re-arms every recovered
operation (in batches), completes at once those whose replayed signals satisfy them,
and drops the journal's start-up snapshot of pending operations afterwards.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, PendingOperation
from purgatory_server._service import create_server
from purgatory_server._service.config.server_config import PurgatorySettings
from purgatory_server._service.durable import local_store
from purgatory_server._service.durable.catalog import journal_dir, write_settings
from purgatory_server._service.durable.codec import PendingDecoder, decode_pending
from purgatory_server._service.model.conditions import EMPTY_SIGNAL, ConditionKind, ConditionSpec
from purgatory_server._service.wire.convert import condition_to_proto

from .helpers import NAME, durable_config


def _pending(i: int, spec: ConditionSpec, keys: list[str], signals: int = 0) -> PendingOperation:
    reg = JournalRecord.OperationRegistered(
        purgatory="p",
        operation_id=f"op-{i}",
        keys=keys,
        timeout_ms=1000 + i,
        condition=condition_to_proto(spec).SerializeToString(),
        payload=bytes([i % 256]) * 32,
        due_wall_ms=5000 + i,
        created_wall_ms=4000 + i,
    )
    sigs = tuple(
        JournalRecord.SignalApplied(purgatory="p", key=keys[0], amount=n + 1, source=f"s{n}")
        for n in range(signals)
    )
    return PendingOperation(
        reg.SerializeToString(), tuple(s.SerializeToString() for s in sigs), reg.due_wall_ms
    )


def test_pending_decoder_equals_decode_pending_and_shares_keys() -> None:
    specs = [
        ConditionSpec(),
        ConditionSpec(ConditionKind.MIN_SIGNALS, count=2, distinct_sources=True),
        ConditionSpec(ConditionKind.VALUES_AT_LEAST, targets=(("a", 3),), default_target=1),
    ]
    pendings = [
        _pending(i, specs[i % 3], [f"key-{i % 4}", f"key-{(i + 1) % 4}"][: 1 + i % 2], i % 3)
        for i in range(30)
    ]
    decode = PendingDecoder()
    decoded = [decode(p) for p in pendings]
    assert decoded == [decode_pending(p) for p in pendings]
    firsts = {}
    for definition, *_ in decoded:
        for key in definition.keys:
            assert firsts.setdefault(key, key) is key  # one str object per distinct key
    assert {id(d.condition) for d, *_ in decoded if d.condition == specs[1]} == {
        id(decoded[1][0].condition)
    }


def _write_journal(data_dir: Path) -> None:
    """Ten pending ANY_KEY operations on k0..k2, then a signal on k2 whose outcomes never
    made it to the journal (a crash in between): op-2, op-5 and op-8 are satisfied."""
    write_settings(data_dir, PurgatorySettings(name=NAME, durable=True, retained_events=1000))
    condition = condition_to_proto(ConditionSpec()).SerializeToString()
    now = int(time.time() * 1000)
    records = [
        JournalRecord(
            registered=JournalRecord.OperationRegistered(
                purgatory=NAME,
                operation_id=f"op-{i}",
                keys=[f"k{i % 3}"],
                timeout_ms=600_000,
                condition=condition,
                payload=b"p" * 32,
                due_wall_ms=now + 600_000,
                created_wall_ms=now,
            )
        )
        for i in range(10)
    ]
    records.append(
        JournalRecord(signal=JournalRecord.SignalApplied(purgatory=NAME, key="k2", amount=1))
    )
    config = JournalConfig(fsync=FsyncPolicy.NEVER, auto_compact=False)
    with Journal.open(journal_dir(data_dir, NAME), config) as journal:
        journal.submit(records)
        journal.flush()


async def test_restart_rearms_in_batches_and_releases_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_store, "RESTORE_BATCH", 3)  # several engine calls
    _write_journal(tmp_path)
    server, _port = await create_server("127.0.0.1:0", durable_config(tmp_path))
    try:
        purgatory = server.registry.get(NAME)
        store = server.registry._durable[NAME]
        assert store._wal.recovered.pending == {}  # the snapshot was released
        for _ in range(200):  # the satisfied three are published by the loop
            if purgatory.stats().pending == 7:
                break
            await asyncio.sleep(0.01)
        assert purgatory.stats().pending == 7
        assert sorted(e.operation_id for e in purgatory.feed.log.after(0)) == [
            "op-2",
            "op-5",
            "op-8",
        ]
        assert purgatory.signal([("k1", EMPTY_SIGNAL)]) == [3]  # op-1, op-4, op-7
    finally:
        await server.stop(0.5)
