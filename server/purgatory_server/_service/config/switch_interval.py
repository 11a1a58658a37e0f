"""A shorter GIL switch interval for the server process (expiry lateness).

An expiry crosses threads on its way to the client: the reaper thread wakes when a bucket
is due, runs the expired tasks, and the event loop thread picks the ended operations up.
While the loop is busy with other requests it holds the GIL, and a thread that wakes
wanting the GIL waits until the holder is asked to drop it: after CPython's switch
interval, 5 ms by default. Each such wait lands in the expiry's lateness.
:data:`SWITCH_INTERVAL_S` bounds that wait to 1 ms; measured in docs/benchmarks.md
("Expiry lateness"), it shortens the reaper's wake-up under load without a visible cost
in throughput.

Process-wide, so only the server's entry point applies it (``app.serve``), never a library
user or a test that runs a server in process.
"""

from __future__ import annotations

import sys

__all__ = ["SWITCH_INTERVAL_S", "shorten_switch_interval"]

SWITCH_INTERVAL_S = 0.001


def shorten_switch_interval() -> None:
    """Lower the interpreter's switch interval to :data:`SWITCH_INTERVAL_S` (never raise it)."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
