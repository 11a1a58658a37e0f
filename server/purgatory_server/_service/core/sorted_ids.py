"""SortedIds: a set of strings kept in order, for cursor paging (ListOperations).

The chunked layout of ``sortedcontainers.SortedList`` (one flat list moves the whole tail
per insert; a tree costs an object per node), cut down to what the listing needs: sorted
chunks of at most ``2 * load`` ids, ``_maxes[i]`` the largest id of chunk ``i``. Add and
discard cost O(log n) comparisons plus a move of at most ``2 * load`` pointers.

Invariants: every chunk is sorted and non-empty; chunks are in order (the last id of one
is below the first of the next); ``_maxes`` mirrors the chunks' last ids; no id twice.

Thread safety: none. The owner (a loop-confined NamedPurgatory) calls it from one thread;
an iterator is valid only until the next add or discard.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

__all__ = ["SortedIds"]


class SortedIds:
    """An ordered set of strings (see the module docstring for layout and cost)."""

    __slots__ = ("_chunks", "_len", "_load", "_maxes")

    def __init__(self, values: Iterable[str] = (), load: int = 512) -> None:
        """``values`` (any order, duplicates ignored) are sorted once."""
        if load < 1:
            raise ValueError("load must be positive")
        self._load = load
        ordered = sorted(set(values))
        self._chunks: list[list[str]] = [
            ordered[i : i + load] for i in range(0, len(ordered), load)
        ]
        self._maxes: list[str] = [chunk[-1] for chunk in self._chunks]
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def __contains__(self, value: str) -> bool:
        maxes = self._maxes
        i = bisect_left(maxes, value)
        if i == len(maxes):
            return False
        chunk = self._chunks[i]
        j = bisect_left(chunk, value)
        return chunk[j] == value

    def add(self, value: str) -> None:
        """Insert ``value`` (no effect if present)."""
        maxes = self._maxes
        if not maxes:
            self._chunks.append([value])
            maxes.append(value)
            self._len = 1
            return
        i = bisect_left(maxes, value)
        if i == len(maxes):  # above every id: the common case for server-assigned ids
            i -= 1
            chunk = self._chunks[i]
            chunk.append(value)
            maxes[i] = value
        else:
            chunk = self._chunks[i]
            j = bisect_left(chunk, value)
            if chunk[j] == value:
                return
            chunk.insert(j, value)
        self._len += 1
        load = self._load
        if len(chunk) > 2 * load:
            self._chunks[i : i + 1] = [chunk[:load], chunk[load:]]
            maxes[i : i + 1] = [chunk[load - 1], chunk[-1]]

    def discard(self, value: str) -> None:
        """Remove ``value`` (no effect if absent)."""
        maxes = self._maxes
        i = bisect_left(maxes, value)
        if i == len(maxes):
            return
        chunk = self._chunks[i]
        j = bisect_left(chunk, value)
        if chunk[j] != value:
            return
        del chunk[j]
        self._len -= 1
        if not chunk:
            del self._chunks[i]
            del maxes[i]
        elif j == len(chunk):
            maxes[i] = chunk[-1]

    def iter_from(self, start: str, *, inclusive: bool) -> Iterator[str]:
        """The ids ``>= start`` (``inclusive``) or ``> start``, in order."""
        maxes = self._maxes
        chunks = self._chunks
        find = bisect_left if inclusive else bisect_right
        i = find(maxes, start)
        if i == len(maxes):
            return
        first = chunks[i]
        yield from first[find(first, start) :]
        for k in range(i + 1, len(chunks)):
            yield from chunks[k]

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            yield from chunk

    def check(self) -> None:
        """Assert the invariants (tests)."""
        assert len(self._chunks) == len(self._maxes)
        flat: list[str] = []
        for chunk, top in zip(self._chunks, self._maxes, strict=True):
            assert chunk and chunk[-1] == top and len(chunk) <= 2 * self._load
            flat.extend(chunk)
        assert flat == sorted(set(flat)) and len(flat) == self._len
