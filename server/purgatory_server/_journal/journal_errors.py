"""The journal's errors: one root, :class:`JournalError`.

Tree::

    JournalError
    ├── JournalCorruptionError   a mid-file record failed its checks (start-up stops)
    ├── JournalClosedError       an append or request after close
    ├── JournalFailedError       an I/O error hit the writer; nothing more is accepted
    └── JournalNoSpaceError      a write ran out of space; undone, retried (not a failure)
"""

from __future__ import annotations

import errno
from pathlib import Path

__all__ = [
    "JournalClosedError",
    "JournalCorruptionError",
    "JournalError",
    "JournalFailedError",
    "JournalGapError",
    "JournalNoSpaceError",
]


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


class JournalGapError(JournalCorruptionError):
    """Records are missing between the journal's recorded start and its first segment:
    the indices ``[first, end)``, or every one from ``first`` on when ``end`` is None (no
    segment is left). Opening with ``repair=True`` accepts the loss and logs it."""

    def __init__(self, path: Path, first: int, end: int | None, why: str) -> None:
        missing = (
            f"missing records [{first}, {end})"
            if end is not None
            else f"missing every record from index {first} on"
        )
        JournalError.__init__(
            self,
            f"journal {path} is {missing}: {why}; refusing to start "
            "(open with repair=True to accept the loss)",
        )
        self.path = path
        self.offset = 0
        self.reason = missing
        self.first = first
        self.end = end


class JournalClosedError(JournalError):
    """An append or request after :meth:`Journal.close`."""


class JournalFailedError(JournalError):
    """An I/O error hit the writer; the journal accepts nothing more.

    After a failed write or fsync the page cache's state is unknown (a later fsync may
    report success for data that never reached the disk), so the only safe continuation is
    to close and re-open, which re-reads what is really on disk.
    """


class JournalNoSpaceError(JournalError):
    """A write ran out of space (``ENOSPC``, ``EDQUOT``) in ``path``.

    Not a failure: the writer undid the partial write (nothing torn is left), keeps the
    unwritten records queued in order and writes them once space is back; their futures
    resolve then. :attr:`Journal.no_space` says meanwhile why the journal is stalled.
    """

    def __init__(self, path: Path, cause: OSError) -> None:
        name = errno_name(cause.errno)
        super().__init__(f"no space left writing {path.name} ({name})")
        self.path = path
        self.errno = cause.errno


def errno_name(number: int | None) -> str:
    """``ENOSPC`` for 28; the number itself where it has no name."""
    return errno.errorcode.get(number or 0, str(number))
