"""Incremental ingest: the sealed segments already decoded into ``<out>/_records``.

Why only sealed segments: a journal's last segment is still being appended to (and may end
in a torn tail that a later run sees completed), so it is decoded on every run; a sealed
segment never changes until compaction deletes it. Each one is recorded by location with
its size and the CRC-32 of its last 64 KiB (the frames end there, so a rewritten file of the
same size would almost surely differ); a segment whose fingerprint changed is decoded again.

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

__all__ = ["CHECKPOINT", "Fingerprint", "fingerprint", "load", "save", "to_decode"]

CHECKPOINT = "_segments.json"
TAIL_BYTES = 64 * 1024

Fingerprint = dict[str, int]


def fingerprint(uri: str) -> Fingerprint:
    """``{"size", "tail_crc32"}`` of one segment file (reads at most its last 64 KiB)."""
    filesystem, path = open_uri(uri)
    with filesystem.open_input_file(path) as handle:
        size = handle.size()
        handle.seek(max(size - TAIL_BYTES, 0))
        tail = handle.read()
    return {"size": int(size), "tail_crc32": zlib.crc32(tail)}


def load(spark: Any, out: str) -> dict[str, Fingerprint]:
    text = read_text(spark, out, CHECKPOINT)
    if not text:
        return {}
    segments: dict[str, Fingerprint] = json.loads(text)["segments"]
    return segments


def save(spark: Any, out: str, segments: dict[str, Fingerprint]) -> None:
    body = {"version": 1, "segments": dict(sorted(segments.items()))}
    write_text(spark, out, CHECKPOINT, json.dumps(body, indent=1) + "\n")


def to_decode(
    parts: list[SegmentPartition], done: dict[str, Fingerprint]
) -> tuple[list[str], dict[str, Fingerprint]]:
    """The segment URIs to decode now, and the sealed ones' fingerprints to record after."""
    todo: list[str] = []
    sealed: dict[str, Fingerprint] = {}
    for part in parts:
        if part.is_last:
            todo.append(part.uri)
            continue
        mark = fingerprint(part.uri)
        sealed[part.uri] = mark
        if done.get(part.uri) != mark:
            todo.append(part.uri)
    return todo, sealed
