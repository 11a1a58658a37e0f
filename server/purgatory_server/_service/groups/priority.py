"""A worker group's priority rules: which ready outcome goes first.

An outcome's priority is that of the first rule it matches, 0 when it matches none;
higher priorities are delivered first, equal ones in sequence order (:mod:`.selector`).
A rule matches when each of its non-empty fields does: the operation id starts with
``operation_id_prefix``, and the operation watched ``key``. The rules are the group's,
fixed at its creation: an outcome's priority never changes while the group holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from purgatory_server._service.model.outcome import Outcome

__all__ = ["MAX_PRIORITY", "MAX_PRIORITY_RULES", "PriorityRule", "priority_of"]

MAX_PRIORITY = 1_000_000
MAX_PRIORITY_RULES = 64


@dataclass(frozen=True, slots=True)
class PriorityRule:
    """Outcomes matching every non-empty field get ``priority``."""

    operation_id_prefix: str
    key: str
    priority: int

    def matches(self, outcome: Outcome) -> bool:
        if self.operation_id_prefix and not outcome.operation_id.startswith(
            self.operation_id_prefix
        ):
            return False
        return not self.key or self.key in outcome.keys


def priority_of(rules: tuple[PriorityRule, ...], outcome: Outcome) -> int:
    """The first matching rule's priority; 0 when none matches (O(rules))."""
    for rule in rules:
        if rule.matches(outcome):
            return rule.priority
    return 0
