"""Server logging: lifecycle lines, rate-limited warnings, and the JSON line format.

Lifecycle events are one line each on the ``purgatory_server.service`` logger. The
per-request ones pass through a :class:`RateLimit` (at most ``per_second`` lines a second
per kind; the next line admitted says how many were suppressed).

Thread safety: a :class:`RateLimit` takes its own lock.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import TextIO

__all__ = [
    "LOG_FORMATS",
    "JsonFormatter",
    "RateLimit",
    "TracedTextFormatter",
    "configure_logging",
    "log_rejected",
    "log_subscriber_cut_off",
]

logger = logging.getLogger("purgatory_server.service")

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# ``trace_ids`` is " trace_id=... span_id=..." inside a traced call, "" outside one
# (:class:`TracedTextFormatter`): a line outside a call has no empty fields.
TEXT_FORMAT_TRACED = "%(asctime)s %(levelname)s %(name)s%(trace_ids)s: %(message)s"


class TracedTextFormatter(logging.Formatter):
    """The text format, with the call's trace and span ids where a trace filter set them."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT_TRACED)

    def formatMessage(self, record: logging.LogRecord) -> str:
        trace_id = getattr(record, "trace_id", "")
        span_id = getattr(record, "span_id", "")
        record.trace_ids = f" trace_id={trace_id} span_id={span_id}" if trace_id else ""
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message[, exc]."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Set by a trace filter (configure_logging's ``record_filter``) inside a traced call.
        for name in ("trace_id", "span_id"):
            value = getattr(record, name, "")
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(
    level: str,
    log_format: str = "text",
    record_filter: logging.Filter | None = None,
    stream: TextIO | None = None,
) -> None:
    """Install the root handler (stderr) in ``log_format``; replaces earlier handlers.

    ``record_filter`` (the trace filter, when tracing is on) sets ``trace_id``/``span_id``
    on each record, which both formats then show.
    """
    handler = logging.StreamHandler(stream)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    elif record_filter is not None:
        handler.setFormatter(TracedTextFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    if record_filter is not None:
        handler.addFilter(record_filter)
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


class RateLimit:
    """At most ``per_second`` lines a second; counts what it drops."""

    __slots__ = ("_clock", "_lock", "_per_second", "_sent", "_suppressed", "_window")

    def __init__(self, per_second: int = 10, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_second = per_second
        self._clock = clock
        self._lock = threading.Lock()
        self._window = -1
        self._sent = 0
        self._suppressed = 0

    def admit(self) -> int | None:
        """None to drop this line; else how many were dropped since the last admitted one."""
        with self._lock:
            window = int(self._clock())
            if window != self._window:
                self._window, self._sent = window, 0
            if self._sent >= self._per_second:
                self._suppressed += 1
                return None
            self._sent += 1
            dropped, self._suppressed = self._suppressed, 0
            return dropped


_REJECTED = RateLimit()
_CUT_OFF = RateLimit()


def _suffix(dropped: int) -> str:
    return f" ({dropped} similar lines suppressed)" if dropped else ""


def log_rejected(code: str, message: str) -> None:
    """A request answered with an error status (WARNING, rate-limited)."""
    if not logger.isEnabledFor(logging.WARNING):
        return
    dropped = _REJECTED.admit()
    if dropped is not None:
        logger.warning("request rejected: %s: %s%s", code, message[:200], _suffix(dropped))


def log_subscriber_cut_off(buffer: int, resume_after: int) -> None:
    """A Subscribe stream ended because it fell ``buffer`` events behind (rate-limited)."""
    dropped = _CUT_OFF.admit()
    if dropped is not None:
        logger.warning(
            "subscriber cut off: more than %d events behind; it may resume after sequence %d%s",
            buffer,
            resume_after,
            _suffix(dropped),
        )
