"""ListOperations: a purgatory's operations, filtered and cursor-paged (AIP-158 style).

Order and cursor. Operations are listed in operation id order (code point order, which
for UTF-8 is byte order). A page token carries a digest of (purgatory, filter) and the
last id the page examined; the next page starts strictly after that id. Ids never
change, so paging is stable while operations come and go: an operation that stays
pending for the whole listing is returned exactly once, and one that is registered or
ends meanwhile at most once (in the state it had when its page was built). A token used
with another purgatory or filter is refused (INVALID_ARGUMENT), as AIP-158 asks.

Cost per page, so that listing a large purgatory never stalls the loop:

- pending ids live in a :class:`~.sorted_ids.SortedIds` maintained on register and end
  (O(log n) each), so a page starts at its cursor in O(log n);
- without a key, a page walks the index from its cursor (an id prefix narrows it to a
  contiguous range) and examines at most :data:`MAX_EXAMINED` non-matching operations:
  a selective filter (a due-time range, a prefix with few matches) may therefore give a
  short or even empty page that still has a next token. Callers page until the token
  is empty (the clients' ``iter_operations`` does);
- with a key, the candidates are that key's watch list: O(watchers of the key) a page;
- final states come from the finished-operation table, whose size the server bounds
  (the dedup window): O(that bound) a page, and only when a final state is asked;
- a page stops at :data:`MAX_PAGE_BYTES` of encoded statuses (progress data can be
  large), again with a next token.

Thread safety: loop-confined like :class:`~.purgatory.NamedPurgatory`, whose tables a
:class:`OperationsView` reads; a page is built in one synchronous call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from purgatory_server._service.core.finished_ids import FinishedIds
from purgatory_server._service.core.operation import RemoteOperation
from purgatory_server._service.core.sorted_ids import SortedIds
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.model.outcome import Outcome

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_EXAMINED",
    "MAX_PAGE_BYTES",
    "MAX_PAGE_SIZE",
    "ListQuery",
    "OperationsView",
    "list_page",
    "make_query",
]

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# Non-matching pending operations one page may examine before it returns what it has.
MAX_EXAMINED = 10_000
# Encoded statuses one page may hold (the first one always fits, whatever its size).
MAX_PAGE_BYTES = 1 << 20

Target = RemoteOperation | Outcome
_WATCHING = OperationState.WATCHING
_TOKEN_VERSION = "1"


@dataclass(frozen=True, slots=True)
class ListQuery:
    """A validated ListOperations request (plain values; see :func:`make_query`)."""

    digest: str
    key: str
    prefix: str
    pending: bool
    final_states: frozenset[OperationState]
    due_after_ms: int
    due_before_ms: int
    after: str | None  # the cursor: list ids strictly above it (None: from the start)
    page_size: int

    def matches(self, keys: tuple[str, ...], op_id: str, due_time_ms: int) -> bool:
        if self.key and self.key not in keys:
            return False
        if self.prefix and not op_id.startswith(self.prefix):
            return False
        if due_time_ms < self.due_after_ms:
            return False
        return not (self.due_before_ms and due_time_ms >= self.due_before_ms)


def make_query(
    purgatory: str,
    *,
    key: str,
    prefix: str,
    states: Iterable[OperationState],
    due_after_ms: int,
    due_before_ms: int,
    page_token: str,
    page_size: int,
) -> ListQuery:
    """The query for these (already type-checked) fields; InvalidArgument if they clash."""
    wanted = frozenset(states) or frozenset({_WATCHING})
    if due_before_ms and due_before_ms <= due_after_ms:
        raise InvalidArgument(
            "filter.due_before_ms", f"{due_before_ms} is not above due_after_ms {due_after_ms}"
        )
    canonical = repr(
        (purgatory, key, prefix, sorted(int(s) for s in wanted), due_after_ms, due_before_ms)
    )
    digest = hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()
    after = _decode_token(page_token, digest) if page_token else None
    size = DEFAULT_PAGE_SIZE if page_size == 0 else min(page_size, MAX_PAGE_SIZE)
    return ListQuery(
        digest=digest,
        key=key,
        prefix=prefix,
        pending=_WATCHING in wanted,
        final_states=wanted - {_WATCHING},
        due_after_ms=due_after_ms,
        due_before_ms=due_before_ms,
        after=after,
        page_size=size,
    )


def _encode_token(digest: str, after: str) -> str:
    raw = f"{_TOKEN_VERSION}.{digest}.{after}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str, digest: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        version, token_digest, after = raw.split(".", 2)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidArgument("page_token", "is not a token from ListOperations") from None
    if version != _TOKEN_VERSION:
        raise InvalidArgument("page_token", "is not a token from ListOperations")
    if token_digest != digest:
        raise InvalidArgument(
            "page_token", "was issued for another purgatory or filter; start without one"
        )
    return after


@dataclass(frozen=True, slots=True)
class OperationsView:
    """What a page reads from one purgatory (its own tables, not copies)."""

    pending_ids: SortedIds
    active: Mapping[str, RemoteOperation]
    finished: FinishedIds
    watchers: Callable[[str], list[RemoteOperation]]


def list_page(
    query: ListQuery, view: OperationsView, render: Callable[[Target], Any]
) -> tuple[list[Any], str]:
    """One page: the statuses ``render`` made (protobuf messages, for their encoded
    size) and the next page token ("" at the end)."""
    sources: list[Iterator[tuple[str, Target | None]]] = []
    if query.pending:
        sources.append(_pending(query, view))
    if query.final_states:
        sources.append(_finished(query, view))
    merged = sources[0] if len(sources) == 1 else heapq.merge(*sources, key=_by_id)
    out: list[Any] = []
    size = 0
    last = ""
    for op_id, target in merged:
        if target is None:  # examined enough: resume after this id
            return out, _encode_token(query.digest, op_id)
        if len(out) >= query.page_size or size >= MAX_PAGE_BYTES:
            return out, _encode_token(query.digest, last)
        if op_id == last and out:
            continue  # an id both pending and finished (not expected): list it once
        message = render(target)
        out.append(message)
        size += message.ByteSize()
        last = op_id
    return out, ""


def _by_id(item: tuple[str, Target | None]) -> str:
    return item[0]


def _pending(query: ListQuery, view: OperationsView) -> Iterator[tuple[str, Target | None]]:
    """Matching pending operations in id order; ``(id, None)`` marks where the
    examination budget ran out."""
    after = query.after
    active = view.active
    if query.key:
        ops = [
            op
            for op in view.watchers(query.key)
            if (after is None or op.operation_id > after)
            and active.get(op.operation_id) is op
            and not op.is_completed()
            and query.matches(op.keys, op.operation_id, op.due_time_ms)
        ]
        ops.sort(key=_op_id)
        for op in ops:
            yield op.operation_id, op
        return
    prefix = query.prefix
    if after is None or after < prefix:
        ids = view.pending_ids.iter_from(prefix, inclusive=True)
    else:
        ids = view.pending_ids.iter_from(after, inclusive=False)
    examined = 0
    for op_id in ids:
        if prefix and not op_id.startswith(prefix):
            return
        found = active.get(op_id)
        if (
            found is not None
            and not found.is_completed()
            and query.matches(found.keys, op_id, found.due_time_ms)
        ):
            yield op_id, found
            continue
        examined += 1
        if examined >= MAX_EXAMINED:
            yield op_id, None
            return


def _op_id(op: RemoteOperation) -> str:
    return op.operation_id


def _finished(query: ListQuery, view: OperationsView) -> Iterator[tuple[str, Target | None]]:
    found: list[tuple[str, Target | None]] = list(
        view.finished.listed(query.after, query.final_states, query.matches)
    )
    found.sort(key=_by_id)
    yield from found
