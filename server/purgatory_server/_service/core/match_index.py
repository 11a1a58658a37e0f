"""The ``match`` index: which pending operations a signal's attribute value can concern.

An operation whose condition has ``match`` (an attribute path) does not watch its keys
in the engine: it watches one **match key** per key, ``(key, path, value)`` with its own
attribute's canonical value (:func:`~.attributes.canonical`). A signal on ``key``
carrying attributes is delivered, besides to ``key``'s own watchers, to the match key of
each path operations on ``key`` match on, for the value the signal has there. So a
signal tries only the operations whose attribute it matches (the engine's watch list of
that match key), never the others however many wait on the key. Match keys are tuples,
so they never equal a key a client can send (a string).

The index counts pending operations per (key, path, value): a key without match
operations costs a signal one dict lookup, and only when the signal has attributes.

Thread safety: loop-confined (the operation table's).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from purgatory_server._service.model.attributes import Attributes, split_path

__all__ = ["MatchIndex", "MatchKey"]

MatchKey = tuple[str, str, str]


class MatchIndex:
    """key -> path -> canonical value -> pending operations matching on it."""

    __slots__ = ("_by_key", "_paths")

    def __init__(self) -> None:
        self._by_key: dict[str, dict[str, dict[str, int]]] = {}
        self._paths: dict[str, tuple[str, ...]] = {}  # path text -> its parts

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, keys: Sequence[str], path: str, value: str) -> tuple[MatchKey, ...]:
        """Count an operation on ``keys`` matching ``path`` == ``value``; its match keys."""
        if path not in self._paths:
            self._paths[path] = split_path(path)
        by_key = self._by_key
        for key in keys:
            values = by_key.setdefault(key, {}).setdefault(path, {})
            values[value] = values.get(value, 0) + 1
        return tuple((key, path, value) for key in keys)

    def remove(self, keys: Sequence[str], path: str, value: str) -> None:
        """Undo one :meth:`add` (the operation ended)."""
        by_key = self._by_key
        for key in keys:
            paths = by_key.get(key)
            if paths is None:
                continue
            values = paths.get(path)
            if values is None:
                continue
            left = values.get(value, 0) - 1
            if left > 0:
                values[value] = left
                continue
            values.pop(value, None)
            if not values:
                del paths[path]
                if not paths:
                    del by_key[key]

    def targets(self, key: str, attributes: Attributes) -> list[MatchKey]:
        """The match keys a signal on ``key`` with ``attributes`` is delivered to (those
        with a pending operation)."""
        paths = self._by_key.get(key)
        if paths is None:
            return []
        out: list[MatchKey] = []
        for path, values in paths.items():
            value = attributes.canonical_at(self._paths[path])
            if value is not None and value in values:
                out.append((key, path, value))
        return out

    def keys_of(self, key: str) -> Iterator[MatchKey]:
        """Every match key of ``key`` (CancelRequest by key cancels their operations too)."""
        for path, values in list(self._by_key.get(key, {}).items()):
            for value in list(values):
                yield (key, path, value)
