"""The journal's errors: one root, :class:`JournalError`.

Tree::

    JournalError
    ├── JournalCorruptionError   a mid-file record failed its checks (start-up stops)
    ├── JournalClosedError       an append or request after close
    └── JournalFailedError       an I/O error hit the writer; nothing more is accepted
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["JournalClosedError", "JournalCorruptionError", "JournalError", "JournalFailedError"]


class JournalError(Exception):
    """Base class of the journal's own errors."""


class JournalCorruptionError(JournalError):
    """A record that is not a torn tail failed its checks; start-up must stop.

    ``path`` and ``offset`` name the first bad byte. Opening again with ``repair=True``
    truncates the journal there (see docs/journal.md, "Repair").
    """

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        super().__init__(
            f"journal corrupt in {path} at byte offset {offset}: {reason}; "
            "refusing to start (open with repair=True to truncate the journal there)"
        )
        self.path = path
        self.offset = offset
        self.reason = reason


class JournalClosedError(JournalError):
    """An append or request after :meth:`Journal.close`."""


class JournalFailedError(JournalError):
    """An I/O error hit the writer; the journal accepts nothing more.

    After a failed write or fsync the page cache's state is unknown (a later fsync may
    report success for data that never reached the disk), so the only safe continuation is
    to close and re-open, which re-reads what is really on disk.
    """
