"""Following a replicated purgatory to its owner: the route cache both clients share.

A server that does not own a replicated purgatory answers UNAVAILABLE with trailing
metadata ``purgatory-owner: host:port`` (docs/scale-out.md §6). The clients re-send the
call there at once, remember the route per purgatory, and send that purgatory's later
unary calls straight to the owner. When a routed call fails UNAVAILABLE without a new
owner (the owner died and a takeover is under way), the route is dropped and the call
goes back to the client's own target, which knows the next owner once it has one. At most
:data:`MAX_HOPS` re-sends per call, so two servers that disagree cannot bounce a call
forever.

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

from collections.abc import Callable
from typing import Any

import grpc

from purgatory_client.errors import PurgatoryError, UnavailableError

__all__ = ["MAX_HOPS", "METADATA_OWNER", "Router", "owner_hint", "purgatory_of"]

METADATA_OWNER = "purgatory-owner"
MAX_HOPS = 3
# Admin requests whose purgatory is their `name` field.
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
        concurrent call has cached it meanwhile."""
        if not purgatory or hop >= MAX_HOPS or id(method) not in self._attrs:
            return False
        owner = owner_hint(error)
        current = self.routes.get(purgatory)
        if owner:
            if owner == (current if sent_to is None else sent_to):
                return False
            self.routes[purgatory] = owner
            self._direct.discard(purgatory)
            return True
        if error.code() == grpc.StatusCode.UNAVAILABLE:
            self._direct.discard(purgatory)
        if current is not None and error.code() == grpc.StatusCode.UNAVAILABLE:
            self.routes.pop(purgatory, None)  # back to the client's own target
            return True
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
