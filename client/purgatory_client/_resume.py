"""Riding out a dropped call: the :class:`ResumePolicy` and the three loops that use it.

- Long-polls (``wait``, ``try_complete_else_watch(wait=True)``,
  ``batch_try_complete_else_watch(wait=True)``): :class:`LongPollRetry` re-sends the same
  request after UNAVAILABLE. It carries an operation id (the caller's, or one
  :func:`~purgatory_client._long_poll.new_operation_id` made), so the server answers a
  re-send with the operation it already has.
- ``subscribe``: :class:`ResumeCursor`. Resume without loss or duplication: the server
  sends, as response header metadata, the sequence a stream starts after; every received
  event moves the cursor to its sequence. After a dropped stream (UNAVAILABLE, or a
  slow-subscriber RESOURCE_EXHAUSTED) the client re-subscribes with
  ``after_sequence=cursor``, and the server replays exactly the retained events after it
  (filtered as before). Never across a reset: the header also carries the stream's
  incarnation, which the cursor keeps and sends with every resume. If the purgatory's
  stream was reset meanwhile (an in-memory purgatory whose server restarted), the server
  refuses with FAILED_PRECONDITION and the client raises
  :class:`~purgatory_client.StreamResetError` instead of resuming into a different
  stream's sequences.
- ``watch_many`` and worker-group members: :class:`Backoff` re-opens the stream and
  re-sends what is still open, by id.

No I/O here: the sync and async clients only differ in how they sleep between attempts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from purgatory_client.errors import (
    PurgatoryError,
    ResourceExhaustedError,
    SlowSubscriberError,
    UnavailableError,
)

__all__ = ["Backoff", "LongPollRetry", "ResumeCursor", "ResumePolicy"]

START_AFTER = "purgatory-start-after"
INCARNATION = "purgatory-incarnation"


@dataclass(frozen=True)
class ResumePolicy:
    """How ``subscribe`` retries a dropped stream (and ``watch_many`` and the long-polls
    re-send after UNAVAILABLE): up to ``attempts`` times in a row without progress,
    sleeping ``initial_delay_s`` doubled each time (capped at ``max_delay_s``). The
    default gives up after about 8 s of outage; ``attempts=None`` (or :meth:`forever`)
    never gives up on an UNAVAILABLE server."""

    attempts: int | None = 8
    initial_delay_s: float = 0.05
    max_delay_s: float = 2.0

    @classmethod
    def forever(cls, max_delay_s: float = 2.0) -> ResumePolicy:
        """Resume however long the outage lasts, at most ``max_delay_s`` apart."""
        return cls(attempts=None, max_delay_s=max_delay_s)

    def exhausted(self, failures: int) -> bool:
        """True once ``failures`` resumes in a row have failed and no more are allowed."""
        return self.attempts is not None and failures >= self.attempts

    def delay_s(self, failures: int) -> float:
        """The sleep before resume number ``failures + 1`` (the exponent is bounded, so
        a policy that resumes forever never overflows)."""
        return min(self.initial_delay_s * 2.0 ** min(failures, 32), self.max_delay_s)


class LongPollRetry:
    """When a long-poll (``wait=True``) refused with UNAVAILABLE is re-sent, and with
    what deadline.

    The request is re-sent unchanged: it carries an operation id (the caller's, or one
    ``new_operation_id`` made), so the server answers a re-send with the operation it
    already has, waiting on it if it is still pending or returning its outcome if it
    ended meanwhile (a durable purgatory keeps both across a restart). Up to the client's
    ``resume`` policy (attempts in a row, doubling delays) and within the caller's
    ``timeout``, which bounds the whole long-poll, re-sends included.

    Not thread-safe: one per long-poll call.
    """

    __slots__ = ("_deadline", "_failures", "_policy")

    def __init__(self, policy: ResumePolicy, timeout: float | None) -> None:
        self._policy = policy
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._failures = 0

    def remaining(self) -> float | None:
        """The next attempt's deadline in seconds (None: none)."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def delay(self, error: PurgatoryError) -> float:
        """Seconds to wait before re-sending; re-raises ``error`` if it will not help."""
        if not isinstance(error, UnavailableError) or self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        if self._deadline is not None and time.monotonic() + delay >= self._deadline:
            raise error
        self._failures += 1
        return delay


class ResumeCursor:
    """Where a subscription is, and whether (and when) to resume it after an error.

    Not thread-safe: one cursor belongs to one ``subscribe`` generator.
    """

    __slots__ = ("_failures", "_policy", "incarnation", "position")

    def __init__(
        self, after_sequence: int | None, policy: ResumePolicy, incarnation: str | None = None
    ) -> None:
        self.position = after_sequence
        # The stream ``position`` belongs to; sent with every (re)subscribe once known.
        self.incarnation = incarnation or None
        self._policy = policy
        self._failures = 0

    def started(self, initial_metadata: Mapping[str, str] | Iterable[tuple[str, Any]]) -> None:
        """Take the stream's start point and incarnation from the header if we had none.

        The server checked a known incarnation before answering, so the header's can only
        differ from ours when we had none yet.
        """
        pairs = (
            initial_metadata.items() if isinstance(initial_metadata, Mapping) else initial_metadata
        )
        for key, value in pairs:
            text = value if isinstance(value, str) else bytes(value).decode()
            if key == START_AFTER and self.position is None:
                self.position = int(text)
            elif key == INCARNATION and self.incarnation is None:
                self.incarnation = text

    def advance(self, sequence: int) -> None:
        self.position = sequence
        self._failures = 0

    def retry_delay(self, error: PurgatoryError) -> float:
        """Seconds to wait before resuming; re-raises ``error`` if it is not resumable."""
        resumable = isinstance(error, SlowSubscriberError | UnavailableError)
        if not resumable or self.position is None or self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        self._failures += 1
        return 0.0 if isinstance(error, SlowSubscriberError) else delay


def is_resumable(error: PurgatoryError) -> bool:
    """A stream error after which a new stream and a re-send by id are the remedy."""
    return isinstance(error, ResourceExhaustedError | UnavailableError)


class Backoff:
    """Re-open delays of ``watch_many`` and worker-group members: ``policy.attempts`` in
    a row without progress, doubling from ``initial_delay_s`` up to ``max_delay_s``;
    progress (an outcome, a delivery) resets it."""

    __slots__ = ("_failures", "_policy")

    def __init__(self, policy: ResumePolicy) -> None:
        self._policy = policy
        self._failures = 0

    def progress(self) -> None:
        self._failures = 0

    def exhausted(self) -> bool:
        """Whether the policy allows no further re-open without progress."""
        return self._policy.exhausted(self._failures)

    def delay(self, error: PurgatoryError, resumable: bool | None = None) -> float:
        """Seconds before re-opening; re-raises ``error`` if that will not help
        (``resumable``: whether re-opening can help, if the caller knows better than
        :func:`is_resumable`)."""
        if not (is_resumable(error) if resumable is None else resumable):
            raise error
        if self._policy.exhausted(self._failures):
            raise error
        delay = self._policy.delay_s(self._failures)
        self._failures += 1
        # A refusal naming the owner (_routing): the re-opened stream goes there at once.
        return 0.0 if error.metadata.get("purgatory-owner") else delay
