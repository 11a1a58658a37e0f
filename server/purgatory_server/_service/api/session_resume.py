"""Sessions that resume: what a named Session owes after its stream ends, and the cap on
sessions per server.

A stream ends for reasons that say nothing about the work on it (a lost connection, a
cut), so a client names its session (``SessionRequest.session_id``) and the server
*parks* what the ended stream still owed:

- ``watching``: operations watched and not yet ended (their waiters are detached: an
  outcome that comes meanwhile waits in the dedup window, where a resume finds it);
- ``owed``: operations that ended but whose outcome was never written;
- ``sent``: the last outcomes written, with their numbers (``delivered_through``), for the
  client to say which of them it really received (``resume_after``).

Only ids are parked, never outcomes: a resume reads each outcome from its purgatory's
dedup window. A parked session is kept ``session_resume_ms``; sessions, open and parked,
are capped by ``max_sessions`` (an open one over the cap is RESOURCE_EXHAUSTED; parked
ones make room, oldest first). Each parked list is bounded by the stream's own bound.

Thread safety: loop-confined (one per server, used by the Session streams on the loop).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from purgatory_server._service.api.session_messages import OpKey
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.model.errors import (
    FailedPrecondition,
    InvalidArgument,
    LimitExceeded,
    NotFound,
)

__all__ = ["MAX_SESSION_ID", "SESSION_OWNER", "Parked", "SessionDirectory"]

MAX_SESSION_ID = 128
# With tokens, the edge prefixes a session id with its token's name and this separator,
# so that only the token that named a session can resume it.
SESSION_OWNER = "\x1f"


@dataclass(slots=True)
class Parked:
    """What an ended stream of a named session still owes (see the module docstring)."""

    delivered: int  # the number of the last outcome written
    sent: list[tuple[int, OpKey]]  # the last outcomes written, oldest first
    owed: list[OpKey]
    watching: list[OpKey]
    expires_at: float = 0.0


class SessionDirectory:
    """The server's Session streams: how many are open, and the parked named ones."""

    def __init__(self, limits: Limits, loop: asyncio.AbstractEventLoop) -> None:
        self._limits = limits
        self._loop = loop
        self.open_count = 0
        self._named: set[str] = set()  # session ids of open streams
        self._parked: OrderedDict[str, Parked] = OrderedDict()  # oldest first

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    def open(self) -> None:
        """Count a new stream; RESOURCE_EXHAUSTED past ``max_sessions`` (parked sessions
        make room first, oldest first)."""
        self._expire()
        cap = self._limits.max_sessions
        if self.open_count >= cap:
            raise LimitExceeded(
                f"{self.open_count} Session streams are open; max_sessions is {cap}"
            )
        while self._parked and self.open_count + len(self._parked) >= cap:
            self._parked.popitem(last=False)
        self.open_count += 1

    def close(self) -> None:
        self.open_count -= 1

    def name(self, session_id: str, field: str) -> None:
        """Claim ``session_id`` for an open stream (FAILED_PRECONDITION if another open
        stream holds it)."""
        if len(session_id.rpartition(SESSION_OWNER)[2]) > MAX_SESSION_ID:
            raise InvalidArgument(field, f"longer than {MAX_SESSION_ID} characters")
        if session_id in self._named:
            raise FailedPrecondition(
                f"session {_shown(session_id)} is open on another stream; close it first"
            )
        self._named.add(session_id)

    def release(self, session_id: str) -> None:
        self._named.discard(session_id)

    def take(self, session_id: str) -> Parked:
        """The parked state of ``session_id``, removed (NOT_FOUND if none is kept)."""
        self._expire()
        parked = self._parked.pop(session_id, None)
        if parked is None:
            raise NotFound(
                f"session {_shown(session_id)} is not kept by this server (never named, "
                "expired after session_resume_ms, or the server restarted); re-send the "
                "watches still wanted",
                "session",
                session_id.rpartition(SESSION_OWNER)[2],
            )
        return parked

    def park(self, session_id: str, parked: Parked) -> None:
        """Keep ``parked`` for ``session_resume_ms`` (nothing if resuming is off)."""
        keep_ms = self._limits.session_resume_ms
        if keep_ms <= 0 or self._limits.max_sessions <= 0:
            return
        parked.expires_at = self._loop.time() + keep_ms / 1000
        self._parked.pop(session_id, None)
        self._parked[session_id] = parked
        while self.open_count + len(self._parked) > self._limits.max_sessions:
            self._parked.popitem(last=False)

    def _expire(self) -> None:
        now = self._loop.time()
        parked = self._parked
        while parked and next(iter(parked.values())).expires_at <= now:
            parked.popitem(last=False)


def _shown(session_id: str) -> str:
    """The client's part of a session id, quoted for an error message."""
    return repr(session_id.rpartition(SESSION_OWNER)[2][:100])
