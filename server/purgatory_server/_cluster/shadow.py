"""A standby's shadow of a replicated purgatory: the journal state, kept current.

docs/scale-out.md §5. A standby tails the purgatory's subject with an ordered consumer
and applies every message to a :class:`~.._journal.state.JournalState`, the very replay
code local recovery uses (docs/journal.md §5): pending operations with their progress,
key values, the retained outcome window and the last sequence. Nothing is armed and no
RPC is served from it. At takeover :meth:`catch_up` waits until the shadow has applied
the subject's last message, so a takeover costs the tail not yet applied, not a replay.

A message is a concatenation of local-journal frames; an empty message is an owner's
fence marker and changes nothing.

Thread-safety: loop-confined (nats-py delivers to the callback on the loop).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from nats.js.errors import NotFoundError
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal import JournalState, RecoveredState
from purgatory_server._journal.framing import decode_frame

__all__ = ["Shadow", "last_subject_sequence"]

logger = logging.getLogger("purgatory_server.cluster")


async def last_subject_sequence(js: Any, stream: str, subject: str) -> int:
    """The stream sequence of ``subject``'s last message (0 if it has none)."""
    try:
        msg = await js.get_last_msg(stream, subject)
    except NotFoundError:
        return 0
    return int(msg.seq)


def decode_message(data: bytes) -> list[JournalRecord]:
    """The records of one journal message (ValueError if a frame is damaged)."""
    view = memoryview(data)
    records: list[JournalRecord] = []
    offset = 0
    while offset < len(view):
        frame = decode_frame(view, offset)
        record = JournalRecord()
        record.ParseFromString(cast(bytes, frame.payload))
        records.append(record)
        offset = frame.end
    return records


class Shadow:
    """The journal state of one purgatory as its subject says (see module docstring)."""

    def __init__(
        self, js: Any, stream: str, subject: str, retain_events: int, max_key_values: int
    ) -> None:
        self._js = js
        self._stream = stream
        self._subject = subject
        self.state = JournalState(retain_events, max_key_values)
        self.applied_sequence = 0  # stream sequence of the last message applied
        self.messages = 0
        self._index = 0
        self._sub: Any = None
        self._progress = asyncio.Event()

    async def start(self) -> None:
        self._sub = await self._js.subscribe(
            self._subject, ordered_consumer=True, cb=self._on_message, pending_msgs_limit=-1
        )

    async def _on_message(self, msg: Any) -> None:
        sequence = int(msg.metadata.sequence.stream)
        if sequence <= self.applied_sequence:
            return
        self.apply(sequence, msg.data)

    def apply(self, sequence: int, data: bytes) -> None:
        try:
            records = decode_message(data)
        except ValueError as exc:
            # A damaged message in a replicated stream: never skip silently.
            logger.error("%s: message %d does not decode: %s", self._subject, sequence, exc)
            raise
        state = self.state
        for record in records:
            state.apply(self._index, record)
            self._index += 1
        self.applied_sequence = sequence
        self.messages += 1
        self._progress.set()

    async def catch_up(self, sequence: int, timeout_s: float) -> None:
        """Return once every message up to stream ``sequence`` is applied."""
        async with asyncio.timeout(timeout_s):
            while self.applied_sequence < sequence:
                self._progress.clear()
                await self._progress.wait()

    def snapshot(self) -> RecoveredState:
        return self.state.snapshot(self._index)

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # noqa: BLE001 - best effort: the connection may be gone
                logger.debug("%s: unsubscribe failed: %s", self._subject, exc)
