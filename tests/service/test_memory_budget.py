"""The memory budget under abuse (issue 22, patterns 3-5): a real server on loopback with a
small budget, its peak RSS over the baseline measured from ``/proc``.

Each pattern once made the server hold hundreds of megabytes (docs/benchmarks.md "Memory
budget" has the figures before and after). Here each must stay within the configured
budget plus a fixed overhead (the interpreter's arenas, gRPC's buffers, requests in
flight), the offending client gets the documented status, and a well-behaved client on
another purgatory keeps being served.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_client import (
    Condition,
    OperationSpec,
    PurgatoryClient,
    PurgatoryConfig,
    ResourceExhaustedError,
    Signal,
)
from purgatory_client.errors import OutOfRangeError

from harness import ServerProcess

MIB = 1 << 20
BUDGET = 64 * MIB
# The interpreter's arenas and gRPC's buffers beyond what the budget charges: RSS is
# measured at its peak, with requests of up to ~2 MB being decoded meanwhile.
OVERHEAD = 64 * MIB
CONFIG = f"""
grace_s = 0.5
[limits]
memory_budget_bytes = {BUDGET}
[[purgatories]]
name = "default"
[[purgatories]]
name = "other"
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path, config=CONFIG, label="budget") as proc:
        yield proc


@pytest.fixture
def client(server: ServerProcess) -> Iterator[PurgatoryClient]:
    with PurgatoryClient(server.address, timeout=30) as c:
        yield c


def _baseline(server: ServerProcess, client: PurgatoryClient) -> int:
    client.try_complete_else_watch(["warm"], 60_000)  # channel and handlers warmed up
    client.check_and_complete("warm")
    return server.rss_bytes()


def _grown(server: ServerProcess, baseline: int) -> int:
    return server.peak_rss_bytes() - baseline


def _well_behaved(client: PurgatoryClient, key: str) -> None:
    """A small watch and its signal on the other purgatory: served."""
    client.try_complete_else_watch([key], 60_000, purgatory="other")
    assert client.check_and_complete(key, purgatory="other") == 1


def test_signal_data_is_shared_not_copied(server: ServerProcess, client: PurgatoryClient) -> None:
    """Pattern 3: 2,000 pending operations on one key, 4 signals of 64 KiB. Copied into
    each operation that was +501 MB; stored once it is the 256 KiB sent."""
    baseline = _baseline(server, client)
    condition = Condition.min_signals(10)
    for batch in range(4):
        specs = [
            OperationSpec(("hot",), 600_000, condition, operation_id=f"op-{batch}-{i}")
            for i in range(500)
        ]
        client.batch_try_complete_else_watch(specs)
    chunks = [bytes([n]) * 64 * 1024 for n in range(4)]
    for chunk in chunks:
        assert client.check_and_complete("hot", Signal(data=chunk)) == 0
        _well_behaved(client, f"probe-{chunk[0]}")
    grown = _grown(server, baseline)
    # Every operation still sees all the data it accumulated.
    status = client.get_operation("op-3-499")
    assert status.result is not None and status.result.data == b"".join(chunks)
    ended = client.force_complete("op-0-0")
    assert ended.operation.result is not None
    assert ended.operation.result.data == b"".join(chunks)
    assert grown < BUDGET + OVERHEAD, f"RSS grew {grown / MIB:.0f} MiB"


def test_keys_count_against_the_budget(server: ServerProcess, client: PurgatoryClient) -> None:
    """Pattern 4: operations with 1,024 distinct 256-character keys (~700 KB held each):
    400 of them were +274 MB. Past the purgatory's share: RESOURCE_EXHAUSTED with a retry
    delay, and the other purgatory keeps being served."""
    baseline = _baseline(server, client)
    accepted = refused = 0
    retry_delay = None
    for n in range(400):
        keys = [f"{n:04d}-{k:04d}-".ljust(256, "k") for k in range(1024)]
        try:
            client.try_complete_else_watch(keys, 600_000, operation_id=f"big-{n}")
            accepted += 1
        except ResourceExhaustedError as exc:
            refused += 1
            retry_delay = exc.retry_delay
        if n % 50 == 0:
            _well_behaved(client, f"probe-{n}")
    grown = _grown(server, baseline)
    assert refused > 0 and accepted > 0, (accepted, refused)
    assert retry_delay is not None
    _well_behaved(client, "probe-end")
    # The share frees up as operations end.
    client.cancel(prefix="big-")
    client.try_complete_else_watch([f"{k:04d}".ljust(256, "x") for k in range(1024)], 60_000)
    assert grown < BUDGET + OVERHEAD, f"RSS grew {grown / MIB:.0f} MiB ({accepted} accepted)"


def test_retained_outcomes_are_bounded_by_bytes(
    server: ServerProcess, client: PurgatoryClient
) -> None:
    """Pattern 5: purgatories with huge ``retained_events`` and outcomes of 64 KiB. By
    count the server refused CreatePurgatory at the 21st (``max_total_retained_events``)
    and still let each window hold gigabytes; by bytes every purgatory is created and the
    windows give up their oldest outcomes past the retained pool."""
    baseline = _baseline(server, client)
    names = [f"wide-{i}" for i in range(30)]
    for name in names:
        client.create_purgatory(name, PurgatoryConfig(retained_events=1_000_000))
    payload = os.urandom(64 * 1024)
    for round_ in range(4):
        for name in names:
            specs = [
                OperationSpec(("k",), 600_000, payload=payload[:-1] + bytes([i])) for i in range(25)
            ]
            client.batch_try_complete_else_watch(specs, purgatory=name)
            assert client.check_and_complete("k", purgatory=name) == 25
        _well_behaved(client, f"probe-{round_}")
    grown = _grown(server, baseline)
    # 3,000 outcomes of 64 KiB were retained by count; by bytes the oldest were given up.
    with pytest.raises(OutOfRangeError):
        next(iter(client.subscribe(after_sequence=0, purgatory=names[0])))
    client.create_purgatory("late", PurgatoryConfig(retained_events=1_000_000))
    assert grown < BUDGET + OVERHEAD, f"RSS grew {grown / MIB:.0f} MiB"
