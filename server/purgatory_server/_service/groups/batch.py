"""One entry of a batch of acks and nacks, and its answer (``WorkerGroup.settle``)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BatchEntry", "BatchResult"]


class BatchEntry(NamedTuple):
    """An ack, or a nack (``nack``) with its ``delay_ms`` (None: the group's backoff)."""

    sequence: int
    attempt: int
    nack: bool = False
    delay_ms: int | None = None
    dead_letter: bool = False


class BatchResult(NamedTuple):
    """``code`` 0 (OK) or the status code of the entry's error, with its ``message``;
    a nack's ``dead_letter`` and ``retry_at_ms`` (as ``WorkerGroup.nack`` answers)."""

    sequence: int
    code: int = 0
    message: str = ""
    dead_letter: bool = False
    retry_at_ms: int = 0
