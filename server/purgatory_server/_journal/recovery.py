"""Recovery: scan a journal directory in order, fix a torn tail, refuse real corruption.

Why: a crash can only damage the end of the *last* segment (sealed segments were fsynced
before the next one began). Damage there that nothing valid follows is a torn write of
unacknowledged records (under ``always``): truncate it, with a warning. Anything else (a
bad record with valid ones after it, damage in a sealed segment, a missing segment) means
acknowledged data changed, and dropping it would lose operations: stop with an error
naming the file and byte offset, unless the operator asked for ``repair``.

Contiguity. The surviving segments must hold every index from the journal's start on: the
start is what the ``START`` file says (compaction writes it before it deletes the
segments below it) or the ``dropped_before_index`` of the last ``CompactionCheckpoint``,
whichever is higher (a journal compacted before ``START`` existed has only the latter),
and 0 when there is neither. A first
segment that starts above it, or a segment that starts above the end of the one before,
means records are missing (an operator or a backup lost a file): recovery refuses with
:class:`JournalGapError` naming the missing range. A first segment *below* the start is a
compaction that crashed between its deletions: replay is the same.

``repair=True`` keeps everything before the first bad byte and sets the rest aside: the
bad segment's bytes from that offset are copied to ``<segment>.corrupt-<offset>`` and the
segment is truncated there; every later segment is renamed to ``<name>.dropped``. Nothing
is deleted; recovery never reads those files again. A missing first segment is accepted
under ``repair`` with the lost range logged (``RecoveryReport.missing``), and ``START``
moved to the first segment, so the next opening accepts it.

Thread-safety: call before the writer starts; it owns the directory while it runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from google.protobuf.message import DecodeError
from purgatory_proto.v1.journal_pb2 import JournalRecord

from purgatory_server._journal.framing import HEADER_BYTES, next_valid_frame
from purgatory_server._journal.journal_errors import JournalCorruptionError, JournalGapError
from purgatory_server._journal.segments import (
    SegmentMeta,
    SegmentScan,
    list_segments,
    read_start,
    write_start,
)

log = logging.getLogger(__name__)

RecordSink = Callable[[int, JournalRecord], None]
# Receives each record's payload (a serialized JournalRecord, CRC-checked) unparsed; raises
# DecodeError for one that does not parse (e.g. JournalState.apply_raw).
RawRecordSink = Callable[[int, memoryview], None]

# The first byte of a serialized JournalRecord whose oneof holds ``compaction`` (field 6,
# length-delimited): the one record recovery reads itself.
_COMPACTION_TAG = (6 << 3) | 2


@dataclass(slots=True)
class RecoveryReport:
    """What recovery found and did. ``segments`` are the surviving ones, oldest first."""

    segments: list[SegmentMeta] = field(default_factory=list)
    records: int = 0
    next_index: int = 0
    truncated_bytes: int = 0
    repaired: list[str] = field(default_factory=list)
    # Repair accepted a missing first segment: the indices [first, end) that were lost.
    missing: tuple[int, int] | None = None


def fsync_directory(directory: Path, fsync: Callable[[int], None] = os.fsync) -> None:
    """Make creations, renames and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def _truncate(path: Path, size: int, fsync: Callable[[int], None]) -> None:
    with path.open("r+b") as f:
        f.truncate(size)
        f.flush()
        fsync(f.fileno())


class _Scanner:
    def __init__(
        self,
        directory: Path,
        sink: RawRecordSink,
        repair: bool,
        fsync: Callable[[int], None],
    ):
        self.directory = directory
        self.sink = sink
        self.repair = repair
        self.fsync = fsync
        self.report = RecoveryReport()
        self.start = 0  # the last checkpoint's dropped_before_index: the journal's start

    def run(self) -> RecoveryReport:
        self.start = read_start(self.directory)
        self._scan(list_segments(self.directory))
        if self.report.segments:
            self._check_start(self.report.segments[0])
        elif self.start:
            self._no_segments()
        return self.report

    def _no_segments(self) -> None:
        """``START`` says the journal begins at an index, and no segment is left."""
        why = f"no segment is left, but the journal starts at index {self.start}"
        if not self.repair:
            raise JournalGapError(self.directory, self.start, None, why)
        log.error(
            "journal: repair: %s: %s; every record from index %d on is lost; opening empty",
            self.directory,
            why,
            self.start,
        )
        self.report.repaired.append(f"records from {self.start} on missing: {why}")
        self.report.next_index = self.start  # the new first segment starts there

    def _check_start(self, first: SegmentMeta) -> None:
        """Refuse (or, repairing, log) records missing below the first segment."""
        if first.base <= self.start:
            return
        if self.start:
            why = f"compaction dropped only the records before {self.start}"
        else:
            why = "no compaction dropped the records before it"
        why = f"the first segment {first.path.name} starts at index {first.base}, but {why}"
        if not self.repair:
            raise JournalGapError(self.directory, self.start, first.base, why)
        log.error(
            "journal: repair: %s: records [%d, %d) are lost (%d records); opening without them",
            self.directory,
            self.start,
            first.base,
            first.base - self.start,
        )
        self.report.missing = (self.start, first.base)
        self.report.repaired.append(f"records [{self.start}, {first.base}) missing: {why}")
        write_start(self.directory, first.base, self.fsync)

    def _scan(self, segments: list[tuple[int, Path]]) -> None:
        expected: int | None = None
        for position, (name_base, path) in enumerate(segments):
            is_last = position == len(segments) - 1
            scan = SegmentScan.read(path)
            if scan.base_index is not None and scan.base_index != name_base:
                scan.error, scan.valid_end = f"header base {scan.base_index} != file name", 0
                scan.base_index = None
            if scan.base_index is not None and expected is not None and name_base != expected:
                # A gap (or overlap) between segments: records are missing.
                reason = f"segment starts at index {name_base}, expected {expected}"
                if name_base > expected:
                    reason += f" (records [{expected}, {name_base}) are missing)"
                self._bad(path, 0, reason)
                self._set_aside(segments[position:], path, 0, whole=True)
                break
            index = name_base
            unparsable = False
            sink = self.sink
            for offset, payload in scan:
                try:
                    sink(index, payload)
                    if payload[0] == _COMPACTION_TAG:
                        self._checkpoint(payload)
                except DecodeError:
                    scan.error, scan.valid_end = "CRC-valid record does not parse", offset
                    unparsable = True
                    break
                index += 1
            expected = index
            if scan.error is None:
                self._keep(path, name_base, index, scan.valid_end)
                continue
            data, at = scan.data, scan.valid_end
            torn = (
                is_last
                and not unparsable
                and next_valid_frame(data, max(at + 1, HEADER_BYTES)) is None
            )
            if torn:
                self._torn_tail(path, name_base, index, at=at, size=len(data), why=scan.error)
                break
            self._bad(path, at, scan.error)
            self._set_aside(segments[position:], path, at, whole=scan.base_index is None)
            if scan.base_index is not None:
                self._keep(path, name_base, index, at)
            break
        self.report.next_index = expected or 0

    def _checkpoint(self, payload: memoryview) -> None:
        record = JournalRecord.FromString(bytes(payload))
        if record.WhichOneof("record") == "compaction":
            self.start = max(self.start, record.compaction.dropped_before_index)

    def _keep(self, path: Path, base: int, end: int, size: int) -> None:
        self.report.segments.append(SegmentMeta(base, path, size, end - base))
        self.report.records += end - base

    def _torn_tail(self, path: Path, base: int, end: int, *, at: int, size: int, why: str) -> None:
        if at < HEADER_BYTES:
            log.warning("journal: removing %s, its header is torn (%s)", path, why)
            path.unlink()
            fsync_directory(self.directory, self.fsync)
            self.report.truncated_bytes += size
            return
        log.warning(
            "journal: torn tail in %s at byte offset %d (%s); truncating %d bytes",
            path,
            at,
            why,
            size - at,
        )
        _truncate(path, at, self.fsync)
        self.report.truncated_bytes += size - at
        self._keep(path, base, end, at)

    def _bad(self, path: Path, offset: int, reason: str) -> None:
        if not self.repair:
            raise JournalCorruptionError(path, offset, reason)
        log.error("journal: repair: bad data in %s at byte offset %d: %s", path, offset, reason)

    def _set_aside(
        self, rest: list[tuple[int, Path]], path: Path, offset: int, *, whole: bool
    ) -> None:
        """Repair: keep the bad segment up to ``offset`` (unless ``whole``), drop the rest."""
        if not whole:
            aside = path.with_name(f"{path.name}.corrupt-{offset}")
            with path.open("rb") as src:
                src.seek(offset)
                aside.write_bytes(src.read())
            _truncate(path, offset, self.fsync)
            self.report.repaired.append(f"{path.name}: truncated at {offset}, tail in {aside.name}")
            rest = rest[1:]
        for _, later in rest:
            later.rename(later.with_name(later.name + ".dropped"))
            self.report.repaired.append(f"{later.name}: renamed to {later.name}.dropped")
        fsync_directory(self.directory, self.fsync)


def recover(
    directory: Path,
    sink: RecordSink | None = None,
    *,
    raw_sink: RawRecordSink | None = None,
    repair: bool = False,
    fsync: Callable[[int], None] = os.fsync,
) -> RecoveryReport:
    """Feed every surviving record of ``directory`` to ``sink(index, record)`` in order.

    ``raw_sink(index, payload)`` instead receives each record unparsed (a memoryview of
    the CRC-checked bytes, valid only during the call) and must raise ``DecodeError`` for
    one that does not parse. Give one of the two. Truncates a torn tail of the last
    segment (logged at WARNING). Raises :class:`JournalCorruptionError` for any other
    damage unless ``repair`` is true. The records already fed to the sink when it raises
    are not retracted: discard the sink.
    """
    if (sink is None) == (raw_sink is None):
        raise TypeError("recover() needs exactly one of sink and raw_sink")
    if raw_sink is None:
        assert sink is not None
        parsed = sink

        def raw_sink(index: int, payload: memoryview) -> None:
            # upb parses straight from the buffer; the stub only says bytes.
            parsed(index, JournalRecord.FromString(cast(bytes, payload)))

    return _Scanner(directory, raw_sink, repair, fsync).run()
