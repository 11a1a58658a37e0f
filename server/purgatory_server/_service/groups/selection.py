"""A worker group's delivery selection: priorities, ordering keys, a rate limit.

:class:`Selection` is the settings (fixed at the group's creation, like its lease and
attempts; docs/service.md "Priorities, ordering keys and rate limits"), checked and
spelled here both ways: the ``GroupSelection`` message of a join and of ListGroups, and
the same message's bytes in the journal's ``GroupState.selection``. A group without one
(``GroupConfig.selection`` None) pays nothing for it: :mod:`.group` keeps its plain
sequence-order path.
"""

from __future__ import annotations

from dataclasses import dataclass

from purgatory_proto.v1 import purgatory_pb2 as pb

from purgatory_server._service.groups.ordering import MAX_SEPARATOR_LENGTH, KeySource
from purgatory_server._service.groups.priority import (
    MAX_PRIORITY,
    MAX_PRIORITY_RULES,
    PriorityRule,
)
from purgatory_server._service.groups.rate_limit import MAX_RATE, MAX_RATE_WINDOW_MS, RateLimit
from purgatory_server._service.model.errors import InvalidArgument

__all__ = ["Selection", "selection_from_bytes", "selection_from_proto", "selection_to_proto"]


@dataclass(frozen=True, slots=True)
class Selection:
    """What a group delivers next; at least one part is set."""

    priorities: tuple[PriorityRule, ...] = ()
    ordering: KeySource | None = None
    rate_limit: RateLimit | None = None


def _key_source(field: str, msg: pb.GroupKeySource) -> KeySource:
    which = msg.WhichOneof("source")
    if which == "first_key":
        if not msg.first_key:
            raise InvalidArgument(f"{field}.first_key", "must be true when set")
        return KeySource()
    if which == "operation_id_separator":
        separator = msg.operation_id_separator
        if not separator or len(separator) > MAX_SEPARATOR_LENGTH:
            raise InvalidArgument(
                f"{field}.operation_id_separator", f"must be 1 to {MAX_SEPARATOR_LENGTH} characters"
            )
        return KeySource(separator)
    raise InvalidArgument(field, "set first_key or operation_id_separator")


def selection_from_proto(
    msg: pb.GroupSelection, max_length: int, field: str = "selection"
) -> Selection | None:
    """The checked settings (INVALID_ARGUMENT naming the field); None when empty.
    ``max_length``: the longest prefix or key a rule may name (the server's
    max_key_length)."""
    if len(msg.priorities) > MAX_PRIORITY_RULES:
        raise InvalidArgument(
            f"{field}.priorities", f"{len(msg.priorities)} rules; at most {MAX_PRIORITY_RULES}"
        )
    rules = []
    for i, rule in enumerate(msg.priorities):
        at = f"{field}.priorities[{i}]"
        if rule.priority > MAX_PRIORITY:
            raise InvalidArgument(f"{at}.priority", f"{rule.priority} is above {MAX_PRIORITY}")
        if not rule.operation_id_prefix and not rule.key:
            raise InvalidArgument(at, "set operation_id_prefix or key (or both)")
        for name, value in (("operation_id_prefix", rule.operation_id_prefix), ("key", rule.key)):
            if len(value) > max_length:
                raise InvalidArgument(f"{at}.{name}", f"longer than {max_length} characters")
        rules.append(PriorityRule(rule.operation_id_prefix, rule.key, rule.priority))
    ordering = None
    if msg.HasField("ordering_key"):
        ordering = _key_source(f"{field}.ordering_key", msg.ordering_key)
    rate = None
    if msg.HasField("rate_limit"):
        limit = msg.rate_limit
        at = f"{field}.rate_limit"
        if not 1 <= limit.max <= MAX_RATE:
            raise InvalidArgument(f"{at}.max", f"{limit.max} is outside [1, {MAX_RATE}]")
        if not 1 <= limit.window_ms <= MAX_RATE_WINDOW_MS:
            raise InvalidArgument(
                f"{at}.window_ms", f"{limit.window_ms} is outside [1, {MAX_RATE_WINDOW_MS}]"
            )
        per_key = None
        if limit.HasField("per_key"):
            per_key = _key_source(f"{at}.per_key", limit.per_key)
        rate = RateLimit(limit.max, limit.window_ms, per_key)
    if not rules and ordering is None and rate is None:
        return None
    return Selection(tuple(rules), ordering, rate)


def _key_source_to_proto(source: KeySource) -> pb.GroupKeySource:
    if source.separator:
        return pb.GroupKeySource(operation_id_separator=source.separator)
    return pb.GroupKeySource(first_key=True)


def selection_to_proto(selection: Selection) -> pb.GroupSelection:
    msg = pb.GroupSelection(
        priorities=[
            pb.GroupPriority(
                operation_id_prefix=r.operation_id_prefix, key=r.key, priority=r.priority
            )
            for r in selection.priorities
        ]
    )
    if selection.ordering is not None:
        msg.ordering_key.CopyFrom(_key_source_to_proto(selection.ordering))
    rate = selection.rate_limit
    if rate is not None:
        msg.rate_limit.max = rate.max
        msg.rate_limit.window_ms = rate.window_ms
        if rate.per_key is not None:
            msg.rate_limit.per_key.CopyFrom(_key_source_to_proto(rate.per_key))
    return msg


def selection_from_bytes(data: bytes) -> Selection | None:
    """The journal's ``GroupState.selection`` (written by this server: not re-checked
    against today's limits, so a recorded group keeps its settings)."""
    if not data:
        return None
    return selection_from_proto(pb.GroupSelection.FromString(data), max_length=1 << 30)
