"""The server process's settings for the collector and the GIL, applied once at start.

Process-wide, so only the server's entry point applies them (``app.serve``), never a
library user or a test that runs a server in process.

**The collector** (docs/benchmarks.md):

- :func:`settle_heap` moves what start-up built and never frees to the permanent
  generation (``gc.freeze``), so full collections no longer walk it. Frozen objects are
  still freed by reference counting; only a cycle among them is never collected;
- :data:`YOUNG_THRESHOLD` collects the young generation in fewer, larger passes. Each
  pass walks the new containers still alive while holding the GIL, so the threshold
  trades the collector's total time against pause length.

:func:`settle_heap` also hands the heap pages start-up freed back to the system
(``malloc_trim``, where the C library has it).

**The GIL switch interval.** An expiry crosses from the reaper thread to the loop thread;
a thread that wakes wanting the GIL waits up to the switch interval, and that wait lands
in the expiry's lateness. :data:`SWITCH_INTERVAL_S` shortens it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

__all__ = [
    "SWITCH_INTERVAL_S",
    "YOUNG_THRESHOLD",
    "release_free_heap",
    "settle_heap",
    "shorten_switch_interval",
]

YOUNG_THRESHOLD = 2_000
SWITCH_INTERVAL_S = 0.001


def settle_heap() -> None:
    """Freeze what start-up built and raise the young generation's threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    release_free_heap()


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim(0)``); False
    where the C library has no such call (musl, macOS): nothing to do there."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True


def shorten_switch_interval() -> None:
    """Lower the interpreter's switch interval to :data:`SWITCH_INTERVAL_S` (never raise it)."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
