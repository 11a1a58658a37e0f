"""Incremental ingest: the segments already decoded into ``<out>/_records``, by fingerprint.

Each segment decoded is recorded by location with its size and the CRC-32 of its last
64 KiB. A sealed segment never changes until compaction deletes it; the journal's last
segment grows (or loses a torn tail when the server recovers), which changes its size or
its tail, so it is decoded again, replacing its rows. A segment whose fingerprint is
unchanged is not read again (one whose tail was rewritten to the same size and the same
CRC would be missed: a 1 in 2^32 chance per rewrite; ``--full`` rules it out).

After compaction: the deleted segments' rows stay in ``_records`` (they were journal
records when ingested), and the new segments' carried copies are not counted as events
(docs/journal.md §2), so the tables keep the history a full run over the compacted journal
could no longer see. ``ingest --full`` starts from nothing.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from purgatory_pipeline.outputs import read_text, write_text
from purgatory_pipeline.source import SegmentPartition, open_uri

__all__ = [
    "CHECKPOINT",
    "VERSION",
    "Entry",
    "Fingerprint",
    "fingerprint",
    "load",
    "save",
    "to_decode",
]

CHECKPOINT = "_segments.json"
TAIL_BYTES = 64 * 1024
# 2: the tables are partitioned by segment_key too (purgatory_pipeline.incremental); tables
# next to an older checkpoint (or none) are not built on.
VERSION = 2

Fingerprint = dict[str, int]
# A segment's entry: its fingerprint, plus ``records`` (rows in ``_records`` per kind,
# ``torn_tail`` included) and ``torn`` (``[byte_offset, bytes]`` of each torn tail), so a
# run's summary adds up the entries instead of scanning every record again.
Entry = dict[str, Any]


def fingerprint(uri: str) -> Fingerprint:
    """``{"size", "tail_crc32"}`` of one segment file (reads at most its last 64 KiB)."""
    filesystem, path = open_uri(uri)
    with filesystem.open_input_file(path) as handle:
        size = handle.size()
        handle.seek(max(size - TAIL_BYTES, 0))
        tail = handle.read()
    return {"size": int(size), "tail_crc32": zlib.crc32(tail)}


def load(spark: Any, out: str) -> dict[str, Entry] | None:
    """The segments recorded under ``out``; None when there is no checkpoint of this version."""
    text = read_text(spark, out, CHECKPOINT)
    if not text:
        return None
    body = json.loads(text)
    if body.get("version") != VERSION:
        return None
    segments: dict[str, Entry] = body["segments"]
    return segments


def save(spark: Any, out: str, segments: dict[str, Entry]) -> None:
    body = {"version": VERSION, "segments": dict(sorted(segments.items()))}
    write_text(spark, out, CHECKPOINT, json.dumps(body, indent=1) + "\n")


def to_decode(
    parts: list[SegmentPartition], done: dict[str, Entry]
) -> tuple[list[str], dict[str, Fingerprint]]:
    """The segment URIs to decode now (new or changed), and their fingerprints."""
    todo: list[str] = []
    marks: dict[str, Fingerprint] = {}
    for part in parts:
        mark = fingerprint(part.uri)
        known = done.get(part.uri, {})
        if any(known.get(name) != value for name, value in mark.items()):
            todo.append(part.uri)
            marks[part.uri] = mark
    return todo, marks
