"""The durable journal: a write-ahead log of a durable purgatory's records.

A self-contained library; the server plugs it in. Format and guarantees are specified in
``docs/journal.md``. Entry point: :meth:`Journal.open`.
"""

from purgatory_server._journal.compaction import CompactionResult
from purgatory_server._journal.groups import RecoveredGroup
from purgatory_server._journal.journal import Journal
from purgatory_server._journal.journal_errors import (
    JournalClosedError,
    JournalCorruptionError,
    JournalError,
    JournalFailedError,
    JournalGapError,
    JournalNoSpaceError,
)
from purgatory_server._journal.options import FsyncPolicy, JournalConfig
from purgatory_server._journal.pending import PendingOperation, PendingView
from purgatory_server._journal.recovery import RecoveryReport, recover
from purgatory_server._journal.segments import SegmentMeta, SegmentScan, list_segments
from purgatory_server._journal.state import JournalState, RecoveredState
from purgatory_server._journal.writers import WriterPool

__all__ = [
    "CompactionResult",
    "FsyncPolicy",
    "Journal",
    "JournalClosedError",
    "JournalConfig",
    "JournalCorruptionError",
    "JournalError",
    "JournalFailedError",
    "JournalGapError",
    "JournalNoSpaceError",
    "JournalState",
    "PendingOperation",
    "PendingView",
    "RecoveredGroup",
    "RecoveredState",
    "RecoveryReport",
    "SegmentMeta",
    "SegmentScan",
    "WriterPool",
    "list_segments",
    "recover",
]
