"""Attribute py-spy samples to the server's cost categories (bench.profile_server).

py-spy's raw output is one line per distinct stack, ``frame;frame;...;leaf count``, a
frame being ``function (file:line)`` for Python code and ``function (library.so)`` for
native code (``--native``). A sample belongs to the category of the frame *nearest the
leaf* that any rule below recognises: the leaf is where the CPU was, and walking outwards
skips frames that say nothing (libc, the interpreter's own C functions) until one that
does. So protobuf's C decoder called from the servicer counts as protobuf, and a list
comprehension in ``convert.py`` as conversion, not as the servicer that called it.

Rules are path fragments (``--full-filenames``) and native function or library names;
the first rule that matches a frame wins, so more specific rules come first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = ["ENGINE_RULES", "RECOVERY_RULES", "SERVER_RULES", "classify", "parse_raw"]

Rule = tuple[str, str]  # (fragment of the frame text, category)

# Native and library rules shared by every profile.
_COMMON: list[Rule] = [
    ("gc_collect", "garbage collector"),
    ("collect_with_callback", "garbage collector"),
    ("gc_collect_main", "garbage collector"),
    ("google/protobuf", "protobuf (encode/decode)"),
    ("_message.", "protobuf (encode/decode)"),
    ("upb_", "protobuf (encode/decode)"),
    ("/_pb2.py", "protobuf (encode/decode)"),
]

_TRANSPORT: list[Rule] = [
    ("cygrpc", "transport (grpc core, grpc.aio)"),
    ("/grpc/", "transport (grpc core, grpc.aio)"),
    ("grpc_", "transport (grpc core, grpc.aio)"),
    ("libgrpc", "transport (grpc core, grpc.aio)"),
    ("/asyncio/", "event loop (asyncio)"),
    ("selectors.py", "event loop (asyncio)"),
    ("epoll", "event loop (asyncio)"),
]

SERVER_RULES: list[Rule] = [
    *_COMMON,
    ("/_engine/", "engine (timer, watch lists)"),
    ("/_service/conditions.py", "conditions"),
    ("/_service/operation.py", "operation (try_complete, on_complete)"),
    ("/_service/events.py", "outcome/event building"),
    ("/_service/waiters.py", "long-poll waiters"),
    ("/_service/subscriptions.py", "subscriptions"),
    ("/_service/convert.py", "request/response conversion"),
    ("/_service/session_messages.py", "request/response conversion"),
    ("/_service/limits.py", "validation"),
    ("/_service/errors.py", "validation"),
    ("/_service/durable.py", "journal"),
    ("/_service/journal_codec.py", "journal"),
    ("/_journal/", "journal"),
    ("/_service/telemetry/", "telemetry"),
    ("/_service/purgatory.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/named_purgatory.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/operation_table.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/feed.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/validation.py", "validation"),
    ("/_service/session.py", "session (frames, acknowledgements)"),
    ("/_service/values.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/budget.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/inbox.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/registry.py", "purgatory bookkeeping (register/signal/publish)"),
    ("/_service/", "servicer/edge (handlers, auth, session)"),
    *_TRANSPORT,
    ("threading.py", "threads (locks, queues)"),
    ("queue.py", "threads (locks, queues)"),
]

ENGINE_RULES: list[Rule] = [
    *_COMMON,
    ("/_engine/watchers.py", "watch lists"),
    ("/_engine/purgatory.py", "purgatory (try/watch/check)"),
    ("/_engine/delayed_operation.py", "operation (complete once)"),
    ("/_engine/timer_task_list.py", "timer buckets (link/unlink)"),
    ("/_engine/timer_task.py", "timer buckets (link/unlink)"),
    ("/_engine/timing_wheel.py", "timing wheel"),
    ("/_engine/system_timer.py", "timing wheel"),
    ("/_engine/delay_queue.py", "delay queue (reaper wait)"),
    ("/_engine/executor.py", "executor hand-off"),
    ("/_engine/", "engine, other"),
    ("purgatory_perf.py", "harness (generator, completer, monitor)"),
    ("random.py", "harness (generator, completer, monitor)"),
    ("heapq", "harness (generator, completer, monitor)"),
    ("threading.py", "threads (locks, queues, sleeps)"),
    ("queue.py", "threads (locks, queues, sleeps)"),
]

RECOVERY_RULES: list[Rule] = [
    *_COMMON,
    ("/_journal/framing.py", "journal: read and check frames"),
    ("/_journal/segments.py", "journal: read and check frames"),
    ("/_journal/state.py", "journal: replay into state"),
    ("/_journal/recovery.py", "journal: replay into state"),
    ("/_journal/", "journal, other"),
    ("/_service/journal_codec.py", "decode pending operations"),
    ("/_service/convert.py", "decode pending operations"),
    ("/_service/conditions.py", "operation objects (progress)"),
    ("/_service/operation.py", "operation objects (progress)"),
    ("/_engine/", "engine: watch and arm"),
    ("/_service/durable.py", "service restore loop"),
    ("/_service/purgatory.py", "service restore loop"),
    ("/_service/values.py", "service restore loop"),
    ("/_service/budget.py", "service restore loop"),
    ("importlib", "start-up (imports)"),
    ("<frozen", "start-up (imports)"),
    *_TRANSPORT,
    ("/_service/", "start-up (server, registry)"),
    ("__main__.py", "start-up (server, registry)"),
]


def parse_raw(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """Stacks (root first) and their sample counts from py-spy's ``--format raw``."""
    stacks: list[tuple[list[str], int]] = []
    for raw in lines:
        line = raw.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        stacks.append((stack.split(";"), int(count)))
    return stacks


def classify(
    stacks: Iterable[tuple[list[str], int]], rules: list[Rule]
) -> tuple[Counter[str], Counter[str]]:
    """(samples per category, samples per unrecognised leaf) for ``stacks``."""
    per_category: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for frames, count in stacks:
        category = None
        for frame in reversed(frames):
            for fragment, name in rules:
                if fragment in frame:
                    category = name
                    break
            if category is not None:
                break
        if category is None:
            category = "other"
            unknown[frames[-1]] += count
        per_category[category] += count
    return per_category, unknown
