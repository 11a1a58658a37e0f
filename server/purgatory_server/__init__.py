"""Purgatory server: Kafka's delayed-operation purgatory, in-process and over gRPC.

The engine's public surface is re-exported here; the modules under ``_engine`` are
private and may change.
"""

from purgatory_server._engine.delayed_operation import DelayedOperation
from purgatory_server._engine.purgatory import DelayedOperationPurgatory
from purgatory_server._engine.system_timer import SystemTimer
from purgatory_server._engine.time import MockTime
from purgatory_server._engine.timer_task import TimerTask, TimerTaskEntry
from purgatory_server._engine.timer_task_list import TimerTaskList
from purgatory_server._engine.timing_wheel import TimingWheel
from purgatory_server._version import __version__ as __version__
from purgatory_server._version import version

__all__ = [
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "MockTime",
    "SystemTimer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "version",
]
