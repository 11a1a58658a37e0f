"""Server-wide figures of the Session streams, for the metrics (standard library only).

Sessions are not per purgatory (one stream may name several), so their figures live
beside the registry: the streams open now (the ``purgatory.sessions`` gauge and, summed,
``purgatory.session.buffered``) and how many were cut off for not reading
(``purgatory.session.cut_off``).

Thread safety: the loop thread adds, removes and counts; an exporter thread reads
(``buffered`` copies the set in one GIL-atomic call).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SessionFigures"]


class _Buffered(Protocol):
    @property
    def buffered(self) -> int: ...


class SessionFigures:
    __slots__ = ("cut_off", "open")

    def __init__(self) -> None:
        self.open: set[_Buffered] = set()
        self.cut_off = 0

    def count_cut(self) -> None:
        """One Session stream cut off for not reading."""
        self.cut_off += 1

    def buffered(self) -> int:
        """Outcomes and acknowledgements queued to every open Session stream."""
        return sum(stream.buffered for stream in list(self.open))
