"""How ``purgatory`` prints results: ``--output json`` (the default, for scripts) or
``--output table`` (for people).

json: one JSON object per line, keys sorted, times as the server's epoch milliseconds,
text as UTF-8 (not ``\\u`` escapes). table: a header line, then one row per result,
columns separated by two spaces and padded to the widest cell of each column: of every
row for a complete list (:meth:`Printer.all`: ``purgatories``, ``group list``...), of the
header and first row for a stream (rows are printed as they come, so ``subscribe`` shows
each at once); epoch
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
from collections.abc import Iterable, Mapping
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
            self._write(self._row(record))
        else:
            self._write(json.dumps(record, sort_keys=True, ensure_ascii=False))

    def all(self, values: Iterable[Any]) -> None:
        """Print a complete list of results; a table's columns fit every row's cells."""
        if self.output != "table":
            for value in values:
                self(value)
            return
        records = [jsonable(value, self.text) for value in values]
        widths: dict[tuple[str, ...], list[int]] = {}
        for record in records:
            if isinstance(record, dict):
                cells = [_cell(name, record[name]) for name in record]
                known = widths.setdefault(tuple(record), [0] * len(cells))
                known[:] = [max(w, len(c)) for w, c in zip(known, cells, strict=True)]
        self._columns = ()  # a complete list starts with its own header
        for record in records:
            if isinstance(record, dict):
                self._write(self._row(record, widths[tuple(record)]))
            else:
                self._write(json.dumps(record, sort_keys=True, ensure_ascii=False))

    @staticmethod
    def _write(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _row(self, record: dict[str, Any], widths: list[int] | None = None) -> str:
        """``record``'s row, after a header if its columns are new; the columns are as wide
        as ``widths`` (a complete list's widest cells) or, for a stream, its first row."""
        columns = tuple(record)
        cells = [_cell(name, record[name]) for name in columns]
        header = ""
        if columns != self._columns:
            self._columns = columns
            fit = widths if widths is not None else [len(c) for c in cells]
            self._widths = [max(len(n), w) for n, w in zip(columns, fit, strict=True)]
            header = (
                self._join(
                    [n.removesuffix("_ms") if n.endswith(_EPOCH_SUFFIXES) else n for n in columns]
                )
                + "\n"
            )
        return header + self._join(cells)

    def _join(self, cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, self._widths, strict=True)).rstrip()
