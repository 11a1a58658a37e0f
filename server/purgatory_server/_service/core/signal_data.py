"""Signal data accumulated by operations: stored once, referenced by every operation.

An operation whose condition accumulates (every kind but ``ANY_KEY``) keeps the data of
the signals it received; copied into each, a signal's data would be held once per
watcher. Here the data is an immutable chain of :class:`DataLink` objects, each naming
its parent and one signal's own ``bytes``: operations that received the same signals
point at the same link, and a signal delivered to them makes one child link for all
(``add`` memoizes it). The bytes are joined once, when the first of those operations
ends, and that one ``bytes`` object is every outcome's ``result.data``.

Bounds: a chain stops at ``limit`` bytes (the last link keeps the part that fits and
marks the chain truncated); past ``MAX_DEPTH`` links the data is joined into a new root
link, so a chain never gets deep enough for recursive freeing to matter.

Charging (:mod:`.budget`): a link charges its bytes (plus ``LINK_BYTES``) to its
purgatory's account when made and releases them when it is freed, whichever thread drops
the last reference (``free_later``). Links made for several distinct parents by one
signal share the signal's bytes but each charges them: the budget errs towards too much.

Thread safety: links are immutable but for two memos (the last child, the joined data),
written under the operation's lock on the loop thread (``add``) or by whichever thread
ends the operation (``data``); both writes are single attribute stores that any racer
would make with an equal value.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from purgatory_server._service.model.conditions import SignalRecord

__all__ = ["LINK_BYTES", "MAX_DEPTH", "Charges", "DataLink"]

# One link's own cost beyond its bytes (the object, its weak reference).
LINK_BYTES = 160
MAX_DEPTH = 32


class Charges(Protocol):
    """Where links charge their bytes (:class:`~.budget.Account`)."""

    def charge(self, nbytes: int) -> None: ...

    def free_later(self, nbytes: int) -> None: ...

    def check_room(self, nbytes: int) -> None:
        """Raise LimitExceeded unless ``nbytes`` more fit now."""
        ...


class DataLink:
    """The data an operation accumulated so far: its last link (see module docstring)."""

    __slots__ = (
        "__weakref__",
        "_child",
        "_child_of",
        "_joined",
        "charges",
        "chunk",
        "depth",
        "length",
        "parent",
        "truncated",
    )

    def __init__(
        self,
        charges: Charges | None,
        parent: DataLink | None = None,
        chunk: bytes = b"",
        truncated: bool = False,
    ) -> None:
        self.charges = charges
        self.parent = parent
        self.chunk = chunk
        self.length: int = len(chunk) + (parent.length if parent is not None else 0)
        self.depth: int = parent.depth + 1 if parent is not None else 0
        self.truncated = truncated
        self._joined: bytes | None = None
        # The child made for the last signal added here (a weak reference: a strong one
        # would make a cycle with the child's ``parent``).
        self._child_of: SignalRecord | None = None
        self._child: weakref.ref[DataLink] | None = None
        if chunk and charges is not None:
            charges.charge(len(chunk) + LINK_BYTES)

    @classmethod
    def root(cls, charges: Charges | None) -> DataLink:
        """The empty chain every new operation of a purgatory starts from."""
        return cls(charges)

    def __del__(self) -> None:
        if self.chunk and self.charges is not None:
            self.charges.free_later(len(self.chunk) + LINK_BYTES)

    def add(self, signal: SignalRecord, limit: int) -> DataLink:
        """The chain with ``signal``'s data appended (``self`` if it adds nothing)."""
        data = signal.data
        if not data or self.truncated:
            return self
        if self._child_of is signal and self._child is not None:
            child = self._child()
            if child is not None:
                return child
        room = limit - self.length
        if len(data) <= room:
            child = DataLink(self.charges, self, data)
        else:
            child = DataLink(self.charges, self, data[: max(room, 0)], truncated=True)
        if child.depth > MAX_DEPTH:  # joined into a new root: the chain stays shallow
            child = DataLink(self.charges, None, child.data(), child.truncated)
        self._child_of = signal
        self._child = weakref.ref(child)
        return child

    def data(self) -> bytes:
        """Every byte of the chain, joined once (a single chunk is returned as it is)."""
        joined = self._joined
        if joined is not None:
            return joined
        if self.parent is None or not self.parent.length:
            joined = self.chunk
        else:
            chunks = []
            link: DataLink | None = self
            while link is not None:
                chunks.append(link.chunk)
                link = link.parent
            joined = b"".join(reversed(chunks))
        self._joined = joined
        return joined
