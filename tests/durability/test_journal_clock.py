"""The durable journal stamps signal records with the purgatory's injected clock."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from purgatory_server._engine.time import MockTime
from purgatory_server._service.durable.local_store import DurableHooks
from purgatory_server._service.model.conditions import SignalRecord


async def test_signal_records_use_the_injected_clock() -> None:
    clock = MockTime(wall_clock_start_ms=1_000)
    clock.sleep(234)
    # The WAL is not reached: the record is only buffered until the loop's next turn.
    journal = DurableHooks(cast(Any, None), asyncio.get_running_loop(), clock)
    journal.on_signal("p", "k", SignalRecord(amount=1))
    (record,) = journal._buffer
    assert record.signal.applied_wall_ms == 1_234
    journal._batch = None  # nothing to submit: the WAL is a stand-in
