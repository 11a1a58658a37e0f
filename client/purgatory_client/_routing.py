"""Following a replicated purgatory to its owner: the route cache both clients share.

A server that does not own a replicated purgatory answers UNAVAILABLE with trailing
metadata ``purgatory-owner: host:port`` (docs/scale-out.md §6). The clients re-send the
call there at once, remember the route per purgatory, and send that purgatory's later
unary calls straight to the owner. When a routed call fails UNAVAILABLE without a new
owner (the owner died and a takeover is under way), the route is dropped and the call
goes back to the client's own target, which knows the next owner once it has one; so
does a routed call that ended DEADLINE_EXCEEDED (a paused owner) or whose connection
failed its keepalive pings (UNAVAILABLE: see ``_long_poll.KEEPALIVE_OPTIONS``). At most
:data:`MAX_HOPS` re-sends per attempt, so two servers that disagree cannot bounce a call
forever; a stream's hop budget starts over with each attempt after its backoff, and a
route to an owner that failed is dropped even at the hop limit, so nothing stays parked
on a dead owner; for :data:`SUSPECT_S` after, a server that still names that owner (a
standby that has not seen its lease expire yet) is not followed there: the call fails
UNAVAILABLE at once and the caller's retry goes to its own target again.

Re-sending is what a client would do after UNAVAILABLE anyway: the refusing server did
not apply the call. (An owner that lost its purgatory mid-append also answers
UNAVAILABLE; a registration with an explicit operation id is idempotent, so re-send
those with ids when exactly-once matters.)

No I/O: channels to owners are created lazily by the factory the client passes in (same
credentials and options as its own); the client closes them with :meth:`Router.channels`.
Streams are routed too: ``subscribe`` opens its stream on the route and follows a
refusal like a unary call (the resume position and incarnation carry over, so a stream
cut by a takeover resumes at the new owner with no gap and no repeat). A session names its
purgatory per frame, and a refusal ends the whole stream, so before a session is opened
on a purgatory whose route is not known the client *probes* it with one GetPurgatory
(routed like any unary call; :meth:`Router.needs_probe`); a session that still ends
UNAVAILABLE teaches the route (:meth:`Router.learn`) to whoever re-opens it (the
dispatcher, ``watch_many``). Worker-group member streams join at the route and follow
a refusal naming the owner (``_groups_sync``/``_groups_async``).

Thread-safety: the sync client may call from several threads; dict and set operations
are atomic under the GIL and a race only creates a second channel to the same owner,
which is closed with the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from purgatory_client.errors import PurgatoryError, UnavailableError

__all__ = ["MAX_HOPS", "METADATA_OWNER", "Router", "owner_hint", "purgatory_of"]

METADATA_OWNER = "purgatory-owner"
MAX_HOPS = 3
# How long an owner that failed a routed call (gone, paused, cut off) is not followed when
# a server still names it: about the time a standby takes to notice the lease expired.
SUSPECT_S = 2.0
# Admin requests whose purgatory is their `name` field.
# A routed call that failed with one of these (and no new owner named) drops its route.
_OWNER_FAILED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_NAMED_BY_NAME = frozenset(
    {"GetPurgatoryRequest", "CreatePurgatoryRequest", "DeletePurgatoryRequest"}
)


def purgatory_of(request: Any) -> str:
    """The purgatory a request is about ("" for calls that name none)."""
    name = getattr(request, "purgatory", "")
    if not name and type(request).__name__ in _NAMED_BY_NAME:
        name = getattr(request, "name", "")
    return name if isinstance(name, str) else ""


def owner_hint(error: grpc.RpcError) -> str:
    """The owner an UNAVAILABLE status names in its trailers, or ""."""
    code = getattr(error, "code", None)
    if code is None or code() != grpc.StatusCode.UNAVAILABLE:
        return ""
    trailers = getattr(error, "trailing_metadata", None)
    for key, value in (trailers() if trailers is not None else None) or ():
        if key == METADATA_OWNER:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""


class Router:
    """Per-purgatory routes and the stubs of owners (see module docstring)."""

    def __init__(
        self, stub: Any, make_channel: Callable[[str], Any], make_stub: Callable[[Any], Any]
    ) -> None:
        self._stub = stub
        self._attrs = {id(value): name for name, value in vars(stub).items()}
        self._make_channel = make_channel
        self._make_stub = make_stub
        self._owners: dict[str, tuple[Any, Any]] = {}  # address -> (channel, stub)
        self.routes: dict[str, str] = {}  # purgatory -> owner address
        # Purgatories the client's own target answered for (no probe before a session).
        self._direct: set[str] = set()
        # Owners that failed a routed call lately -> until when a hint naming them is not
        # followed (a standby names the old owner until its lease has expired).
        self._failed: dict[str, float] = {}

    def method(self, purgatory: str, method: Any) -> Any:
        """``method`` of the stub this purgatory's calls go to now."""
        address = self.routes.get(purgatory) if purgatory else None
        attr = self._attrs.get(id(method))
        if address is None or attr is None:
            return method
        owner = self._owners.get(address)
        if owner is None:
            channel = self._make_channel(address)
            owner = (channel, self._make_stub(channel))
            self._owners[address] = owner
        return getattr(owner[1], attr)

    def reroute(
        self,
        purgatory: str,
        method: Any,
        error: grpc.RpcError,
        hop: int,
        sent_to: str | None = None,
    ) -> bool:
        """After ``error``: True if the call should be sent again (to the new route).

        ``sent_to``: the route the call went to ("" for the client's own target; None:
        the current route), so a hint naming another server is followed even when a
        concurrent call has cached it meanwhile.

        A route whose owner failed the call (UNAVAILABLE without a new owner: it is gone,
        or its keepalive pings went unanswered; DEADLINE_EXCEEDED: it did not answer in
        time) is dropped whatever the hop count, so the next attempt re-resolves the owner
        through the client's own target instead of going back to a dead or paused owner.
        At the hop limit a hint is not taken either: the caller's next attempt (after its
        backoff) starts from the own target with a fresh hop budget."""
        if not purgatory or id(method) not in self._attrs:
            return False
        code = error.code()
        owner = owner_hint(error)
        current = self.routes.get(purgatory)
        routed = current if sent_to is None else sent_to
        if code == grpc.StatusCode.UNAVAILABLE:
            self._direct.discard(purgatory)
        if routed and not owner and code in _OWNER_FAILED:
            self.drop(purgatory, routed)
            # No time left after DEADLINE_EXCEEDED: the caller gets it, the next call
            # re-resolves.
            return code == grpc.StatusCode.UNAVAILABLE and hop < MAX_HOPS
        if hop >= MAX_HOPS:
            return False
        if owner:
            if owner == routed or self._failed_lately(owner):
                return False
            self.routes[purgatory] = owner
            self._direct.discard(purgatory)
            return True
        return False

    def drop(self, purgatory: str, address: str) -> None:
        """Forget ``purgatory``'s route if it still leads to ``address`` (a concurrent
        call may have learnt a newer one meanwhile)."""
        if self.routes.get(purgatory) == address:
            self.routes.pop(purgatory, None)
        self._failed[address] = time.monotonic() + SUSPECT_S

    def _failed_lately(self, address: str) -> bool:
        """True while ``address`` failed a routed call less than SUSPECT_S ago."""
        until = self._failed.get(address)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self._failed[address]
        return False

    def needs_probe(self, purgatory: str) -> bool:
        """True if a session on ``purgatory`` should first learn where it lives."""
        return bool(purgatory) and purgatory not in self.routes and purgatory not in self._direct

    def probed(self, purgatory: str) -> None:
        """The probe succeeded: with no route learned, the own target serves it."""
        if purgatory not in self.routes:
            self._direct.add(purgatory)

    def learn(self, purgatory: str, error: PurgatoryError | None) -> None:
        """A stream on ``purgatory`` ended with ``error``: take the owner it names, or
        forget the route after UNAVAILABLE (the next open probes again)."""
        if not purgatory or not isinstance(error, UnavailableError):
            return
        owner = error.metadata.get(METADATA_OWNER, "")
        self._direct.discard(purgatory)
        if owner:
            self.routes[purgatory] = owner
        else:
            self.routes.pop(purgatory, None)

    def channels(self) -> list[Any]:
        """The owners' channels (to close with the client)."""
        channels = [channel for channel, _ in self._owners.values()]
        self._owners.clear()
        return channels
