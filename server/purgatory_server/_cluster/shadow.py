"""A standby's shadow of a replicated purgatory: the journal state, kept current.

docs/scale-out.md, "Standbys". A standby tails the purgatory's subject with an ordered consumer
and applies every message to a :class:`~.._journal.state.JournalState`, the very replay
code local recovery uses (docs/journal.md, "Replay rules"): pending operations with their progress,
key values, the retained outcome window and the last sequence. Nothing is armed and no
RPC is served from it. At takeover :meth:`catch_up` waits until the shadow has applied
the subject's last message, so a takeover costs the tail not yet applied, not a replay.

A message is a concatenation of local-journal frames; an empty message is an owner's
fence marker and changes nothing. Snapshots (:mod:`.snapshot`) replace the state when
complete, so a shadow started after the owner purged the subject's old messages replays
the latest snapshot and the tail, not the purgatory's whole history.

Thread-safety: loop-confined (nats-py delivers to the callback on the loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from nats.js.errors import NotFoundError

from purgatory_server._cluster.snapshot import SubjectReplay, decode_message
from purgatory_server._journal import JournalState, RecoveredState
from purgatory_server._journal.dedup_window import Dedup

__all__ = ["Shadow", "decode_message", "last_subject_sequence"]

logger = logging.getLogger("purgatory_server.cluster")


async def last_subject_sequence(js: Any, stream: str, subject: str) -> int:
    """The stream sequence of ``subject``'s last message (0 if it has none)."""
    try:
        msg = await js.get_last_msg(stream, subject)
    except NotFoundError:
        return 0
    return int(msg.seq)


class Shadow:
    """The journal state of one purgatory as its subject says (see module docstring)."""

    def __init__(
        self,
        js: Any,
        stream: str,
        subject: str,
        retain_events: int,
        max_key_values: int,
        *,
        dedup: Dedup = (0, 0),
    ) -> None:
        self._js = js
        self._stream = stream
        self._subject = subject
        self.replay = SubjectReplay(retain_events, max_key_values, dedup)
        self.applied_sequence = 0  # stream sequence of the last message applied
        self.messages = 0
        self._sub: Any = None
        self._progress = asyncio.Event()
        self._handed_over = False

    async def start(self) -> None:
        self._sub = await self._js.subscribe(
            self._subject, ordered_consumer=True, cb=self._on_message, pending_msgs_limit=-1
        )

    async def _on_message(self, msg: Any) -> None:
        sequence = int(msg.metadata.sequence.stream)
        if sequence <= self.applied_sequence or self._handed_over:
            return
        self.apply(sequence, msg.data, msg.headers)

    @property
    def state(self) -> JournalState:
        return self.replay.state

    def apply(self, sequence: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        try:
            self.replay.apply(data, headers)
        except ValueError as exc:
            # A damaged message in a replicated stream: never skip silently.
            logger.error("%s: message %d does not decode: %s", self._subject, sequence, exc)
            raise
        self.applied_sequence = sequence
        self.messages += 1
        self._progress.set()

    async def catch_up(self, sequence: int, timeout_s: float) -> None:
        """Return once every message up to stream ``sequence`` is applied."""
        async with asyncio.timeout(timeout_s):
            while self.applied_sequence < sequence:
                self._progress.clear()
                await self._progress.wait()

    def handover(self) -> SubjectReplay:
        """The replay, for the new owner's log to keep current; from now on this shadow
        applies nothing (the owner's own appends may still be delivered to it until it
        stops, and must not be applied twice)."""
        self._handed_over = True
        return self.replay

    def snapshot(self) -> RecoveredState:
        return self.replay.state.snapshot(self.replay.next_index)

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # noqa: BLE001 - best effort: the connection may be gone
                logger.debug("%s: unsubscribe failed: %s", self._subject, exc)
