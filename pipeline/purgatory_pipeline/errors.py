"""The pipeline's exceptions: one root, so a caller can catch everything the pipeline raises.

Tree::

    PipelineError
    ├── JournalFormatError      the bytes are not a journal this reader can read
    │   ├── NotAJournalError    a path with no segments, or a file that is not a segment
    │   ├── NewerFormatError    a segment written by a newer format version
    │   └── JournalCorruptionError  damage that recovery would refuse too (names file + offset)
    ├── UnsupportedLocationError  a URI whose scheme the journal reader cannot open
    ├── TablesNotFoundError   report's --tables holds no ingested table
    └── StreamError             the live source could not continue
        └── StreamResetError    the server's stream incarnation changed (in-memory restart)
"""

from __future__ import annotations

__all__ = [
    "JournalCorruptionError",
    "JournalFormatError",
    "NewerFormatError",
    "NotAJournalError",
    "PipelineError",
    "StreamError",
    "StreamResetError",
    "TablesNotFoundError",
    "UnsupportedLocationError",
]


class PipelineError(Exception):
    """Root of every error the pipeline raises on purpose."""


class JournalFormatError(PipelineError):
    """Input that cannot be read as a journal."""


class NotAJournalError(JournalFormatError):
    """A path that holds no segment, or a file whose header is not a segment header."""


class NewerFormatError(JournalFormatError):
    """A segment whose header declares a format version newer than this reader knows."""


class JournalCorruptionError(JournalFormatError):
    """Damage the server's recovery would also refuse: not a torn tail of the last segment."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"journal corrupt: {path} at byte offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class UnsupportedLocationError(PipelineError):
    """A journal URI whose scheme no file system of the reader opens (e.g. Hadoop's ``s3a://``).

    The journal reader runs in Python workers and opens files through ``pyarrow.fs``
    (local paths, ``file://``, ``hdfs://``, ``s3://``, ``gs://``, ``abfs://``); Spark's
    writers use Hadoop's file systems, whose scheme names differ for some stores.
    """


class TablesNotFoundError(PipelineError):
    """``report --tables`` points where ``ingest`` wrote nothing."""


class StreamError(PipelineError):
    """The live Subscribe source could not go on (server gone, events no longer retained)."""


class StreamResetError(StreamError):
    """The purgatory's stream incarnation changed: an in-memory purgatory was re-created.

    Its sequence numbers started again at 1, so resuming "after sequence N" would silently
    skip or mix events of two different streams.
    """

    def __init__(self, purgatory: str, expected: str, current: str) -> None:
        super().__init__(
            f"purgatory {purgatory!r}: stream incarnation changed from {expected!r} to "
            f"{current!r} (the server re-created it and its sequence restarted); "
            "start the query afresh or pass on_reset=restart"
        )
        self.purgatory = purgatory
        self.expected = expected
        self.current = current
