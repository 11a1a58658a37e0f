"""The pipeline reads a worker group's ``group_retry`` records (a nack, or a lapsed
lease's backoff) into their columns (docs/pipeline.md)."""

from __future__ import annotations

from purgatory_pipeline.records import KIND_COLUMNS, KINDS, decode_record

from tests.groups.test_durable_retry import retried


def test_group_retry_records_fill_their_columns() -> None:
    assert "group_retry" in KINDS
    kind, values = decode_record(retried(4, 2, 9_000).SerializeToString())
    assert dict(zip(KIND_COLUMNS[kind], values, strict=True)) == {
        "purgatory": "p",
        "group_name": "g",
        "sequence": 4,
        "attempt": 2,
        "due_wall_ms": 9_000,
    }
