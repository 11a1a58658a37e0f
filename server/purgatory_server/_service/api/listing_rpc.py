"""ListOperations on the wire: request validation and the response (see :mod:`.listing`).

Like :mod:`.convert`, it turns invalid input into INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.api.answer import Service
from purgatory_server._service.config.server_config import Limits
from purgatory_server._service.core.listing import ListQuery, list_page, make_query
from purgatory_server._service.core.named_purgatory import NamedPurgatory
from purgatory_server._service.model.errors import InvalidArgument
from purgatory_server._service.model.operation_state import OperationState
from purgatory_server._service.wire.convert import operation_status_with_progress
from purgatory_server._service.wire.validation import check_key, check_operation_id

__all__ = ["list_operations"]


def _query(purgatory: str, request: pb.ListOperationsRequest, limits: Limits) -> ListQuery:
    f = request.filter
    if f.key:
        check_key("filter.key", f.key, limits)
    check_operation_id("filter.operation_id_prefix", f.operation_id_prefix, limits)
    states: list[OperationState] = []
    for i, raw in enumerate(f.states):
        try:
            state = OperationState(raw)
        except ValueError:
            raise InvalidArgument(f"filter.states[{i}]", f"unknown state {raw}") from None
        if state is OperationState.UNSPECIFIED:
            raise InvalidArgument(f"filter.states[{i}]", "UNSPECIFIED is not a state")
        states.append(state)
    return make_query(
        purgatory,
        key=f.key,
        prefix=f.operation_id_prefix,
        states=states,
        due_after_ms=f.due_after_ms,
        due_before_ms=f.due_before_ms,
        page_token=request.page_token,
        page_size=request.page_size,
    )


async def list_operations(
    service: Service, purgatory: NamedPurgatory, request: pb.ListOperationsRequest
) -> pb.ListOperationsResponse:
    """The ListOperationsResponse for ``request`` (loop thread; a handler of
    :func:`.answer.answer`)."""
    query = _query(purgatory.name, request, service.limits)
    statuses, token = list_page(query, purgatory.operations_view(), operation_status_with_progress)
    response = pb.ListOperationsResponse(next_page_token=token)
    response.operations.extend(statuses)
    return response
