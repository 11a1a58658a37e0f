"""The incremental merge's two lookups of operation ids, with pyarrow in the driver where it can.

What the merge asks (:mod:`purgatory_pipeline.incremental`): which segments home the
operations the new segments touch, and which of the operations with a record in the rebuilt
segments the existing ``operations`` table keeps homed elsewhere. Spark answers each with
a join over the whole ``operations`` table, a job of its own paying a cold start (7.3 s of
a 42 s re-run at 10M records: docs/benchmarks.md §10.1f). pyarrow's Acero answers the same
in about half a second there: a hash table of the few segments' ids, the table's ids
streamed past it.

Used only where both hold:

- pyarrow's file systems reach ``<out>`` (as for the decoding tasks:
  :mod:`purgatory_pipeline.decode_job`);
- the ids come from at most :data:`~purgatory_pipeline.incremental.MAX_BROADCAST_SEGMENTS`
  segments, the bound under which Spark would broadcast them too, so the driver holds a
  few segments' ids and nothing that grows with the table.

Otherwise Spark's joins (:class:`~purgatory_pipeline.incremental.SparkLookups`) answer.
Both give the same answer: tests/pipeline/test_incremental.py runs every step both ways.

Thread contract: the driver's thread only.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.acero as ac
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.incremental import IDENTITY, MAX_BROADCAST_SEGMENTS, SparkLookups
from purgatory_pipeline.tables import KEY, OPERATION_KINDS

__all__ = ["ArrowTables", "IdLookup"]

_STRING: Final = pa.string()
# What the lookups read of each table: the identity, the segment (a partition directory
# in both) and, in _records, the kind. Declared rather than discovered, so that a
# segment key of digits stays a string and an empty table still has its columns.
_RECORDS: Final = pa.schema([(c, _STRING) for c in (*IDENTITY, "kind", KEY)])
_OPERATIONS: Final = pa.schema([(c, _STRING) for c in (*IDENTITY, "date", KEY)])
_RECORDS_DIRS: Final = ds.partitioning(pa.schema([(KEY, _STRING)]), flavor="hive")
_OPERATIONS_DIRS: Final = ds.partitioning(
    pa.schema([(c, _STRING) for c in ("purgatory", "date", KEY)]), flavor="hive"
)
_ELSEWHERE_DDL: Final = "purgatory STRING, operation_id STRING"


@dataclass(frozen=True)
class ArrowTables:
    """``<out>/_records`` and ``<out>/operations`` as pyarrow opens them."""

    filesystem: pafs.FileSystem
    records: str
    operations: str

    def _dataset(self, path: str, schema: pa.Schema, dirs: ds.Partitioning) -> ds.Dataset:
        return ds.dataset(
            path, schema=schema, format="parquet", filesystem=self.filesystem, partitioning=dirs
        )

    def _ids(self, keys: Set[str]) -> pa.Table:
        """(purgatory, operation_id), once each, of the operations with a record in ``keys``."""
        records = self._dataset(self.records, _RECORDS, _RECORDS_DIRS)
        wanted = pc.field(KEY).isin(sorted(keys)) & pc.field("kind").isin(OPERATION_KINDS)
        table = records.to_table(columns=list(IDENTITY), filter=wanted)
        return table.group_by(list(IDENTITY)).aggregate([])

    def _homed(self, ids: pa.Table, outside: Set[str] = frozenset()) -> pa.Table:
        """The existing rows (identity and home) of ``ids``, less those homed in ``outside``."""
        operations = self._dataset(self.operations, _OPERATIONS, _OPERATIONS_DIRS)
        columns = [*IDENTITY, KEY]
        steps = [
            ac.Declaration("scan", ac.ScanNodeOptions(operations, columns=columns)),
            ac.Declaration(
                "project", ac.ProjectNodeOptions([pc.field(c) for c in columns], columns)
            ),
        ]
        if outside:
            keep = ~pc.field(KEY).isin(sorted(outside))
            steps.append(ac.Declaration("filter", ac.FilterNodeOptions(keep)))
        join = ac.HashJoinNodeOptions("left semi", list(IDENTITY), list(IDENTITY))
        source = ac.Declaration("table_source", ac.TableSourceNodeOptions(ids))
        plan = ac.Declaration(
            "hashjoin", join, inputs=[ac.Declaration.from_sequence(steps), source]
        )
        return plan.to_table()

    def operation_rows(self) -> int:
        """Rows of the operations table, from the Parquet footers (no data is read)."""
        rows: int = self._dataset(self.operations, _OPERATIONS, _OPERATIONS_DIRS).count_rows()
        return rows

    def homes(self, changed: Set[str]) -> set[str]:
        hits = self._homed(self._ids(changed))
        return set(pc.unique(hits.column(KEY)).to_pylist())

    def elsewhere(self, rebuilt: Set[str]) -> pa.Table:
        return self._homed(self._ids(rebuilt), outside=rebuilt).select(list(IDENTITY))


class IdLookup:
    """The merge's lookups: pyarrow's when ``arrow`` is given and the keys are few, else Spark's."""

    def __init__(self, spark: Any, spark_lookups: SparkLookups, arrow: ArrowTables | None) -> None:
        self._spark = spark
        self._spark_lookups = spark_lookups
        self._arrow = arrow

    def _few(self, keys: set[str]) -> ArrowTables | None:
        return self._arrow if len(keys) <= MAX_BROADCAST_SEGMENTS else None

    def homes(self, changed: set[str]) -> set[str]:
        """The segments the existing operations table homes the operations ``changed`` touch in."""
        arrow = self._few(changed)
        if arrow is None:
            return self._spark_lookups.homes(changed)
        return arrow.homes(changed)

    def elsewhere(self, rebuilt: set[str]) -> DataFrame:
        """Identities with a record in ``rebuilt`` that the existing table homes outside it."""
        arrow = self._few(rebuilt)
        if arrow is None:
            return self._spark_lookups.elsewhere(rebuilt)
        table = arrow.elsewhere(rebuilt)
        frame: DataFrame = self._spark.createDataFrame(table, _ELSEWHERE_DDL)
        return F.broadcast(frame)
