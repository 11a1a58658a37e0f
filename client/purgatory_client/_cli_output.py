"""How ``purgatory`` prints results: ``--output json`` (the default, for scripts) or
``--output table`` (for people).

json: one JSON object per line, keys sorted, times as the server's epoch milliseconds,
text as UTF-8 (not ``\\u`` escapes). table: a header line, then one row per result,
columns separated by two spaces and padded to the header's and first row's widths (rows
are printed as they come, so a stream such as ``subscribe`` shows each at once); epoch
times (``*_time_ms``, ``*_deadline_ms``) become ISO 8601 UTC (``-`` for 0, "not set"),
nested values compact JSON, and a new kind of result starts a new header.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["OUTPUTS", "Printer", "jsonable", "without"]

OUTPUTS = ("json", "table")
_EPOCH_SUFFIXES = ("_time_ms", "_deadline_ms")


def jsonable(value: Any, text: bool = False) -> Any:
    """JSON-ready ``value``; bytes are base64 (exact for any bytes), or with ``text`` UTF-8
    where invalid sequences become U+FFFD (readable, but lossy for binary data)."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") if text else base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), text) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, text) for v in value]
    return value


def without(value: Any, *names: str) -> dict[str, Any]:
    """A dataclass result's fields but ``names`` (e.g. ``created``, meaningless on get)."""
    return {
        f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.name not in names
    }


def iso_time(epoch_ms: int) -> str:
    """``2026-11-27T10:51:24.542Z``; ``-`` for 0 (the field is not set)."""
    if not epoch_ms:
        return "-"
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def _cell(name: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and name.endswith(_EPOCH_SUFFIXES):
        return iso_time(value)
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")) if value else "-"
    return str(value)


class Printer:
    """Prints each result in the chosen ``output`` (see the module docstring)."""

    def __init__(self, output: str = "json", text: bool = False) -> None:
        self.output = output
        self.text = text
        self._columns: tuple[str, ...] = ()
        self._widths: list[int] = []

    def __call__(self, value: Any) -> None:
        record = jsonable(value, self.text)
        if self.output == "table" and isinstance(record, dict):
            line = self._row(record)
        else:
            line = json.dumps(record, sort_keys=True, ensure_ascii=False)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _row(self, record: dict[str, Any]) -> str:
        columns = tuple(record)
        cells = [_cell(name, record[name]) for name in columns]
        header = ""
        if columns != self._columns:
            self._columns = columns
            self._widths = [max(len(n), len(c)) for n, c in zip(columns, cells, strict=True)]
            header = (
                self._join(
                    [n.removesuffix("_ms") if n.endswith(_EPOCH_SUFFIXES) else n for n in columns]
                )
                + "\n"
            )
        return header + self._join(cells)

    def _join(self, cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, self._widths, strict=True)).rstrip()
