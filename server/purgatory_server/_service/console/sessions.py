"""Console sessions: the token entered once, kept server-side behind an HttpOnly cookie.

The browser holds only a random session id in a ``HttpOnly; SameSite=Strict`` cookie
(``Secure`` over HTTPS); the token stays in this process's memory and is sent by the
console's own client with each RPC, so every action is checked by the gRPC edge with the
permission its RPC needs. Each session has a CSRF token that every form carries and every
POST must echo (compared in constant time). Sessions end after ``IDLE_S`` without use;
at most ``MAX_SESSIONS`` are kept (the least recently used is dropped).

Loop-confined: used only from the console's handlers.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["COOKIE", "ConsoleSession", "SessionTable"]

COOKIE = "purgatory_console"
IDLE_S = 12 * 3600
MAX_SESSIONS = 1000


@dataclass(slots=True)
class ConsoleSession:
    """One browser's session; ``token`` is None before login (or with auth off)."""

    sid: str
    token: str | None
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_used: float = field(default_factory=time.monotonic)
    # What the last action said, shown once by the next page (never from a URL).
    notice: str = ""

    def take_notice(self) -> str:
        notice, self.notice = self.notice, ""
        return notice

    def csrf_matches(self, presented: str) -> bool:
        return hmac.compare_digest(self.csrf.encode(), presented.encode("utf-8", "replace"))


class SessionTable:
    """Session id -> :class:`ConsoleSession`, bounded and expiring."""

    __slots__ = ("_secure", "_sessions")

    def __init__(self, secure: bool) -> None:
        self._sessions: OrderedDict[str, ConsoleSession] = OrderedDict()
        self._secure = secure

    def find(self, sid: str | None) -> ConsoleSession | None:
        """The live session of cookie value ``sid``, refreshed; None if unknown or idle."""
        if not sid:
            return None
        session = self._sessions.get(sid)
        now = time.monotonic()
        if session is None or now - session.last_used > IDLE_S:
            self._sessions.pop(sid, None)
            return None
        session.last_used = now
        self._sessions.move_to_end(sid)
        return session

    def open(self, token: str | None) -> ConsoleSession:
        """A new session (a fresh id: logging in never keeps an id the browser had)."""
        session = ConsoleSession(secrets.token_urlsafe(32), token)
        self._sessions[session.sid] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def close(self, session: ConsoleSession) -> None:
        self._sessions.pop(session.sid, None)

    def cookie(self, session: ConsoleSession | None) -> str:
        """The ``Set-Cookie`` value for ``session`` (None: one that clears the cookie)."""
        value, extra = (session.sid, "") if session is not None else ("", "; Max-Age=0")
        secure = "; Secure" if self._secure else ""
        return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{secure}{extra}"
