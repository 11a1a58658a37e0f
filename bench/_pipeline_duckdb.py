"""The DuckDB baseline of ``bench.pipeline_bench``: the pipeline's three tables, one process.

What a user would run instead of Spark on one machine: the pipeline's plain decoder
(``purgatory_pipeline.records.decode_segment``) writes each segment's records to Parquet
(as ``ingest`` writes ``_records``: one directory per segment, ``segment_key=K``), then
DuckDB builds ``signals``, ``events`` and ``operations`` with the same rules as
``purgatory_pipeline.tables`` (first definition, a registration before a carried copy;
first outcome; the deadline stated last while pending) and writes them as Parquet
partitioned by ``purgatory``, ``date`` and ``segment_key``. The decoding is one Python
thread; DuckDB uses its default threads (every core).

``python -m bench._pipeline_duckdb JOURNAL_DIR OUT_DIR`` prints one JSON line:
``{"records", "decode_s", "tables_s", "rows": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

_DEFINITION = (
    "keys",
    "condition_kind",
    "condition_target",
    "distinct_sources",
    "timeout_ms",
    "created_wall_ms",
    "due_wall_ms",
)
_EVENT = (
    "sequence",
    "operation_id",
    "state",
    "keys",
    "condition_kind",
    "condition_target",
    "timeout_ms",
    "created_wall_ms",
    "due_wall_ms",
    "completed_wall_ms",
    "lateness_ms",
    "signal_count",
    "sources",
    "amount_sum",
)
# A carried copy ranks after every registration (min over rank * 2^62 + index).
_CARRIED_RANK = 1 << 62


def _struct(columns: tuple[str, ...]) -> str:
    return "{" + ", ".join(f"'{c}': {c}" for c in columns) + "}"


def _sql(records: str) -> dict[str, str]:
    """The SELECT of each table over the records' Parquet files."""
    source = f"read_parquet('{records}/*/*.parquet', hive_partitioning = true)"
    date = "CAST(epoch_ms({}) AS DATE)"
    signals = (
        "SELECT purgatory, index, key, amount, value, source, applied_wall_ms, "
        f"{date.format('applied_wall_ms')} AS date, segment_key FROM {source} "
        "WHERE kind = 'signal'"
    )
    events = (
        f"SELECT purgatory, index, {', '.join(_EVENT)}, "
        f"{date.format('completed_wall_ms')} AS date, segment_key FROM {source} "
        "WHERE kind = 'outcome'"
    )
    definition = _struct(("index", "kind", *_DEFINITION, "segment_key"))
    outcome = _struct((*_EVENT, "index", "segment_key"))
    operations = f"""
WITH r AS (
  SELECT * FROM {source}
  WHERE kind IN ('registered', 'carried_operation', 'rescheduled', 'outcome')
), g AS (
  SELECT purgatory, operation_id,
    arg_min({definition}, CASE kind WHEN 'registered' THEN index
      WHEN 'carried_operation' THEN index + {_CARRIED_RANK} END) AS d,
    arg_min({outcome}, CASE WHEN kind = 'outcome' THEN index END) AS o
  FROM r GROUP BY purgatory, operation_id
), found AS (SELECT * FROM g WHERE d IS NOT NULL OR o IS NOT NULL),
moves AS (
  SELECT f.purgatory, f.operation_id, arg_max(r.due_wall_ms, r.index) AS due,
    count(*) FILTER (WHERE r.kind = 'rescheduled') AS moved
  FROM r JOIN found f USING (purgatory, operation_id)
  WHERE r.kind <> 'outcome' AND r.index >= f.d.index
    AND (f.o.index IS NULL OR r.index < f.o.index)
  GROUP BY f.purgatory, f.operation_id
)
SELECT f.purgatory, f.operation_id,
  coalesce(d.keys, o.keys) AS keys,
  coalesce(d.condition_kind, o.condition_kind) AS condition_kind,
  coalesce(d.condition_target, o.condition_target) AS condition_target,
  d.distinct_sources AS distinct_sources,
  coalesce(d.timeout_ms, o.timeout_ms) AS timeout_ms,
  coalesce(d.created_wall_ms, o.created_wall_ms) AS created_wall_ms,
  coalesce(m.due, o.due_wall_ms) AS due_wall_ms,
  coalesce(d.due_wall_ms, o.due_wall_ms) AS registered_due_wall_ms,
  coalesce(m.moved, 0) AS rescheduled,
  o.completed_wall_ms AS ended_wall_ms,
  coalesce(o.state, 'WATCHING') AS state,
  o.completed_wall_ms - coalesce(d.created_wall_ms, o.created_wall_ms) AS wait_ms,
  CASE WHEN o.state = 'EXPIRED' THEN o.lateness_ms END AS lateness_ms,
  o.signal_count AS signal_count, o.sources AS sources, o.sequence AS sequence,
  d.index AS registered_index, d.kind AS registered_from, o.index AS outcome_index,
  {date.format("coalesce(d.created_wall_ms, o.created_wall_ms)")} AS date,
  coalesce(d.segment_key, o.segment_key) AS segment_key
FROM found f LEFT JOIN moves m USING (purgatory, operation_id)
"""
    return {"signals": signals, "events": events, "operations": operations}


def main() -> None:
    parser = argparse.ArgumentParser(description="The DuckDB baseline of bench.pipeline_bench.")
    parser.add_argument("journal", type=Path, help="a journal directory (*.seg)")
    parser.add_argument("out", type=Path, help="where the tables go (replaced)")
    args = parser.parse_args()
    # Imported here: --help answers without the pipeline's and the dev extra's packages.
    import duckdb
    import pyarrow.parquet as pq
    from purgatory_pipeline.incremental import segment_key
    from purgatory_pipeline.records import decode_segment

    journal, out = args.journal, args.out
    shutil.rmtree(out, ignore_errors=True)
    records = out / "_records"
    start = time.perf_counter()
    segments = sorted(journal.glob("*.seg"))
    total = 0
    for i, path in enumerate(segments):
        directory = records / f"segment_key={segment_key(str(journal), str(path))}"
        directory.mkdir(parents=True)
        writer = None
        for batch in decode_segment(
            str(journal), str(path), path.read_bytes(), is_last=i == len(segments) - 1
        ):
            if writer is None:
                writer = pq.ParquetWriter(directory / "part-0.parquet", batch.schema)
            writer.write_batch(batch)
            total += batch.num_rows
        if writer is not None:
            writer.close()
    decoded = time.perf_counter()
    connection = duckdb.connect()
    rows = {}
    for name, select in _sql(str(records)).items():
        connection.execute(
            f"COPY ({select}) TO '{out / name}' "
            "(FORMAT parquet, PARTITION_BY (purgatory, date, segment_key))"
        )
        rows[name] = connection.execute(
            f"SELECT count(*) FROM read_parquet('{out / name}/**/*.parquet')"
        ).fetchone()[0]
    built = time.perf_counter()
    summary = {
        "records": total,
        "decode_s": round(decoded - start, 2),
        "tables_s": round(built - decoded, 2),
        "rows": rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
