"""Keep CPython's cyclic garbage collector out of the server's hot path.

The profile (docs/benchmarks.md, "Performance profile") puts the collector at about a
tenth of the server's CPU per watch -> signal -> outcome pair. Two reasons, two remedies:

- every full (oldest-generation) collection traverses the whole heap, and most of that
  heap is what start-up built and never frees (modules, protobuf descriptors, grpc's
  objects, recovered operations): :func:`settle_heap` moves it to the permanent
  generation once the server is up (``gc.freeze``), so collections no longer walk it.
  Objects frozen there are still freed by reference counting; only a cycle among them
  would never be collected, and start-up leaves none that matters;
- a pair allocates a few dozen container objects, so with CPython's default first
  threshold (700 allocations) the youngest generation is collected every few pairs, and
  every tenth of those collects the middle one. A threshold of :data:`YOUNG_THRESHOLD`
  collects as much garbage in far fewer, larger passes.

And one for memory: start-up (above all a journal's recovery) frees much of what it
allocated (parsed records, protobuf arenas, the start-up snapshot), but glibc's allocator
keeps freed heap pages mapped. :func:`settle_heap` hands them back (``malloc_trim``,
where the C library has it): about 100 bytes of RSS per recovered operation.

Process-wide settings, so only the server's entry point applies them (:func:`serve`),
never a library user or a test that runs a server in process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

__all__ = ["YOUNG_THRESHOLD", "release_free_heap", "settle_heap"]

YOUNG_THRESHOLD = 10_000


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
