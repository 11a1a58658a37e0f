"""Record builders and doubles shared by the journal tests."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal import Journal, JournalConfig, list_segments

State = JournalRecord.Outcome


def reg(op_id: str, *keys: str, due: int = 1_000_000, payload: bytes = b"") -> JournalRecord:
    return JournalRecord(
        registered=JournalRecord.OperationRegistered(
            purgatory="p",
            operation_id=op_id,
            keys=list(keys),
            timeout_ms=30_000,
            condition=b"\x0a\x00",
            payload=payload,
            due_wall_ms=due,
            created_wall_ms=due - 30_000,
        )
    )


def sig(key: str, amount: int = 1, value: int | None = None, source: str = "") -> JournalRecord:
    signal = JournalRecord.SignalApplied(
        purgatory="p", key=key, amount=amount, source=source, applied_wall_ms=5
    )
    if value is not None:
        signal.value = value
    return JournalRecord(signal=signal)


def out(op_id: str, sequence: int, state: int = State.STATE_COMPLETED) -> JournalRecord:
    return JournalRecord(
        outcome=JournalRecord.Outcome(
            operation_id=op_id,
            state=state,  # type: ignore[arg-type]
            sequence=sequence,
            completed_wall_ms=7,
            purgatory="p",
        )
    )


class CountingFsync:
    """An fsync that counts its calls (thread-safe) and still really syncs."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        with self._lock:
            self.calls += 1
        os.fsync(fd)


def open_journal(path: Path, **config: object) -> Journal:
    return Journal.open(path, JournalConfig(**config))  # type: ignore[arg-type]


def segment_paths(path: Path) -> list[Path]:
    return [p for _, p in list_segments(path)]


class Disk:
    """``os.write`` with a switch: full, it writes a few bytes of the first call (a torn
    frame) and then fails with ``error``."""

    def __init__(self) -> None:
        self.error: int | None = None
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int, data: memoryview) -> int:
        with self._lock:
            if self.error is None:
                return os.write(fd, data)
            self.refused += 1
            if self.refused == 1 and len(data) > 5:
                return os.write(fd, data[:5])
            raise OSError(self.error, os.strerror(self.error))
