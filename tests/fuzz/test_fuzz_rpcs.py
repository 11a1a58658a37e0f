"""A hypothesis fuzz of every RPC against a real server on loopback.

Each example sends one request (tests/fuzz/rpc_requests.py): a well-formed message with
random and boundary values in every field (empty, over-long and 48,000-character
strings, int64/uint64 extremes, oversized repeated fields, unknown purgatories, duplicate
ids), or raw bytes that may not decode at all. Asserted for every answer: its status is
one the policy allows for that RPC (never UNKNOWN, never INTERNAL), its message stays
short. Asserted throughout and at the end: health checks answer SERVING; after clean-up
(force-complete what is pending, signal every key used) every purgatory has no pending
operation and no watched key; the process RSS grew by a bounded amount.

``make test`` runs ``FUZZ_EXAMPLES`` (default 300) examples; docs/benchmarks.md records a
long run (``FUZZ_EXAMPLES=5000``).
"""

from __future__ import annotations

import os
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

from harness import ServerProcess
from tests.fuzz.rpc_requests import METHODS, raw_bodies, requests
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
    # A full purgatory (a schedule's occurrences are pending operations) or the schedule cap.
    "UpsertSchedule": BASE | {C.RESOURCE_EXHAUSTED},
    "DeleteSchedule": BASE,
    "ListSchedules": BASE,
    # Worker groups.
    "Ack": BASE | {C.FAILED_PRECONDITION},
    "ExtendLease": BASE | {C.FAILED_PRECONDITION},
    "Nack": BASE | {C.FAILED_PRECONDITION},
    # Per-entry failures are in the answer, never the call's status.
    "AckBatch": BASE,
    "ListDeadLetters": BASE,
    "Redrive": BASE,
    "DiscardDeadLetters": BASE,
    "ListGroups": BASE,
    "DeleteGroup": BASE,
}
RESPONSES = {
    m.name: m.output_type.name for m in pb.DESCRIPTOR.services_by_name["PurgatoryService"].methods
}


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


def _fuzz_toml(data_dir: Path) -> str:
    """The fuzz server's configuration: the tests' small limits, a private data dir."""
    limits = replace(TEST_LIMITS, memory_budget_bytes=256 << 20)
    lines = [f'data_dir = "{data_dir}"', 'fsync = "never"', "grace_s = 0.5", "[limits]"]
    lines += [f"{f.name} = {getattr(limits, f.name)}" for f in fields(limits)]
    lines += ["[defaults]", "max_pending = 200", "retained_events = 50"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """The real ``purgatory-server`` in a subprocess, so its RSS is the server's alone."""
    folder = tmp_path_factory.mktemp("fuzz")
    args = ["--log-level", "ERROR"]
    config = _fuzz_toml(folder / "data")
    server = ServerProcess(folder, args, label="fuzz", config=config)
    with server, grpc.insecure_channel(server.address) as channel:
        h = Harness(channel)
        h.health()
        rss_before = server.rss_bytes() / 2**20
        yield h
        rss_after = server.rss_bytes() / 2**20
        print(f"\nfuzz: {h.calls} calls; statuses seen per RPC:")  # noqa: T201
        for method in sorted(h.codes):
            print(f"  {method}: {', '.join(sorted(h.codes[method]))}")  # noqa: T201
        print(f"fuzz: server RSS {rss_before:.0f} MB -> {rss_after:.0f} MB")  # noqa: T201
        _clean_up_and_check(h)
        assert rss_after - rss_before < 300, f"server RSS grew {rss_after - rss_before:.0f} MB"


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


def test_every_fuzzed_rpc_has_a_status_policy() -> None:
    assert sorted(ALLOWED) == METHODS


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
