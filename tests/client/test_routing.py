"""The clients' route cache, without servers: which calls are re-sent where, and how often."""

from __future__ import annotations

from typing import Any

import grpc
from purgatory_client._routing import MAX_HOPS, Router, owner_hint, purgatory_of
from purgatory_proto.v1 import purgatory_pb2 as pb


class _Error(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, owner: str = "") -> None:
        self._code = code
        self._trailers = (("purgatory-owner", owner),) if owner else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def trailing_metadata(self) -> Any:
        return self._trailers


class _Stub:
    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.GetOperation = lambda *a, **k: ("GetOperation", channel)


def _router() -> tuple[Router, _Stub, list[str]]:
    made: list[str] = []
    own = _Stub("own")

    def make_channel(address: str) -> str:
        made.append(address)
        return address

    return Router(own, make_channel, _Stub), own, made


def test_purgatory_of_reads_the_field_that_names_it() -> None:
    assert purgatory_of(pb.GetOperationRequest(purgatory="p", operation_id="x")) == "p"
    assert purgatory_of(pb.GetPurgatoryRequest(name="p")) == "p"
    assert purgatory_of(pb.CreatePurgatoryRequest(name="p")) == "p"
    assert purgatory_of(pb.ListPurgatoriesRequest()) == ""


def test_owner_hint_only_from_unavailable() -> None:
    assert owner_hint(_Error(grpc.StatusCode.UNAVAILABLE, "h:1")) == "h:1"
    assert owner_hint(_Error(grpc.StatusCode.UNAVAILABLE)) == ""
    assert owner_hint(_Error(grpc.StatusCode.NOT_FOUND, "h:1")) == ""


def test_route_is_learned_cached_and_dropped() -> None:
    router, own, made = _router()
    method = own.GetOperation
    assert router.method("p", method) is method  # no route yet: the client's own stub
    assert router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "a:1"), 0)
    assert router.method("p", method)() == ("GetOperation", "a:1")
    assert router.method("q", method) is method  # routes are per purgatory
    assert router.method("p", method)() == ("GetOperation", "a:1")
    assert made == ["a:1"]  # one channel per owner, reused
    # The same owner named again: nothing new to try.
    assert not router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "a:1"), 1)
    # The owner died (UNAVAILABLE, no hint): back to the own target once.
    assert router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE), 1)
    assert router.method("p", method) is method
    # Other errors are never re-sent; nor is anything past MAX_HOPS.
    assert not router.reroute("p", method, _Error(grpc.StatusCode.NOT_FOUND, "b:1"), 0)
    assert not router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "b:1"), MAX_HOPS)
    assert router.channels() == ["a:1"]


def test_a_hint_is_followed_when_a_concurrent_call_cached_it_first() -> None:
    router, own, _ = _router()
    method = own.GetOperation
    assert router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "a:1"), 0)
    # A call sent to the own target before the route was cached is refused naming a:1:
    # it must go there too (only a refusal BY a:1 naming a:1 stops).
    assert router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "a:1"), 0, "")
    assert not router.reroute("p", method, _Error(grpc.StatusCode.UNAVAILABLE, "a:1"), 0, "a:1")


def test_sessions_probe_once_and_learn_from_their_end() -> None:
    from purgatory_client.errors import NotFoundError, UnavailableError

    router, _, _ = _router()
    assert router.needs_probe("p") and not router.needs_probe("")
    router.probed("p")  # the own target answered: no route, no more probes
    assert not router.needs_probe("p")
    # A session ended UNAVAILABLE naming the owner: routed from now on.
    moved = UnavailableError(grpc.StatusCode.UNAVAILABLE, "moved", {"purgatory-owner": "b:1"})
    router.learn("p", moved)
    assert router.routes == {"p": "b:1"} and not router.needs_probe("p")
    # Other errors teach nothing; UNAVAILABLE without an owner drops the route.
    router.learn("p", NotFoundError(grpc.StatusCode.NOT_FOUND, "gone"))
    assert router.routes == {"p": "b:1"}
    router.learn("p", UnavailableError(grpc.StatusCode.UNAVAILABLE, "down"))
    assert router.routes == {} and router.needs_probe("p")
