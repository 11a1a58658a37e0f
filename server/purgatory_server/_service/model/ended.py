"""What an ended operation shows to the parts that publish, count and react to it.

The feed numbers and delivers it, the counters count it, a schedule re-arms after it:
none of them needs the core's operation class, only this view of it (read on the loop
thread once the operation has ended, when none of it changes any more).
"""

from __future__ import annotations

from typing import Protocol

from purgatory_server._service.model.conditions import ResultSnapshot
from purgatory_server._service.model.definitions import OperationDefinition
from purgatory_server._service.model.operation_state import OperationState

__all__ = ["Ended"]


class Ended(Protocol):
    @property
    def operation_id(self) -> str: ...

    @property
    def definition(self) -> OperationDefinition: ...

    @property
    def state(self) -> OperationState: ...

    @property
    def result(self) -> ResultSnapshot: ...

    @property
    def create_time_ms(self) -> int: ...

    @property
    def due_time_ms(self) -> int: ...

    @property
    def complete_time_ms(self) -> int: ...

    @property
    def traceparent(self) -> str: ...
