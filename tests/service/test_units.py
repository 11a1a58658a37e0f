"""Service building blocks without a network: the inbox's batching, the bounded value
store, the event log's window, progress accounting and configuration loading."""

from __future__ import annotations

import asyncio
import threading

import pytest
from purgatory_server._service.config.server_config import ConfigError, load_config
from purgatory_server._service.core.latest_values import LatestValues
from purgatory_server._service.core.progress import Progress
from purgatory_server._service.model.conditions import (
    ConditionKind,
    ConditionSpec,
    ResultSnapshot,
    SignalRecord,
)
from purgatory_server._service.model.errors import OutOfRange
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome
from purgatory_server._service.outcomes.event_log import EventLog
from purgatory_server._service.outcomes.inbox import Inbox


async def test_inbox_hands_a_burst_from_another_thread_over_in_one_batch() -> None:
    loop = asyncio.get_running_loop()
    batches: list[list[int]] = []
    inbox: Inbox[int] = Inbox(loop, batches.append)
    wakeups = 0
    real = loop.call_soon_threadsafe

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal wakeups
        wakeups += 1
        return real(*args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        producer = threading.Thread(target=lambda: [inbox.put(i) for i in range(1000)])
        producer.start()
        producer.join()  # the loop cannot drain meanwhile: all 1000 wait for one drain
        for _ in range(3):
            await asyncio.sleep(0)
    finally:
        del loop.call_soon_threadsafe
    assert batches == [list(range(1000))]
    assert wakeups == 1


async def test_inbox_drain_on_the_loop_is_synchronous() -> None:
    got: list[list[str]] = []
    inbox: Inbox[str] = Inbox(asyncio.get_running_loop(), got.append)
    inbox.put("a")
    assert inbox.drain() == 1
    assert got == [["a"]]
    await asyncio.sleep(0)  # the scheduled drain finds nothing more
    assert got == [["a"]]


def test_latest_values_evicts_idle_unwatched_keys_first() -> None:
    watched = {"w"}  # the engine's watch lists, as far as eviction asks
    values = LatestValues(bound=3, is_watched=watched.__contains__)
    for key in ("w", "a", "b", "c", "d"):
        values.update(key, 1)
    assert len(values) == 3
    assert values.get("w") == 1  # watched: kept although it is the oldest
    assert values.get("a") is None and values.get("b") is None
    # Skipping a watched key counts as a use: it went to the recent end (c, w, d).
    watched.discard("w")
    values.update("e", 2)  # evicts c
    assert values.get("w") == 1
    values.update("f", 3)  # evicts w: unwatched now, and the idlest
    assert values.get("w") is None
    assert values.known(["c", "d", "e", "f", "zz"]) == {"d": 1, "e": 2, "f": 3}


def test_latest_values_may_exceed_the_bound_only_by_watched_keys() -> None:
    values = LatestValues(bound=2, is_watched={"a", "b", "c"}.__contains__)
    for key in ("a", "b", "c"):
        values.update(key, 5)
    assert len(values) == 3


def _outcome(seq: int) -> Outcome:
    return Outcome(
        seq, "p", f"op{seq}", OperationState.COMPLETED, (), b"", ResultSnapshot(), 0, 0, 0
    )


def test_event_log_window_and_restore() -> None:
    log = EventLog(retained=3)
    for _ in range(5):
        log.append(_outcome(log.next_sequence()))
    assert (log.oldest_sequence, log.last_sequence) == (3, 5)
    assert [o.sequence for o in log.after(2)] == [3, 4, 5]
    assert log.after(5) == []
    with pytest.raises(OutOfRange) as info:
        log.after(1)
    assert info.value.oldest == 3
    restored = EventLog(retained=3, last_sequence=5, events=log.snapshot())
    restored.append(_outcome(restored.next_sequence()))
    assert [o.sequence for o in restored.after(3)] == [4, 5, 6]
    with pytest.raises(ValueError, match="consecutive"):
        EventLog(3, last_sequence=5, events=[_outcome(3), _outcome(5)])


def test_progress_min_signals_distinct_and_anonymous() -> None:
    spec = ConditionSpec(ConditionKind.MIN_SIGNALS, count=3, distinct_sources=True)
    progress = Progress(spec, ("k",), {}, data_limit=10, sources_limit=8)
    for source in ("a", "a", ""):
        progress.add("k", SignalRecord(source=source))
    assert not progress.satisfied()  # a once, one anonymous
    progress.add("k", SignalRecord(source="b"))
    assert progress.satisfied()
    assert progress.snapshot().signal_count == 3


def test_config_file_env_and_flags_precedence(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "server.toml"
    path.write_text(
        'listen = "0.0.0.0:6000"\ngrace_s = 2\n[limits]\nmax_keys_per_operation = 9\n'
        "[defaults]\ntick_ms = 2\n"
        '[[purgatories]]\nname = "produce"\nmax_pending = 10\n[[purgatories]]\nname = "fetch"\n'
    )
    env = {"PURGATORY_GRACE_S": "3.5", "PURGATORY_LIMITS_MAX_KEY_LENGTH": "12", "HOME": "/x"}
    config = load_config(path, env=env, overrides={"listen": "127.0.0.1:7000"})
    assert config.listen == "127.0.0.1:7000"
    assert config.grace_s == 3.5
    assert (config.limits.max_keys_per_operation, config.limits.max_key_length) == (9, 12)
    assert [(p.name, p.tick_ms, p.max_pending) for p in config.purgatories] == [
        ("produce", 2, 10),
        ("fetch", 2, 1_000_000),
    ]
    assert load_config(env={}).purgatories[0].name == "default"
    assert [p.name for p in load_config(env={"PURGATORY_PURGATORIES": "a, b"}).purgatories] == [
        "a",
        "b",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "unknown option nope"),
        ("[limits]\nmax_keys = 1", "limits.max_keys"),
        ('grace_s = "soon"', "grace_s"),
        ("[[purgatories]]\ntick_ms = 1", "needs a name"),
        ('purgatories = ["a", "a"]', "unique"),
        ("[defaults]\ntick_ms = 0", "tick_ms must be positive"),
        ("[limits]\nmemory_budget_bytes = 1000", "memory_budget_bytes must be 0"),
        ("[limits]\nretained_memory_percent = 95", r"retained_memory_percent must be in \[0, 90\]"),
        ("[limits]\npurgatory_memory_percent = 0", "purgatory_memory_percent"),
    ],
)
def test_config_errors_name_the_option(tmp_path, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, env={})
