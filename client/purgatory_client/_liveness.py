"""Liveness of long-lived streams on the client side: heartbeats and dead streams.

The server can send a heartbeat on ``Subscribe`` and ``Session`` streams whenever it has
sent nothing for a client-chosen interval. A client that asked for heartbeats can then
treat a stream that stayed silent past ``dead_after_s`` (no message, no heartbeat) as
dead: a half-open TCP connection, or a proxy that dropped the stream without telling
anyone, would otherwise leave it waiting forever.

- :class:`StreamReader` (blocking clients) and :class:`AsyncStreamReader` (asyncio): a
  stream's messages, one at a time; a silence past ``dead_after_s`` ends the reading
  with ``reader.silent`` set to the error it counts as (UNAVAILABLE). The blocking one
  runs a :class:`Watchdog`, a daemon thread that cancels the call once it has been
  silent too long (a blocking read cannot time out); the asyncio one bounds each read
  with ``asyncio.wait_for``.
- :class:`SessionLiveness` (both Session clients): the options, the liveness-only frame
  the session opens with, and what the heartbeats said.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import grpc
from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._checks import uint
from purgatory_client._session_base import ack_from_proto
from purgatory_client.errors import PurgatoryError, UnavailableError, invalid_argument

__all__ = [
    "AsyncStreamReader",
    "SessionLiveness",
    "StreamReader",
    "Watchdog",
    "dead_stream",
    "heartbeat_deadline",
]


def heartbeat_deadline(heartbeat_interval_ms: int, dead_after_s: float | None) -> float | None:
    """Seconds of silence after which a stream is treated as dead (None: never)."""
    if dead_after_s is not None:
        if dead_after_s <= 0:
            raise invalid_argument("dead_after_s", f"{dead_after_s} is not positive")
        if not heartbeat_interval_ms:
            raise invalid_argument("dead_after_s", "needs heartbeat_interval_ms")
        return dead_after_s
    return None


def dead_stream(dead_after_s: float) -> UnavailableError:
    """The error a silent stream counts as (resumed like a dropped connection)."""
    return UnavailableError(
        grpc.StatusCode.UNAVAILABLE,
        f"no event or heartbeat for {dead_after_s:g} s: the stream is treated as dead",
    )


class Watchdog:
    """Cancels a call that stayed silent (no message, no heartbeat) too long.

    One daemon thread per watched stream; ``alive`` (the reading thread) pushes the
    deadline back, ``fired`` tells the reader that the cancellation was ours.
    """

    def __init__(self, call: Any, dead_after_s: float, name: str = "purgatory-watchdog") -> None:
        self._call = call
        self.dead_after_s = dead_after_s
        self._last = time.monotonic()
        self._stopped = threading.Event()
        self.fired = False
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def alive(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while True:
            remaining = self._last + self.dead_after_s - time.monotonic()
            if remaining <= 0:
                self.fired = True
                self._call.cancel()
                return
            if self._stopped.wait(remaining):
                return


class StreamReader:
    """A blocking call's messages: :meth:`next` is the next one, or None once the stream
    has ended, or once it stayed silent past ``dead_after_s`` (the watchdog cancelled the
    call): then :attr:`silent` is the error it counts as (:func:`dead_stream`). The
    call's other ``grpc.RpcError`` are raised as they are.

    One reading thread; :meth:`close` (when done reading) stops the watchdog.
    """

    def __init__(self, call: Any, dead_after_s: float | None, name: str) -> None:
        self._messages = iter(call)
        self._watchdog = None if dead_after_s is None else Watchdog(call, dead_after_s, name)
        self.silent: UnavailableError | None = None

    def next(self) -> Any | None:
        try:
            message = next(self._messages)
        except StopIteration:
            return None
        except grpc.RpcError:
            if self._watchdog is None or not self._watchdog.fired:
                raise
            self.silent = dead_stream(self._watchdog.dead_after_s)
            return None
        if self._watchdog is not None:
            self._watchdog.alive()
        return message

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()


class AsyncStreamReader:
    """An asyncio call's messages (see :class:`StreamReader`): each read is bounded by
    ``dead_after_s`` (None: unbounded); a read that times out ends the reading, with
    :attr:`silent` set.

    One reading task; ``name`` and :meth:`close` only mirror the blocking reader's.
    """

    def __init__(self, call: Any, dead_after_s: float | None, name: str) -> None:
        self._messages = call.__aiter__()
        self._dead_after_s = dead_after_s
        self.silent: UnavailableError | None = None

    async def next(self) -> Any | None:
        try:
            if self._dead_after_s is None:
                return await self._messages.__anext__()
            return await asyncio.wait_for(self._messages.__anext__(), self._dead_after_s)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            assert self._dead_after_s is not None  # only a bounded read times out
            self.silent = dead_stream(self._dead_after_s)
            return None

    def close(self) -> None:
        """Nothing to stop: the read's own timeout is the watchdog."""


class SessionLiveness:
    """A Session's heartbeat options and the heartbeats it received.

    ``heartbeat_interval_ms`` (0: none) is sent in a liveness-only frame (request id 0,
    acknowledged by the server and ignored here) as the stream opens, with the session's
    name and resume point if it has them (``session_id``, ``resume_after``: the server
    refusing the resume ends the stream with its error); ``dead_after_s``
    (needs heartbeats) is how long the stream may stay silent before it is treated as
    dead. ``heartbeats`` counts the heartbeats received; ``server_time_ms`` is the
    server's wall clock (epoch ms) in the latest one.
    """

    def __init__(
        self,
        heartbeat_interval_ms: int,
        dead_after_s: float | None,
        session_id: str = "",
        resume_after: int | None = None,
    ) -> None:
        self.heartbeat_interval_ms = uint("heartbeat_interval_ms", heartbeat_interval_ms, 32)
        self.dead_after_s = heartbeat_deadline(heartbeat_interval_ms, dead_after_s)
        if resume_after is not None and not session_id:
            raise invalid_argument("resume_after", "needs session_id")
        self.session_id = session_id
        self.resume_after = resume_after
        self.heartbeats = 0
        self.server_time_ms = 0

    def opening_frame(self) -> Any | None:
        """The frame that asks for heartbeats and names (or resumes) the session (None:
        neither asked)."""
        if not (self.heartbeat_interval_ms or self.session_id):
            return None
        frame = pb.SessionRequest(
            request_id=0,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            session_id=self.session_id,
        )
        if self.resume_after is not None:
            frame.resume_after = self.resume_after
        return frame

    def heartbeat(self, message: Any) -> bool:
        """True (and counted) if ``message`` is a heartbeat rather than acks/outcomes."""
        if not message.heartbeat:
            return False
        self.heartbeats += 1
        self.server_time_ms = message.server_time_ms
        return True

    def refused(self, message: Any) -> PurgatoryError | None:
        """The error if ``message`` acknowledges the opening frame with one (an interval
        the server does not accept): the session then ends with it, rather than going on
        without the heartbeats it asked for."""
        if message.HasField("ack") and message.ack.request_id == 0 and message.ack.code:
            return ack_from_proto(message.ack, ()).error
        return None
