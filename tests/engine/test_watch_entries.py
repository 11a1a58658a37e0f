"""A key's watch entry: the lone operation itself, a ``Watchers`` from the second on.

Every way an entry changes shape (a second watcher, removal down to one and to none, a
completion read from one shape and discarded from the other, Kafka's lazy purge) keeps
``watched()``, ``watched_keys()`` and the order operations are tried in exact.
"""

from __future__ import annotations

from purgatory_server import DelayedOperationPurgatory, MockTime
from purgatory_server._engine.watchers import WatcherShard

from .helpers import FlagOperation


def _purgatory(lazy: bool = False) -> DelayedOperationPurgatory[FlagOperation]:
    return DelayedOperationPurgatory(
        "entries", reaper_enabled=False, time=MockTime(start_ms=0), unwatch_on_complete=not lazy
    )


def test_a_second_watcher_joins_the_first_in_order() -> None:
    p = _purgatory()
    first, second, third = FlagOperation(1000), FlagOperation(1000), FlagOperation(1000)
    p.try_complete_else_watch(first, ["k"])
    assert p.watched() == 1 and p.watched_keys() == 1
    p.try_complete_else_watch(second, ["k"])
    p.try_complete_else_watch(third, ["k"])
    assert p.watchers("k") == [first, second, third]
    assert p.watched() == 3 and p.watched_keys() == 1
    second.ready = True
    assert p.check_and_complete("k") == 1
    assert p.watchers("k") == [first, third]
    first.ready = third.ready = True
    assert p.check_and_complete("k") == 2
    assert p.watched() == 0 and p.watched_keys() == 0 and not p.is_watched("k")
    p.shutdown()


def test_one_operation_twice_on_a_key_is_one_entry() -> None:
    shard = WatcherShard()
    op = FlagOperation(1000)
    shard.watch("k", op)
    shard.watch("k", op)
    assert shard.count == 1 and shard.snapshot("k") == [op]
    other = FlagOperation(1000)
    shard.watch("k", other)
    shard.watch("k", other)
    assert shard.count == 2 and shard.snapshot("k") == [op, other]
    shard.remove("k", op)
    shard.remove("k", op)  # gone already: nothing changes
    assert shard.count == 1 and shard.snapshot("k") == [other]
    shard.remove("k", other)
    assert shard.count == 0 and shard.keys() == 0 and not shard.has("k")


def test_a_completion_read_alone_is_discarded_after_others_joined() -> None:
    """check_and_complete reads a key's operations, tries them without the lock, then
    discards the completed ones: the entry may have changed shape in between."""
    shard = WatcherShard()
    lone = FlagOperation(1000)
    shard.watch("k", lone)
    read = shard.snapshot("k")  # [lone], read while it was alone
    late = FlagOperation(1000)
    shard.watch("k", late)  # now a Watchers of two
    shard.discard("k", read)
    assert shard.snapshot("k") == [late] and shard.count == 1
    shard.discard("k", [late])
    assert shard.keys() == 0 and shard.count == 0
    # And the other way: read from a Watchers that has emptied and gone, then a new lone
    # operation took the key: discarding the old ones leaves it alone.
    a, b = FlagOperation(1000), FlagOperation(1000)
    shard.watch("j", a)
    shard.watch("j", b)
    read = shard.snapshot("j")
    shard.remove("j", a)
    shard.remove("j", b)
    newcomer = FlagOperation(1000)
    shard.watch("j", newcomer)
    shard.discard("j", read)
    assert shard.snapshot("j") == [newcomer] and shard.count == 1


def test_the_lazy_purge_drops_completed_lone_entries_too() -> None:
    p = _purgatory(lazy=True)
    alone = [FlagOperation(1000) for _ in range(3)]
    for i, op in enumerate(alone):
        p.try_complete_else_watch(op, [f"alone-{i}"])
    pair = [FlagOperation(1000), FlagOperation(1000)]
    for op in pair:
        p.try_complete_else_watch(op, ["pair"])
    for op in (alone[0], alone[1], pair[0]):
        op.force_complete()  # the lazy mode leaves them listed
    assert p.watched() == 5 and p.watched_keys() == 4
    purged = sum(shard.purge_completed() for shard in p._shards)
    assert purged == 3
    assert p.watched() == 2 and p.watched_keys() == 2
    assert p.watchers("alone-2") == [alone[2]] and p.watchers("pair") == [pair[1]]
    p.shutdown()


def test_pop_key_returns_either_shape() -> None:
    shard = WatcherShard()
    a, b, c = FlagOperation(1000), FlagOperation(1000), FlagOperation(1000)
    shard.watch("one", a)
    shard.watch("two", b)
    shard.watch("two", c)
    assert shard.pop_key("one") == [a] and shard.pop_key("two") == [b, c]
    assert shard.pop_key("none") == [] and shard.count == 0 and shard.keys() == 0
