"""Field names for a batch's elements, built only when an error message needs one.

Thread safety: immutable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

__all__ = ["FieldPrefixes"]


class FieldPrefixes(Sequence[str]):
    """``field[i].`` for ``i`` in ``range(n)``, built only when indexed (only a rejected
    batch needs one)."""

    __slots__ = ("_field", "_n")

    def __init__(self, field: str, n: int) -> None:
        self._field = field
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        if not -self._n <= index < self._n:
            raise IndexError(index)
        return f"{self._field}[{index % self._n}]."
