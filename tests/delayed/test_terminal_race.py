"""Every way of ending an operation at once, through the service, with a journal replay.

Threads race reschedules, cancels, signals and force-completes on the same short-lived
operations while the real timer expires them at the tick boundary, against a durable
server process. Then: exactly one outcome per operation on the stream, every call that
claimed an ending (a force-complete answering ``completed``, a cancel listing the id, a
signal counting a completion) matches that outcome and no other claim does, and after a
SIGKILL and restart the journal replays the very same outcomes and fires nothing again.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from purgatory_client import (
    FailedPreconditionError,
    OperationSpec,
    OperationState,
    PurgatoryClient,
)

from tests.durability.crash_load import DurableServer
from tests.durability.helpers import NAME

N = 150
THREADS = 4
RUN_S = 1.5


def _outcomes(client: PurgatoryClient, count: int) -> dict[str, tuple[OperationState, int]]:
    out: dict[str, tuple[OperationState, int]] = {}
    seen = Counter[str]()
    for event in client.subscribe(after_sequence=0):
        seen[event.operation_id] += 1
        out[event.operation_id] = (event.state, event.sequence)
        if sum(seen.values()) == count:
            break
    assert max(seen.values()) == 1, "an operation ended twice"
    return out


@dataclass
class Claims:
    """What the racing calls said they ended (threads update it under ``lock``)."""

    forced: Counter[str] = field(default_factory=Counter)
    cancelled: Counter[str] = field(default_factory=Counter)
    signalled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _race(target: str, seed: int, claims: Claims) -> None:
    """For ``RUN_S``: random reschedules, cancels, signals and force-completes."""
    rng = random.Random(seed)
    deadline = time.monotonic() + RUN_S
    with PurgatoryClient(target, purgatory=NAME, timeout=10) as client:
        while time.monotonic() < deadline:
            i = rng.randrange(N)
            op_id = f"op{i}"
            action = rng.randrange(4)
            if action == 0:
                # FailedPrecondition: it had ended, the race was lost, nothing applied.
                with contextlib.suppress(FailedPreconditionError):
                    client.reschedule(op_id, timeout_ms=rng.choice((1, 2, 5, 50, 200)))
            elif action == 1:
                ended = client.cancel([op_id])
                with claims.lock:
                    claims.cancelled.update(s.operation_id for s in ended)
            elif action == 2:
                n = client.check_and_complete(f"k{i}")
                with claims.lock:
                    claims.signalled += n
            else:
                result = client.force_complete(op_id)
                if result.completed:
                    with claims.lock:
                        claims.forced[op_id] += 1


def _hammer(target: str, claims: Claims) -> None:
    """``THREADS`` threads racing; any exception in one fails the test (no silent death)."""
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        try:
            _race(target, seed, claims)
        except BaseException as exc:  # noqa: BLE001 (re-raised below: no silent thread death)
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def _check_claims(before: dict[str, tuple[OperationState, int]], claims: Claims) -> None:
    """One outcome each, matching exactly the calls that claimed an ending."""
    assert len(before) == N
    states = Counter(state for state, _ in before.values())
    forced, cancelled = claims.forced, claims.cancelled
    assert max(forced.values(), default=1) == 1 and max(cancelled.values(), default=1) == 1
    assert {i for i, (s, _) in before.items() if s is OperationState.FORCE_COMPLETED} == set(forced)
    assert {i for i, (s, _) in before.items() if s is OperationState.CANCELLED} == set(cancelled)
    assert states[OperationState.COMPLETED] == claims.signalled
    # Every way of ending took part (the timer too).
    assert all(states[s] > 0 for s in OperationState if s.is_final), states
    assert sorted(seq for _, seq in before.values()) == list(range(1, N + 1))


def test_one_terminal_outcome_per_operation_also_after_replay(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = DurableServer(data, "always", tmp_path / "log")
    claims = Claims()
    try:
        target = f"127.0.0.1:{proc.wait_port()}"
        with PurgatoryClient(target, purgatory=NAME, timeout=10) as c:
            c.batch_try_complete_else_watch(
                [OperationSpec((f"k{i}",), 200 + 8 * i, operation_id=f"op{i}") for i in range(N)]
            )
        _hammer(target, claims)
        with PurgatoryClient(target, purgatory=NAME, timeout=10) as c:
            deadline = time.monotonic() + 10
            while c.get_purgatory(NAME).pending and time.monotonic() < deadline:
                time.sleep(0.02)  # the last reschedules (at most 200 ms) expire
            assert c.get_purgatory(NAME).pending == 0
            before = _outcomes(c, N)
    finally:
        proc.kill()
    _check_claims(before, claims)

    proc = DurableServer(data, "always", tmp_path / "log")
    try:
        with PurgatoryClient(f"127.0.0.1:{proc.wait_port()}", purgatory=NAME, timeout=10) as c:
            info = c.get_purgatory(NAME)
            assert (info.pending, info.last_sequence) == (0, N)
            assert _outcomes(c, N) == before
            for op_id in ("op0", f"op{N - 1}"):
                status = c.get_operation(op_id)
                assert (status.state, status.sequence) == before[op_id]
    finally:
        proc.stop()
