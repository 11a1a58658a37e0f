"""Structured attributes of a signal or an operation (what expressions and ``match`` read).

An :class:`Attributes` holds two views of one JSON object: ``raw``, its canonical
encoding (a ``google.protobuf.Struct`` serialized deterministically: what the journal
keeps, what the budget charges, what equality and hashing use) and ``value``, the plain
Python mapping expressions are evaluated on. Numbers arrive as doubles; an integral one
within 2**53 is kept as an ``int`` (so ``attributes.count + 1`` is an int expression).

:func:`canonical` spells one JSON value as a string, equal for equal values (a double
and the int it equals spell alike): the key of the ``match`` index. (Containers inside a
container are spelled by ``json``, where 2.0 and 2 differ: Structs decoded here hold ints.)

Immutable and thread-safe: nothing here changes after construction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["Attributes", "JsonValue", "canonical", "split_path"]

# A JSON value as the expressions see it.
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]

_EXACT = 2**53


class Attributes:
    """One JSON object's canonical encoding and its value; equal (and hashed) by encoding."""

    __slots__ = ("raw", "value")

    def __init__(self, raw: bytes, value: dict[str, JsonValue]) -> None:
        self.raw = raw
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attributes):
            return NotImplemented
        return self.raw == other.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"Attributes({self.value!r})"

    def canonical_at(self, path: Sequence[str]) -> str | None:
        """:func:`canonical` of the value at ``path`` (object keys), None if absent."""
        node: JsonValue = self.value
        for part in path:
            if not isinstance(node, dict):
                return None
            if part not in node:
                return None
            node = node[part]
        return canonical(node)


def canonical(value: JsonValue) -> str:
    """One spelling per JSON value, a different one for different values (2.0 and 2
    alike): a type letter and the scalar, or the sorted JSON text of a container. An
    index key, never parsed back."""
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return "i" + str(value)
    if isinstance(value, float):
        if value.is_integer() and -_EXACT <= value <= _EXACT:
            return "i" + str(int(value))
        return "d" + repr(value)
    if value is None:
        return "n"
    return "j" + json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def split_path(path: str) -> tuple[str, ...]:
    """A ``match`` path ("order.id") as its object keys; every part non-empty (checked
    by the caller)."""
    return tuple(path.split("."))
