"""ListOperations for the clients, without I/O: the request, the page, the filter.

Shared by :class:`~purgatory_client.PurgatoryClient` and
:class:`~purgatory_client.AsyncPurgatoryClient` (``list_operations`` for one page,
``iter_operations`` for every page). Paging follows AIP-158: a page may be shorter than
``page_size`` (even empty) while ``next_page_token`` is set, because the server bounds
the work of each page; only an empty token means the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_client._checks import converting, text, uint
from purgatory_client._models import OperationState, OperationStatus

__all__ = ["OperationPage", "list_request", "page_from_proto"]


@dataclass(frozen=True)
class OperationPage:
    """One page of ListOperations: statuses in operation id order, with progress."""

    operations: list[OperationStatus] = field(default_factory=list)
    # "" when there is nothing more; pass it back (same filter) for the next page.
    next_page_token: str = ""


def list_request(
    purgatory: str,
    *,
    key: str,
    prefix: str,
    states: Iterable[OperationState],
    due_after_ms: int,
    due_before_ms: int,
    page_token: str,
    page_size: int,
) -> Any:
    """The request; ``states`` empty means pending only, due times are Unix epoch ms on
    the server's clock (``due_after_ms <= due < due_before_ms``, 0: no bound)."""
    with converting("states"):
        wanted = [int(OperationState(s)) for s in states]
    message = pb.ListOperationsFilter(
        key=text("key", key),
        operation_id_prefix=text("prefix", prefix),
        states=cast(Any, wanted),
        due_after_ms=uint("due_after_ms", due_after_ms),
        due_before_ms=uint("due_before_ms", due_before_ms),
    )
    return pb.ListOperationsRequest(
        purgatory=text("purgatory", purgatory),
        filter=message,
        page_token=text("page_token", page_token),
        page_size=uint("page_size", page_size, 32),
    )


def page_from_proto(msg: Any, status_from_proto: Any) -> OperationPage:
    return OperationPage(
        operations=[status_from_proto(s) for s in msg.operations],
        next_page_token=msg.next_page_token,
    )
