"""Recovered worker groups decoded for the service (start-up of a durable purgatory).

A module of its own because it needs the journal codec, which needs the service's
converters, which need the purgatory, which holds the groups: only the durable store
imports it, after all of those exist.
"""

from __future__ import annotations

from collections.abc import Mapping

from purgatory_server._journal import RecoveredGroup
from purgatory_server._service.durable.codec import decode_outcome
from purgatory_server._service.groups.entry import GroupEntry
from purgatory_server._service.groups.group_config import GroupConfig
from purgatory_server._service.groups.records import RestoredGroup, backoff_from_state
from purgatory_server._service.groups.selection import selection_from_bytes

__all__ = ["decode_groups"]


def decode_groups(groups: Mapping[str, RecoveredGroup]) -> dict[str, RestoredGroup]:
    """The journal's recovered groups with their outcomes decoded (start-up)."""
    out: dict[str, RestoredGroup] = {}
    for name, group in groups.items():
        state = group.state
        entries = []
        for e in group.entries:
            entry = GroupEntry(decode_outcome(e.outcome)[1], e.attempts, e.dead, e.redriven_at)
            entry.lease_deadline_ms = e.lease_deadline_wall_ms
            entry.retry_at_ms = e.retry_at_wall_ms
            entries.append(entry)
        out[name] = RestoredGroup(
            GroupConfig(
                state.visibility_timeout_ms,
                state.max_attempts,
                selection=selection_from_bytes(state.selection),
                backoff=backoff_from_state(state),
            ),
            group.last_sequence,
            entries,
            [(w.key, list(w.delivered_wall_ms)) for w in group.rate_windows],
        )
    return out
