"""The replicated write-ahead log of one owned purgatory: appends to a JetStream subject.

Shaped like the local journal's writer (``submit(records) -> Future``, ``close()``,
``recovered``, ``directory``) so the service's :class:`~.._service.durable.DurableHooks`
batches records for it exactly as for a local journal, and the same ``JournalRecord``
protobufs reach the stream, framed as in a local segment (CRC, length, payload;
docs/journal.md, "Segment file format"). One JetStream message carries one or more
submissions.

Group commit (docs/scale-out.md, "Layout in JetStream"): each message names the subject's
previous sequence in ``Nats-Expected-Last-Subject-Sequence``, so at most one message per
purgatory is unacknowledged; submissions that arrive meanwhile queue and go out together
as the next message (up to ``MAX_MESSAGE_BYTES``). Under load the messages grow, not the
queue.

Snapshots (docs/scale-out.md, "Standbys"): the log keeps the standby's
:class:`~.snapshot.SubjectReplay` current with every submission, as the local journal keeps
its mirror; a :class:`~.snapshot_writer.SnapshotWriter` appends snapshot messages through
:meth:`submit_marked` (each alone in its message, fenced like the rest).

Fencing: a new owner appends a marker naming the last sequence it read; from then on an
append by this (old) owner names an older sequence and JetStream rejects it (error
10071). The log then *fences itself*: it fails that append and every later one with
:class:`NotOwner` (UNAVAILABLE) and calls ``on_lost`` once. It never retries a rejected
append. It also refuses to append once ``lease_valid()`` is false, so an owner paused
past its lease does not even try. A timed-out append is re-sent with the same
``Nats-Msg-Id`` (JetStream de-duplicates it) until ``append_timeout_s``; past that the
log fences itself too, since whether the append landed is unknown, and the purgatory is
rebuilt from the stream by whichever server acquires it next.

Thread-safety: loop-confined (the server's event loop), except :meth:`close`, which a
worker thread calls (``DurableHooks.close`` runs it with ``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import nats.errors
from nats.js.errors import APIError
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._cluster.layout import (
    EPOCH_HEADER,
    EXPECTED_SUBJECT_SEQ,
    MAX_MESSAGE_BYTES,
    MSG_ID,
)
from purgatory_server._cluster.snapshot import SnapshotPolicy, SubjectReplay
from purgatory_server._cluster.snapshot_writer import SnapshotWriter
from purgatory_server._journal import RecoveredState
from purgatory_server._journal.framing import encode_frame
from purgatory_server._service.model.errors import NotOwner

__all__ = ["MAX_MESSAGE_BYTES", "ReplicatedLog"]

logger = logging.getLogger("purgatory_server.cluster")

WRONG_LAST_SEQUENCE = 10071
_ATTEMPT_TIMEOUT_S = 2.0

# A queued submission: payload, records, its future, and headers of a snapshot message
# (which goes alone and resolves with its stream sequence) or None.
_Item = tuple[bytes, int, "Future[int]", dict[str, str] | None]


class ReplicatedLog:
    """Appends one purgatory's submissions to its subject, fenced (see module docstring)."""

    # The local journal's out-of-space state; a stream has no local disk to fill.
    no_space: str | None = None

    def __init__(
        self,
        js: Any,
        *,
        name: str,
        stream: str,
        subject: str,
        msg_id_prefix: str,
        epoch: int,
        last_sequence: int,
        recovered: RecoveredState,
        loop: asyncio.AbstractEventLoop,
        lease_valid: Callable[[], bool],
        on_lost: Callable[[str], None],
        not_owner: Callable[[], NotOwner],
        append_timeout_s: float,
        replay: SubjectReplay | None = None,
        snapshot_policy: SnapshotPolicy | None = None,
    ) -> None:
        self._js = js
        self.name = name
        self._stream = stream
        self._subject = subject
        self._msg_prefix = msg_id_prefix
        self.epoch = epoch
        self.last_sequence = last_sequence  # the subject's last stream sequence (ours)
        self.recovered = recovered
        self.directory = f"jetstream:{stream}/{subject}"
        self._loop = loop
        self._lease_valid = lease_valid
        self._on_lost = on_lost
        self._not_owner = not_owner
        self._append_timeout_s = append_timeout_s
        self._queue: deque[_Item] = deque()
        self._pump: asyncio.Task[None] | None = None
        self._messages = 0
        self._lost: str | None = None
        self._closed = False
        self.bytes_appended = 0
        # The metrics hooks of a local journal's fsync: (seconds per append, records).
        self._append_listeners: list[Callable[[float, int], None]] = []
        self._replay: SubjectReplay | None = None
        self.snapshots: SnapshotWriter | None = None
        if replay is not None and snapshot_policy is not None and snapshot_policy.enabled:
            replay.drop_candidate()  # the old owner's unfinished snapshot
            self._replay = replay
            self.snapshots = SnapshotWriter(
                js,
                name=name,
                stream=stream,
                subject=subject,
                epoch=epoch,
                replay=replay,
                policy=snapshot_policy,
                submit=self.submit_marked,
                loop=loop,
            )

    def add_fsync_listener(self, listener: Callable[[float, int], None]) -> None:
        """Call ``listener`` after each append the stream acknowledged, with its duration
        in seconds and its records: the local journal's fsync metrics, here."""
        self._append_listeners.append(listener)

    def release_recovered(self) -> None:
        """Forget the start-up snapshot's pending operations once the purgatory has them
        (as the local journal does: they are kept by the purgatory, not twice)."""
        self.recovered = dataclasses.replace(self.recovered, pending={})

    @property
    def lost(self) -> str | None:
        """Why this log stopped appending for good, or None while it is the owner's."""
        return self._lost

    # -- submitting (loop thread) ------------------------------------------------------
    def submit(self, records: Sequence[JournalRecord]) -> Future[int]:
        """Queue ``records`` as one submission; the future resolves once acknowledged."""
        future: Future[int] = Future()
        if self._lost is not None or self._closed:
            future.set_exception(self._not_owner())
            return future
        payload = b"".join(encode_frame(r.SerializeToString()) for r in records)
        if self._replay is not None:
            self._replay.apply_records(records)
        self._enqueue((payload, len(records), future, None))
        return future

    def submit_marked(self, body: bytes, headers: dict[str, str]) -> Future[int]:
        """Queue one snapshot message; the future resolves with its stream sequence."""
        future: Future[int] = Future()
        if self._lost is not None or self._closed:
            future.set_exception(self._not_owner())
            return future
        self._enqueue((body, 0, future, headers))
        return future

    def _enqueue(self, item: _Item) -> None:
        self._queue.append(item)
        if self._pump is None:
            self._pump = self._loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._queue and self._lost is None:
                batch = self._next_batch()
                headers = batch[0][3]
                payload = b"".join(item[0] for item in batch)
                started = time.monotonic()
                ok = await self._append(payload, headers)
                if not ok:
                    for item in batch:
                        if not item[2].done():
                            item[2].set_exception(self._not_owner())
                    break
                if headers is not None:  # a snapshot message: alone in its batch
                    batch[0][2].set_result(self.last_sequence)
                    continue
                records = sum(item[1] for item in batch)
                for listener in self._append_listeners:
                    listener(time.monotonic() - started, records)
                for _, count, future, _ in batch:
                    future.set_result(count)
                if self.snapshots is not None:
                    self.snapshots.appended(len(payload))
            if self._lost is not None:
                self._fail_queued([])
        finally:
            self._pump = None
            if self._queue and self._lost is None:
                self._pump = self._loop.create_task(self._run())

    def _next_batch(self) -> list[_Item]:
        """Queued submissions up to a message's size; a snapshot message goes alone."""
        queue = self._queue
        first = queue.popleft()
        batch = [first]
        if first[3] is not None:
            return batch
        size = len(first[0])
        while queue and queue[0][3] is None and size + len(queue[0][0]) <= MAX_MESSAGE_BYTES:
            item = queue.popleft()
            batch.append(item)
            size += len(item[0])
        return batch

    def _fail_queued(self, batch: list[_Item]) -> None:
        for _, _, future, _ in [*batch, *self._queue]:
            if not future.done():
                future.set_exception(self._not_owner())
        self._queue.clear()

    async def _append(self, payload: bytes, extra: dict[str, str] | None = None) -> bool:
        """Append one message; False (and the log fenced) if it cannot be acknowledged."""
        self._messages += 1
        headers = {
            EXPECTED_SUBJECT_SEQ: str(self.last_sequence),
            MSG_ID: f"{self._msg_prefix}/{self.epoch}/{self._messages}",
            EPOCH_HEADER: str(self.epoch),
            **(extra or {}),
        }
        deadline = time.monotonic() + self._append_timeout_s
        attempt = 0
        while True:
            attempt += 1
            if not self._lease_valid():
                self.fence("the owner lease was not renewed in time")
                return False
            try:
                ack = await self._js.publish(
                    self._subject,
                    payload,
                    timeout=_ATTEMPT_TIMEOUT_S,
                    stream=self._stream,
                    headers=dict(headers),
                )
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    self.fence(f"fenced by a newer owner ({exc.description})")
                    return False
                problem = f"{exc.description} ({exc.err_code})"
            except (TimeoutError, nats.errors.Error, OSError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                self.last_sequence = int(ack.seq)
                self.bytes_appended += len(payload)
                return True
            if time.monotonic() >= deadline:
                self.fence(f"append not acknowledged in {self._append_timeout_s:.0f}s: {problem}")
                return False
            if attempt % 20 == 1:  # about once a second while JetStream elects a leader
                logger.warning(
                    "purgatory %s: append retried (attempt %d): %s", self.name, attempt, problem
                )
            await asyncio.sleep(0.05)

    # -- losing ownership --------------------------------------------------------------
    def fence(self, reason: str) -> None:
        """Stop appending for good (idempotent); ``on_lost`` runs once, on the loop."""
        if self._lost is not None:
            return
        self._lost = reason
        if self.snapshots is not None:
            self.snapshots.cancel()
        logger.warning("purgatory %s: stops appending: %s", self.name, reason)
        self._fail_queued([])
        self._loop.call_soon(self._on_lost, reason)

    # -- closing -----------------------------------------------------------------------
    async def drain(self, timeout_s: float = 5.0) -> None:
        """Wait until what was submitted is acknowledged (or the log is lost)."""
        if self.snapshots is not None:
            self.snapshots.cancel()  # an unfinished snapshot is ignored by readers
        deadline = time.monotonic() + timeout_s
        while (self._queue or self._pump is not None) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self._closed = True

    def close(self) -> None:
        """Blocking close from a worker thread: waits for the queue to drain."""
        if self._closed:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.drain(), self._loop).result(10)
        except (RuntimeError, TimeoutError):  # the loop is closing: nothing more to wait for
            self._closed = True
