"""Attribute py-spy samples to the server's cost categories (bench.profile_server).

py-spy's raw output is one line per distinct stack, ``frame;frame;...;leaf count``, a
frame being ``function (file:line)`` for Python code and ``function (library.so)`` for
native code (``--native``). A sample belongs to the category of the frame *nearest the
leaf* that any rule below recognises: the leaf is where the CPU was, and walking outwards
skips frames that say nothing (libc, the interpreter's own C functions) until one that
does. So protobuf's C decoder called from the servicer counts as protobuf, and a list
comprehension in ``wire/convert.py`` as conversion, not as the servicer that called it.

Rules are path fragments (``--full-filenames``) and native function or library names;
the first rule that matches a frame wins, so more specific rules come first. The paths
are this tree's layout (``_service/<package>/<module>.py``): a module that moves must move
here too, or its samples fall to the catch-all of its package.
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

_BOOKKEEPING = "purgatory bookkeeping (register/signal/publish)"
# The compiled build's functions (mypyc names them ``CPyDef_<module>___<name>``, all in
# one extension, whose source path names the engine): by module, before the path rules.
_COMPILED_SERVICE: list[Rule] = [
    ("_delayed_operation___", "engine (timer, watch lists)"),
    ("_progress___", "conditions"),
    ("_operation___", "operation (try_complete, on_complete)"),
    ("_event_log___", "outcome/event building"),
    ("_validation___", "validation"),
    ("_convert___", "request/response conversion"),
    ("_session_messages___", "request/response conversion"),
    ("_named_purgatory___", _BOOKKEEPING),
    ("_operation_table___", _BOOKKEEPING),
    ("_feed___", _BOOKKEEPING),
    ("_budget___", _BOOKKEEPING),
    ("_sizes___", _BOOKKEEPING),
]
SERVER_RULES: list[Rule] = [
    *_COMMON,
    *_COMPILED_SERVICE,
    ("/_engine/", "engine (timer, watch lists)"),
    ("/_service/core/progress.py", "conditions"),
    ("/_service/model/conditions.py", "conditions"),
    ("/_service/core/operation.py", "operation (try_complete, on_complete)"),
    ("/_service/outcomes/event_log.py", "outcome/event building"),
    ("/_service/model/outcome.py", "outcome/event building"),
    ("/_service/outcomes/subscriptions.py", "subscriptions"),
    ("/_service/outcomes/stream_queue.py", "subscriptions"),
    ("/_service/wire/validation.py", "validation"),
    ("/_service/wire/field_rules.py", "validation"),
    ("/_service/model/errors.py", "validation"),
    ("/_service/wire/", "request/response conversion"),
    ("/_service/api/session_messages.py", "request/response conversion"),
    ("/_service/durable/", "journal"),
    ("/_journal/", "journal"),
    ("/_service/telemetry/", "telemetry"),
    ("/_service/observability/", "telemetry"),
    ("/_service/api/rpc_telemetry.py", "telemetry"),
    ("/_service/api/session_rpc.py", "session (frames, acknowledgements)"),
    ("/_service/api/session_outbound.py", "session (frames, acknowledgements)"),
    ("/_service/core/", _BOOKKEEPING),
    ("/_service/model/", _BOOKKEEPING),
    ("/_service/outcomes/", _BOOKKEEPING),
    # Counted where they were before they moved to the edge, so profiles stay comparable.
    ("/_service/api/admission.py", _BOOKKEEPING),
    ("/_service/api/write_turns.py", _BOOKKEEPING),
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
    ("_perf_workload.py", "harness (generator, completer, monitor)"),
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
    ("/_service/durable/codec.py", "decode pending operations"),
    ("/_service/wire/convert.py", "decode pending operations"),
    ("/_service/core/progress.py", "operation objects (progress)"),
    ("/_service/model/definitions.py", "operation objects (progress)"),
    ("/_service/core/operation.py", "operation objects (progress)"),
    ("/_engine/", "engine: watch and arm"),
    ("/_service/durable/", "service restore loop"),
    ("/_service/core/named_purgatory.py", "service restore loop"),
    ("/_service/core/operation_table.py", "service restore loop"),
    ("/_service/core/latest_values.py", "service restore loop"),
    ("/_service/core/budget.py", "service restore loop"),
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
