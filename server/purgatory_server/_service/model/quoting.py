"""Bounded quoting of caller-supplied values in error messages.

A status message travels in HTTP/2 trailers, and gRPC clients refuse trailers past a
hard size limit (and report RESOURCE_EXHAUSTED instead of the real error). Every value
a caller sent that an error message repeats therefore goes through :func:`quote`,
which keeps at most :data:`MAX_QUOTED` characters and says how long the value was.
"""

from __future__ import annotations

__all__ = ["MAX_QUOTED", "quote"]

MAX_QUOTED = 100


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` cut to about ``limit`` characters (strings and bytes)."""
    if isinstance(value, str | bytes) and len(value) > limit:
        head = value[: limit - 20]
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{head!r}... ({len(value)} {unit})"
    text = repr(value)
    if len(text) > limit:
        return text[: limit - 3] + "..."
    return text
