"""The server process's settings for the collector and the GIL, applied once at start.

Process-wide, so only the server's entry point applies them (``app.serve``), never a
library user or a test that runs a server in process.

**The collector.** The profile (docs/benchmarks.md, "Performance profile") puts CPython's
cyclic garbage collector at about a tenth of the server's CPU per watch -> signal ->
outcome pair. Two reasons, two remedies:

- every full (oldest-generation) collection traverses the whole heap, and most of that
  heap is what start-up built and never frees (modules, protobuf descriptors, grpc's
  objects, recovered operations): :func:`settle_heap` moves it to the permanent
  generation once the server is up (``gc.freeze``), so collections no longer walk it.
  Objects frozen there are still freed by reference counting; only a cycle among them
  would never be collected, and start-up leaves none that matters;
- the youngest generation is collected when the container objects allocated since the
  last pass, net of those freed, pass the first threshold (CPython's default: 700). A
  pair allocates a few dozen and a batch holds many pairs' alive at once, so at 700 the
  young generation is collected every few pairs, and every tenth of those passes
  collects the middle one. A threshold of :data:`YOUNG_THRESHOLD` collects as much
  garbage in fewer, larger passes.

  Larger is not better without end: because the count is net of frees, a pass comes when
  that many new containers are still alive (pending operations, their entries, retained
  outcomes), and it walks every one of them while holding the GIL, so the reaper thread
  and the loop's next turn wait through it. The threshold trades the collector's total
  time for shorter pauses (docs/benchmarks.md, "The young generation's threshold").

And one for memory: start-up (above all a journal's recovery) frees much of what it
allocated (parsed records, protobuf arenas, the start-up snapshot), but glibc's allocator
keeps freed heap pages mapped. :func:`settle_heap` hands them back (``malloc_trim``,
where the C library has it): about 100 bytes of RSS per recovered operation.

**The GIL switch interval.** An expiry crosses threads on its way to the client: the
reaper thread wakes when a bucket is due, runs the expired tasks, and the event loop
thread picks the ended operations up. While the loop is busy with other requests it holds
the GIL, and a thread that wakes wanting the GIL waits until the holder is asked to drop
it: after CPython's switch interval, 5 ms by default. Each such wait lands in the
expiry's lateness. :data:`SWITCH_INTERVAL_S` bounds that wait to 1 ms; measured in
docs/benchmarks.md ("Expiry lateness"), it shortens the reaper's wake-up under load
without a visible cost in throughput.
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
