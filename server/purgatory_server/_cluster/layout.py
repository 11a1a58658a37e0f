"""Where a replicated purgatory lives in JetStream: stream, subject, lease and meta keys.

docs/scale-out.md, "Layout in JetStream": purgatories share ``journal_streams`` streams
(one Raft group each) by subject, ``purgatory.j.<k>.<token>`` in stream ``PURGATORY_J<k>``
with ``k`` a stable hash of the name. A purgatory name may contain ``.``, which separates
subject tokens, so such a name is written as ``=`` + its hex (``=`` cannot start a name,
so no two names share a token). The same token keys the lease and meta buckets.

Pure functions; no I/O.
"""

from __future__ import annotations

import zlib

__all__ = [
    "LEASE_BUCKET",
    "MAX_MESSAGE_BYTES",
    "MEMBERS_BUCKET",
    "META_BUCKET",
    "SNAPSHOT_HEADER",
    "journal_stream",
    "journal_subject",
    "stream_subjects",
    "token",
]

LEASE_BUCKET = "purgatory-owners"
META_BUCKET = "purgatory-meta"
MEMBERS_BUCKET = "purgatory-members"
# Headers of a journal message (besides NATS's own).
EPOCH_HEADER = "Purgatory-Epoch"
EXPECTED_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
MSG_ID = "Nats-Msg-Id"
# Marks a snapshot's messages: "<phase> <id>" (_cluster/snapshot.py).
SNAPSHOT_HEADER = "Purgatory-Snapshot"
# JetStream's default max_payload is 1 MiB; leave room for headers.
MAX_MESSAGE_BYTES = 900 * 1024


def token(name: str) -> str:
    """``name`` as one subject token / KV key (names with ``.`` are hex-encoded)."""
    return name if "." not in name else "=" + name.encode("utf-8").hex()


def _shard(name: str, streams: int) -> int:
    return zlib.crc32(name.encode("utf-8")) % streams


def journal_stream(name: str, streams: int) -> str:
    return f"PURGATORY_J{_shard(name, streams)}"


def journal_subject(name: str, streams: int) -> str:
    return f"purgatory.j.{_shard(name, streams)}.{token(name)}"


def stream_subjects(index: int) -> list[str]:
    return [f"purgatory.j.{index}.*"]
