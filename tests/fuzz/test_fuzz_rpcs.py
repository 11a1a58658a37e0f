"""A hypothesis fuzz of every RPC against a real server on loopback.

Each example sends one request: a well-formed message with random and boundary values
in every field (empty, over-long and 48,000-character strings, int64/uint64 extremes,
oversized repeated fields, unknown purgatories, duplicate ids), or raw bytes that may
not decode at all. Asserted for every answer: its status is one the policy allows for
that RPC (never UNKNOWN, never INTERNAL), its message stays short. Asserted throughout
and at the end: health checks answer SERVING; after clean-up (force-complete what is
pending, signal every key used) every purgatory has no pending operation and no watched
key; the process RSS grew by a bounded amount.

``make test`` runs ``FUZZ_EXAMPLES`` (default 300) examples; docs/benchmarks.md records a
long run (``FUZZ_EXAMPLES=5000``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.service.helpers import TEST_LIMITS

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
C = grpc.StatusCode
OK = C.OK

# What each RPC may answer (docs/service.md "Errors"). UNKNOWN and INTERNAL never.
BASE = {OK, C.INVALID_ARGUMENT, C.NOT_FOUND}
ALLOWED: dict[str, set[grpc.StatusCode]] = {
    "CreatePurgatory": {OK, C.INVALID_ARGUMENT, C.ALREADY_EXISTS, C.RESOURCE_EXHAUSTED},
    "DeletePurgatory": BASE,
    "ListPurgatories": {OK, C.INVALID_ARGUMENT},
    "GetPurgatory": BASE,
    "TryCompleteElseWatch": BASE | {C.ALREADY_EXISTS, C.RESOURCE_EXHAUSTED},
    "BatchTryCompleteElseWatch": BASE | {C.ALREADY_EXISTS, C.RESOURCE_EXHAUSTED},
    "CheckAndComplete": BASE,
    "BatchCheckAndComplete": BASE,
    "ForceComplete": BASE,
    "GetOperation": BASE,
    "Subscribe": BASE | {C.OUT_OF_RANGE, C.FAILED_PRECONDITION, C.RESOURCE_EXHAUSTED},
    "Cancel": BASE,
    "Reschedule": BASE | {C.FAILED_PRECONDITION},
    # issue-16c: a full purgatory (its occurrences are pending operations) or schedule cap.
    "UpsertSchedule": BASE | {C.RESOURCE_EXHAUSTED},
    "DeleteSchedule": BASE,
    "ListSchedules": BASE,
    # Worker groups (issue 16b).
    "Ack": BASE | {C.FAILED_PRECONDITION},
    "ExtendLease": BASE | {C.FAILED_PRECONDITION},
    "ListDeadLetters": BASE,
    "Redrive": BASE,
    "ListGroups": BASE,
    "DeleteGroup": BASE,
}
GROUP_RPCS = {
    "Ack": pb.AckRequest,
    "ExtendLease": pb.ExtendLeaseRequest,
    "ListDeadLetters": pb.ListDeadLettersRequest,
    "Redrive": pb.RedriveRequest,
    "DeleteGroup": pb.DeleteGroupRequest,
}
RESPONSES = {
    m.name: m.output_type.name for m in pb.DESCRIPTOR.services_by_name["PurgatoryService"].methods
}

INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1
HUGE = "x" * 48_000


# ------------------------------------------------------------------ strategies
def mostly(valid: st.SearchStrategy[Any], fuzzy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` about four times in five: enough valid requests to reach deep states
    (operations that exist, complete, get forced), enough junk to probe every check."""
    return st.one_of(valid, valid, valid, valid, fuzzy)


purgatories = mostly(
    st.sampled_from(["default", "default", "fz-a"]),
    st.sampled_from(["fz-b", "nope", "", "bad name!", "p" * 200]),
)
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "k", "a" * 32, "a" * 33, "a" * 41, HUGE, "\x00", "é" * 40]),
)
keys = mostly(st.sampled_from(["k0", "k1", "k2", "k3"]), texts)
key_lists = mostly(
    st.lists(st.sampled_from(["k0", "k1", "k2", "k3"]), max_size=3, unique=True),
    st.one_of(
        st.lists(keys, max_size=5),
        st.sampled_from([[f"k{i}" for i in range(1025)], ["k0", "k0"], [HUGE]]),
    ),
)
op_ids = mostly(
    st.sampled_from(["op-1", "op-2", "op-3", "op-4", ""]),
    st.one_of(st.sampled_from(["i" * 41, HUGE]), texts),
)


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Any value in [low, high], with the boundaries (and 0, 1, -1) drawn often."""
    edges = sorted(e for e in {low, low + 1, -1, 0, 1, high - 1, high} if low <= e <= high)
    return st.one_of(st.integers(low, high), st.sampled_from(edges))


uint64s = ints(0, UINT64_MAX)
uint32s = ints(0, UINT32_MAX)
int64s = ints(*INT64)
timeouts = mostly(
    st.sampled_from([5, 50, 600_000]),
    st.one_of(st.sampled_from([0, 1, 4, 600_001, UINT64_MAX]), uint64s),
)
payloads = mostly(st.binary(max_size=64), st.sampled_from([b"p" * 65, b"p" * 65_537]))


@st.composite
def conditions(draw: Any) -> Any:
    kind = draw(st.sampled_from(["none", "none", "none", "any", "all", "min", "sum", "values"]))
    if kind == "none":
        return None
    if kind == "any":
        return pb.Condition(any_key=pb.AnyKeyCondition())
    if kind == "all":
        return pb.Condition(all_keys=pb.AllKeysCondition())
    if kind == "min":
        return pb.Condition(
            min_signals=pb.MinSignalsCondition(
                count=draw(mostly(st.integers(1, 3), uint32s)), distinct_sources=draw(st.booleans())
            )
        )
    if kind == "sum":
        return pb.Condition(sum_at_least=pb.SumAtLeastCondition(threshold=draw(int64s)))
    targets = draw(st.dictionaries(keys, int64s, max_size=4))
    return pb.Condition(
        values_at_least=pb.ValuesAtLeastCondition(targets=targets, default_target=draw(int64s))
    )


@st.composite
def signals(draw: Any) -> Any:
    if draw(st.booleans()):
        return None
    sig = pb.Signal(
        amount=draw(mostly(st.integers(-10, 10**6), int64s)),
        source=draw(mostly(st.sampled_from(["", "r1", "r2"]), texts)),
        data=draw(mostly(st.binary(max_size=16), st.just(b"d" * 70_000))),
    )
    if draw(st.booleans()):
        sig.value = draw(int64s)
    return sig


# Absolute due times: past, near, beyond any horizon, and anything a uint64 holds.
due_times = st.one_of(
    st.sampled_from([1, int(time.time() * 1000) + 1000, UINT64_MAX]),
    st.integers(0, 2**64 - 1),
)


@st.composite
def specs(draw: Any) -> Any:
    if draw(st.integers(0, 2)):  # two in three: a plain valid operation
        return pb.OperationSpec(
            operation_id=draw(st.sampled_from(["", *(f"op-{i}" for i in range(1, 10))])),
            keys=draw(st.lists(st.sampled_from(["k0", "k1", "k2", "k3"]), max_size=3, unique=True)),
            timeout_ms=draw(st.sampled_from([5, 50, 600_000])),
            payload=draw(st.binary(max_size=8)),
        )
    spec = pb.OperationSpec(
        operation_id=draw(op_ids),
        keys=draw(key_lists),
        timeout_ms=draw(timeouts),
        payload=draw(payloads),
    )
    cond = draw(conditions())
    if cond is not None:
        spec.condition.CopyFrom(cond)
    return spec


@st.composite
def requests(draw: Any) -> tuple[str, Any]:
    method = draw(st.sampled_from(sorted(ALLOWED)))
    name = draw(purgatories)
    if method == "CreatePurgatory":
        config = pb.PurgatoryConfig(
            tick_ms=draw(mostly(st.sampled_from([0, 1, 60_000]), uint32s)),
            wheel_size=draw(mostly(st.sampled_from([0, 2, 4096]), uint32s)),
            purge_interval=draw(mostly(st.sampled_from([0, 1, 100]), uint32s)),
            max_pending=draw(mostly(st.sampled_from([0, 5, 100]), uint32s)),
            retained_events=draw(mostly(st.sampled_from([0, 1, 50]), uint32s)),
            durable=draw(st.booleans()),
        )
        return method, pb.CreatePurgatoryRequest(name=name, config=config)
    if method == "DeletePurgatory":
        # "default" stays: most other examples need a purgatory that exists.
        return method, pb.DeletePurgatoryRequest(
            name=draw(st.sampled_from(["fz-a", "fz-b", "nope", ""]))
        )
    if method == "ListPurgatories":
        return method, pb.ListPurgatoriesRequest()
    if method == "GetPurgatory":
        return method, pb.GetPurgatoryRequest(name=name)
    if method == "TryCompleteElseWatch":
        spec = draw(specs())
        request = pb.TryCompleteElseWatchRequest(
            purgatory=name,
            operation_id=spec.operation_id,
            keys=spec.keys,
            timeout_ms=spec.timeout_ms,
            payload=spec.payload,
            wait=draw(st.sampled_from([False] * 19 + [True])),
        )
        if spec.HasField("condition"):
            request.condition.CopyFrom(spec.condition)
        if not draw(st.integers(0, 9)):
            request.due_time_ms = draw(due_times)
        return method, request
    if method == "BatchTryCompleteElseWatch":
        ops = draw(
            mostly(
                st.lists(specs(), min_size=1, max_size=4), st.just([pb.OperationSpec()] * 10_001)
            )
        )
        return method, pb.BatchTryCompleteElseWatchRequest(purgatory=name, operations=ops)
    if method == "CheckAndComplete":
        request = pb.CheckAndCompleteRequest(purgatory=name, key=draw(keys))
        sig = draw(signals())
        if sig is not None:
            request.signal.CopyFrom(sig)
        return method, request
    if method == "BatchCheckAndComplete":
        items = []
        for key in draw(mostly(st.lists(keys, min_size=1, max_size=4), st.just(["k0"] * 10_001))):
            item = pb.KeySignal(key=key)
            sig = draw(signals())
            if sig is not None:
                item.signal.CopyFrom(sig)
            items.append(item)
        return method, pb.BatchCheckAndCompleteRequest(purgatory=name, signals=items)
    if method == "ForceComplete":
        return method, pb.ForceCompleteRequest(purgatory=name, operation_id=draw(op_ids))
    if method == "GetOperation":
        return method, pb.GetOperationRequest(purgatory=name, operation_id=draw(op_ids))
    if method == "Cancel":
        which = draw(st.integers(0, 3))
        if which == 0:
            ids = pb.OperationIds(ids=draw(st.lists(op_ids, max_size=4)))
            return method, pb.CancelRequest(purgatory=name, operation_ids=ids)
        if which == 1:
            return method, pb.CancelRequest(purgatory=name, key=draw(keys))
        if which == 2:
            return method, pb.CancelRequest(purgatory=name, operation_id_prefix=draw(texts))
        return method, pb.CancelRequest(purgatory=name)
    if method == "Reschedule":
        request = pb.RescheduleRequest(purgatory=name, operation_id=draw(op_ids))
        which = draw(st.integers(0, 2))
        if which == 0:
            request.timeout_ms = draw(timeouts)
        elif which == 1:
            request.due_time_ms = draw(due_times)
        return method, request
    if method in ("UpsertSchedule", "DeleteSchedule", "ListSchedules"):
        return method, draw(schedule_requests(method, name))
    if method == "ListGroups":
        return method, pb.ListGroupsRequest(purgatory=name)
    if method in GROUP_RPCS:
        request = GROUP_RPCS[method](
            purgatory=name, group=draw(st.sampled_from(["g", "", "bad name!", HUGE]))
        )
        if method in {"Ack", "ExtendLease"}:
            request.sequence = draw(st.one_of(st.sampled_from([0, 1, UINT64_MAX]), uint64s))
            request.attempt = draw(st.one_of(st.sampled_from([0, 1]), uint32s))
        if method == "ExtendLease":
            request.visibility_timeout_ms = draw(uint32s)
        if method == "ListDeadLetters":
            request.after_sequence = draw(uint64s)
            request.page_size = draw(uint32s)
        if method == "Redrive":
            request.sequences.extend(draw(st.lists(uint64s, max_size=4)))
        return method, request
    request = pb.SubscribeRequest(
        purgatory=name,
        incarnation=draw(st.sampled_from(["", "0123456789abcdef", HUGE])),
        filter=pb.SubscribeFilter(
            states=draw(st.lists(st.integers(0, 7), max_size=3)),
            keys=draw(key_lists),
            operation_id_prefix=draw(texts),
        ),
    )
    if draw(st.booleans()):
        request.after_sequence = draw(st.one_of(st.sampled_from([0, 1, UINT64_MAX]), uint64s))
    return method, request


schedule_ids = mostly(st.sampled_from(["s0", "s1", "s2"]), texts)


@st.composite
def schedule_requests(draw: Any, method: str, name: str) -> Any:
    """Schedules fire at most every minute here, so they add no churn to the server."""
    if method == "ListSchedules":
        return pb.ListSchedulesRequest(purgatory=name)
    if method == "DeleteSchedule":
        return pb.DeleteScheduleRequest(purgatory=name, schedule_id=draw(schedule_ids))
    spec = pb.ScheduleSpec(
        schedule_id=draw(schedule_ids),
        time_zone=draw(
            mostly(st.sampled_from(["", "Europe/Paris"]), st.sampled_from(["Europe", "X/Y", HUGE]))
        ),
        template=pb.ScheduleTemplate(keys=draw(key_lists), payload=draw(st.binary(max_size=8))),
    )
    cond = draw(conditions())
    if cond is not None:
        spec.template.condition.CopyFrom(cond)
    which = draw(st.integers(0, 2))
    if which == 0:
        spec.every_ms = draw(mostly(st.sampled_from([60_000, 3_600_000]), uint64s))
    elif which == 1:
        spec.cron = draw(mostly(st.sampled_from(["0 9 * * *", "*/5 * * * *", "@daily"]), texts))
    return pb.UpsertScheduleRequest(purgatory=name, schedule=spec)


raw_bodies = st.tuples(
    st.sampled_from(sorted(ALLOWED)),
    st.one_of(
        st.binary(max_size=64),
        st.sampled_from([b"\x0a\x02\xff\xfe", b"\x12\x03\xc3\x28a", b"\x0a\x05ab", b"\xff" * 8]),
    ),
)


# ------------------------------------------------------------------ harness
@dataclass
class Harness:
    channel: grpc.Channel
    calls: int = 0
    codes: dict[str, set[str]] = field(default_factory=dict)
    operations: set[tuple[str, str]] = field(default_factory=set)
    used_keys: set[tuple[str, str]] = field(default_factory=set)

    def invoke(self, method: str, body: bytes, wait: bool) -> tuple[grpc.StatusCode, str, Any]:
        response_cls = getattr(pb, RESPONSES[method])
        path = f"/purgatory.v1.PurgatoryService/{method}"
        if method == "Subscribe":
            stream = self.channel.unary_stream(path, response_deserializer=response_cls.FromString)
            call = stream(body, timeout=5)
            header = dict(call.initial_metadata() or ())
            if "purgatory-start-after" in header:
                call.cancel()
                return OK, "", None
            return call.code(), call.details() or "", None
        unary = self.channel.unary_unary(path, response_deserializer=response_cls.FromString)
        try:
            response = unary(body, timeout=0.3 if wait else 5)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", None
        return OK, "", response

    def health(self) -> None:
        reply = health_pb2_grpc.HealthStub(self.channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _fuzz_toml(data_dir: Path) -> str:
    """The fuzz server's configuration: the tests' small limits, a private data dir."""
    limits = replace(TEST_LIMITS, max_total_retained_events=10_000)
    lines = [f'data_dir = "{data_dir}"', 'fsync = "never"', "grace_s = 0.5", "[limits]"]
    lines += [f"{f.name} = {getattr(limits, f.name)}" for f in fields(limits)]
    lines += ["[defaults]", "max_pending = 200", "retained_events = 50"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """The real ``purgatory-server`` in a subprocess, so its RSS is the server's alone."""
    folder = tmp_path_factory.mktemp("fuzz")
    config = folder / "fuzz.toml"
    config.write_text(_fuzz_toml(folder / "data"))
    port_file = folder / "port"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PURGATORY_")}
    argv = [sys.executable, "-m", "purgatory_server", "--config", str(config)]
    argv += ["--listen", "127.0.0.1:0", "--port-file", str(port_file), "--log-level", "ERROR"]
    server = subprocess.Popen(argv, env=env, cwd=folder)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert server.poll() is None, "server exited"
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        target = f"127.0.0.1:{port_file.read_text().strip()}"
        with grpc.insecure_channel(target) as channel:
            h = Harness(channel)
            h.health()
            rss_before = _rss_mb(server.pid)
            yield h
            rss_after = _rss_mb(server.pid)
            print(f"\nfuzz: {h.calls} calls; statuses seen per RPC:")  # noqa: T201
            for method in sorted(h.codes):
                print(f"  {method}: {', '.join(sorted(h.codes[method]))}")  # noqa: T201
            print(f"fuzz: server RSS {rss_before:.0f} MB -> {rss_after:.0f} MB")  # noqa: T201
            _clean_up_and_check(h)
            assert rss_after - rss_before < 300, f"server RSS grew {rss_after - rss_before:.0f} MB"
    finally:
        server.terminate()
        server.wait(10)


def _clean_up_and_check(h: Harness) -> None:
    """Force-complete every operation the fuzz registered, signal every key it used, and
    check that nothing is left pending or watched anywhere."""
    code, _, listing = h.invoke("ListPurgatories", b"", False)
    assert code is OK
    for purgatory in listing.purgatories:  # a schedule keeps an occurrence pending
        request = pb.ListSchedulesRequest(purgatory=purgatory.name).SerializeToString()
        code, _, schedules = h.invoke("ListSchedules", request, False)
        assert code is OK
        for schedule in schedules.schedules:
            delete = pb.DeleteScheduleRequest(
                purgatory=purgatory.name, schedule_id=schedule.spec.schedule_id
            )
            assert h.invoke("DeleteSchedule", delete.SerializeToString(), False)[0] is OK
    stub_calls = [
        ("ForceComplete", pb.ForceCompleteRequest(purgatory=p, operation_id=o))
        for p, o in sorted(h.operations)
    ]
    for method, request in stub_calls:
        code, _, _ = h.invoke(method, request.SerializeToString(), False)
        assert code in (OK, C.NOT_FOUND)
    for p, k in sorted(h.used_keys):
        h.invoke(
            "CheckAndComplete",
            pb.CheckAndCompleteRequest(purgatory=p, key=k).SerializeToString(),
            False,
        )
    code, _, listing = h.invoke("ListPurgatories", b"", False)
    assert code is OK
    leftovers = {p.name: (p.pending, p.watched_keys) for p in listing.purgatories}
    assert all(v == (0, 0) for v in leftovers.values()), leftovers
    h.health()


def _track(h: Harness, method: str, request: Any, response: Any) -> None:
    if method == "TryCompleteElseWatch":
        h.operations.add((request.purgatory, response.operation_id))
        h.used_keys.update((request.purgatory, k) for k in request.keys)
    elif method == "BatchTryCompleteElseWatch":
        h.operations.update((request.purgatory, s.operation_id) for s in response.operations)
        for spec in request.operations:
            h.used_keys.update((request.purgatory, k) for k in spec.keys)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(st.one_of(requests(), raw_bodies))
def test_every_rpc_answers_only_allowed_statuses(harness: Harness, drawn: tuple[str, Any]) -> None:
    method, request = drawn
    raw = isinstance(request, bytes)
    body = request if raw else request.SerializeToString()
    wait = not raw and method == "TryCompleteElseWatch" and request.wait
    if wait and not request.operation_id:  # a wait cut off by its deadline stays trackable
        request.operation_id = f"fuzz-wait-{harness.calls}"
        body = request.SerializeToString()
    code, details, response = harness.invoke(method, body, wait)
    allowed = ALLOWED[method] | ({C.DEADLINE_EXCEEDED} if wait else set())
    assert code in allowed, f"{method} answered {code.name}: {details[:200]}"
    assert len(details) < 400, details[:400]
    harness.codes.setdefault(method, set()).add(code.name)
    if code is OK and not raw:
        _track(harness, method, request, response)
    elif wait and code is C.DEADLINE_EXCEEDED:  # registered, then the client gave up waiting
        harness.operations.add((request.purgatory, request.operation_id))
        harness.used_keys.update((request.purgatory, k) for k in request.keys)
    harness.calls += 1
    if harness.calls % 50 == 0:
        harness.health()
