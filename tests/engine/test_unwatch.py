"""Prompt removal from watch lists (``unwatch_on_complete``, the default).

A completed operation leaves every key's list at once, whichever way it completed, so
``watched()``/``watched_keys()`` are exact and nothing keeps a completed operation alive.
Kafka's lazy mode (``unwatch_on_complete=False``) is pinned by ``test_purgatory.py``.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from purgatory_server import DelayedOperationPurgatory, MockTime

from .helpers import FlagOperation, advance


@pytest.fixture
def clock() -> MockTime:
    return MockTime(start_ms=0)


@pytest.fixture
def purgatory(clock: MockTime) -> Iterator[DelayedOperationPurgatory[FlagOperation]]:
    p: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
        "unwatch", reaper_enabled=False, time=clock
    )
    assert p.unwatch_on_complete
    yield p
    p.shutdown()


def test_completion_by_one_key_leaves_every_key(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    ops = [FlagOperation(1000) for _ in range(500)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [f"first-{i}", f"second-{i}"])
    assert purgatory.watched() == 1000 and purgatory.watched_keys() == 1000
    for i, op in enumerate(ops):
        op.ready = True
        assert purgatory.check_and_complete(f"first-{i}") == 1
    # The second keys were never checked, and no purge ran: still nothing is listed.
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0


def test_expiry_leaves_every_key(
    purgatory: DelayedOperationPurgatory[FlagOperation], clock: MockTime
) -> None:
    op = FlagOperation(50)
    keep = FlagOperation(500)
    purgatory.try_complete_else_watch(op, ["a", "b", "shared"])
    purgatory.try_complete_else_watch(keep, ["shared"])
    assert purgatory.watched() == 4
    advance(purgatory, clock, 50)
    assert op.expirations == 1
    assert purgatory.watched() == 1 and purgatory.watched_keys() == 1  # only `keep`
    advance(purgatory, clock, 450)
    assert keep.expirations == 1
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0


def test_force_complete_leaves_every_key(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    op = FlagOperation(1000)
    purgatory.try_complete_else_watch(op, ["x", "y"])
    assert op.force_complete() is True
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0
    assert op.force_complete() is False
    assert purgatory.watched() == 0


def test_a_completed_operation_is_not_kept_alive(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    op = FlagOperation(1000)
    purgatory.try_complete_else_watch(op, ["k1", "never-checked-again"])
    ref = weakref.ref(op)
    op.ready = True
    assert purgatory.check_and_complete("k1") == 1
    del op
    gc.collect()
    assert ref() is None, "a watch list still references the completed operation"


class _CompletingKey:
    """A key whose hashing force-completes an operation once: a completion that lands
    while the purgatory is still listing the operation's keys (force_complete takes no
    operation lock, so another thread can do exactly this)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.target: FlagOperation | None = None

    def __hash__(self) -> int:
        target, self.target = self.target, None
        if target is not None:
            assert target.force_complete()
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CompletingKey) and other.name == self.name


def test_completion_during_the_watch_leaves_no_entry(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    op = FlagOperation(1000)
    middle = _CompletingKey("middle")
    middle.target = op
    # "first" is listed, then hashing "middle" completes the op (its unwatch runs before
    # "middle" and "last" are listed), then the purgatory lists those two: the check after
    # the watch loop must remove them.
    assert purgatory.try_complete_else_watch(op, ["first", middle, "last"]) is False
    assert op.completions == 1
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0


def test_concurrent_completions_leave_nothing_listed(
    purgatory: DelayedOperationPurgatory[FlagOperation],
) -> None:
    ops = [FlagOperation(60_000) for _ in range(2000)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [f"k{i % 50}", f"j{i % 7}", f"own{i}"])
    for op in ops:
        op.ready = True

    def signal(keys: list[str]) -> None:
        for key in keys:
            purgatory.check_and_complete(key)

    def force(chunk: list[FlagOperation]) -> None:
        for op in chunk:
            op.force_complete()

    threads = [
        threading.Thread(target=signal, args=([f"k{i}" for i in range(50)],)),
        threading.Thread(target=signal, args=([f"j{i}" for i in range(7)],)),
        threading.Thread(target=force, args=(ops[::2],)),
        threading.Thread(target=force, args=(ops[1::2],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(op.completions == 1 for op in ops)
    assert purgatory.watched() == 0 and purgatory.watched_keys() == 0
