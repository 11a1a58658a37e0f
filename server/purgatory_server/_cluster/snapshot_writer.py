"""The owner's side of snapshots: when one is due, write it between submissions, then purge.

docs/scale-out.md, "Standbys". The :class:`~.log.ReplicatedLog` tells the writer the size of each
ordinary message acknowledged; when :class:`~.snapshot.SnapshotPolicy` says a snapshot
is due, one task writes it through the log, so every snapshot message is fenced exactly
like a submission (a stale owner cannot write one) and keeps its place in the order of
submissions: the begin, then one part at a time (:mod:`.snapshot`), so ordinary
submissions wait at most for one part's append. Once the end is acknowledged the subject's
messages before the begin are purged (JetStream ``purge`` with ``filter`` = the subject
and ``seq`` = the begin's sequence). The purge is not fenced and need not be: it removes
only what a complete snapshot in the subject covers, and a later snapshot's begin is
always higher, so a late purge by a replaced owner removes nothing anyone needs.

A failed snapshot (the log was fenced or closed, the purge timed out) is logged and
left: an unfinished one is ignored by readers, and the next one purges what this did not.

Thread-safety: loop-confined (the server's event loop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import nats.errors
from nats.js.errors import APIError

from purgatory_server._cluster.snapshot import (
    CHUNK_BYTES,
    SnapshotBuilder,
    SnapshotPolicy,
    SubjectReplay,
    marker,
    outcome_frame,
)
from purgatory_server._service.model.errors import NotOwner

__all__ = ["SnapshotWriter"]

logger = logging.getLogger("purgatory_server.cluster")

_WINDOW_SLICE = 500
# submit(body, headers) -> future of the message's stream sequence.
SubmitMarked = Callable[[bytes, dict[str, str]], "Future[int]"]


class SnapshotWriter:
    """Writes an owner's snapshots when due (see module docstring)."""

    def __init__(
        self,
        js: Any,
        *,
        name: str,
        stream: str,
        subject: str,
        epoch: int,
        replay: SubjectReplay,
        policy: SnapshotPolicy,
        submit: SubmitMarked,
        loop: asyncio.AbstractEventLoop,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self._js = js
        self._name = name
        self._stream = stream
        self._subject = subject
        self._epoch = epoch
        self.replay = replay
        self._policy = policy
        self._submit = submit
        self._loop = loop
        self._chunk_bytes = chunk_bytes
        self._task: asyncio.Task[None] | None = None
        self._count = 0
        self.written = 0  # complete snapshots written by this owner
        self.purged_before = 0  # the latest purge's sequence

    @property
    def busy(self) -> bool:
        return self._task is not None

    def appended(self, size: int) -> None:
        """An ordinary message of ``size`` bytes was acknowledged."""
        replay = self.replay
        replay.tail_messages += 1
        replay.tail_bytes += size
        if self._task is None and self._policy.due(replay):
            self._task = self._loop.create_task(self._write())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _write(self) -> None:
        try:
            await self._write_one()
        except NotOwner:
            pass  # the log is fenced or closed: an unfinished snapshot is ignored
        except (TimeoutError, nats.errors.Error, APIError, OSError) as exc:
            logger.warning("purgatory %s: snapshot not finished: %s", self._name, exc)
        finally:
            self._task = None

    async def _prepare_window(self) -> dict[int, bytes]:
        """Serialize the event window a slice at a time (10k outcomes take ~60 ms)."""
        window = self.replay.state.events_window()
        prepared: dict[int, bytes] = {}
        for start in range(0, len(window), _WINDOW_SLICE):
            for outcome in window[start : start + _WINDOW_SLICE]:
                prepared[outcome.sequence] = outcome_frame(outcome)
            await asyncio.sleep(0)
        return prepared

    async def _write_one(self) -> None:
        self._count += 1
        snapshot_id = f"{self._epoch}.{self._count}"
        started = time.monotonic()
        prepared = await self._prepare_window()
        builder = SnapshotBuilder(self.replay.state, self._chunk_bytes)
        futures = [
            self._submit(body, marker("begin" if i == 0 else "part", snapshot_id))
            for i, body in enumerate(builder.begin(prepared))
        ]
        begin_sequence = await asyncio.wrap_future(futures[0])
        for future in futures[1:]:
            await asyncio.wrap_future(future)
        parts = len(futures)
        # Build a part and queue it in one step, then wait for its ack before the next.
        while (part := builder.next_part()) is not None:
            await asyncio.wrap_future(self._submit(part, marker("part", snapshot_id)))
            parts += 1
        end = self._submit(builder.end(begin_sequence), marker("end", snapshot_id))
        end_sequence = await asyncio.wrap_future(end)
        self.replay.completed(builder.bytes)
        self.written += 1
        await self._js.purge_stream(self._stream, seq=begin_sequence, subject=self._subject)
        self.purged_before = begin_sequence
        logger.info(
            "purgatory %s: snapshot %s at %d..%d (%d messages, %d B, %d operations, %d keys) "
            "in %.3fs; purged what came before",
            self._name,
            snapshot_id,
            begin_sequence,
            end_sequence,
            parts + 1,
            builder.bytes,
            builder.carried_operations,
            builder.carried_keys,
            time.monotonic() - started,
        )
