"""What an incremental ingest rewrites: the tables' segment layout and the merge rule.

Layout: every table is partitioned by ``purgatory``, ``date`` and ``segment_key`` (the
segment a row comes from: for ``signals`` and ``events`` the segment of its record, for
``operations`` the segment of the operation's first definition, or of its first outcome
when no definition survives). A journal only grows at its end, so newly decoded segments
change a known, small set of these partitions, and a re-run rewrites only those.

The merge rule, for the segments ``T`` decoded in this run:

- ``signals`` and ``events``: the partitions of ``T``, from ``T``'s records alone (one row
  per record).
- ``operations``: an operation's row depends on all its records (definition, deadline
  moves, outcome), which may lie in several segments. Its row changes only if ``T`` holds
  one of them; then its *home* partition is rewritten. ``R`` = ``T`` plus the homes (in
  the existing table) of every operation ``T`` touches; the rows homed in ``R`` are
  recomputed from the records of their purgatory from the first record of ``R`` on
  (records before an operation's home never change its row), and every other partition
  stays as it is. A recomputed row whose id the existing table already holds under a home
  outside ``R`` (an untouched operation whose first records lie before that bound) is
  left out: that row is unchanged.

The result equals a full run's rows over the same ``_records``
(tests/pipeline/test_incremental.py checks it at every step). Ordering: the checkpoint forgets
``R``'s segments *before* their partitions are deleted, so an ingest that fails part-way
decodes them again next time and rebuilds what it deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from purgatory_pipeline.tables import KEY, OPERATION_KINDS

__all__ = [
    "HOME",
    "IDENTITY",
    "MAX_BROADCAST_SEGMENTS",
    "SparkLookups",
    "drop_partitions",
    "drop_purgatories",
    "key_column",
    "rebuild_scope",
    "segment_key",
    "unchanged_elsewhere",
]

# In the operations table, the segment_key column is the operation's home.
HOME = KEY
IDENTITY = ("purgatory", "operation_id")
# Up to this many purgatories the scope is one filter Parquet can skip row groups with
# (``purgatory = p AND index >= lo``, OR-ed); above it, a join with the bounds.
MAX_PUSHED_BOUNDS = 64
# Up to this many segments, the operation ids they hold are broadcast to the lookups in
# the existing table (a hash table bounded by a few segments' ids, so the table is only
# scanned, not shuffled; pyarrow answers then where it can: .id_lookup); above it, Spark
# plans a shuffle join.
MAX_BROADCAST_SEGMENTS = 4


def segment_key(journal: str, uri: str) -> str:
    """The ``segment_key`` of one segment: what :func:`key_column` computes for its rows."""
    name = uri.rsplit("/", 1)[-1]
    return hashlib.sha256(f"{journal}|{name}".encode()).hexdigest()[:20]


def key_column() -> Column:
    # Stable across runs for the same file: the journal's location and the segment's name.
    return F.substring(F.sha2(F.concat_ws("|", "journal", "segment"), 256), 1, 20)


def _ids(records: DataFrame, keys: set[str]) -> DataFrame:
    """The operations with a record in the segments ``keys`` (broadcast when few)."""
    ids = (
        records.filter(F.col(KEY).isin(sorted(keys)) & F.col("kind").isin(*OPERATION_KINDS))
        .select(*IDENTITY)
        .distinct()
    )
    return F.broadcast(ids) if len(keys) <= MAX_BROADCAST_SEGMENTS else ids


class SparkLookups:
    """The merge's two lookups in the existing ``old_operations`` table, as Spark joins.

    :class:`purgatory_pipeline.id_lookup.IdLookup` asks pyarrow instead where it can; these
    answer everywhere else (a location only Hadoop opens, or ids from many segments).
    """

    def __init__(self, old_operations: DataFrame, records: DataFrame) -> None:
        self._old = old_operations
        self._records = records

    def homes(self, changed: set[str]) -> set[str]:
        """The segments the existing operations table homes the operations ``changed`` touch in."""
        touched = _ids(self._records, changed)
        homes = self._old.join(touched, list(IDENTITY), "left_semi").select(HOME).distinct()
        return {row[HOME] for row in homes.collect()}

    def elsewhere(self, rebuilt: set[str]) -> DataFrame:
        """Identities with a record in ``rebuilt`` that the existing table homes outside it."""
        outside = self._old.filter(~F.col(HOME).isin(sorted(rebuilt)))
        elsewhere = outside.join(_ids(self._records, rebuilt), list(IDENTITY), "left_semi")
        elsewhere = elsewhere.select(*IDENTITY)
        return F.broadcast(elsewhere) if len(rebuilt) <= MAX_BROADCAST_SEGMENTS else elsewhere


def rebuild_scope(records: DataFrame, rebuilt: Iterable[str]) -> DataFrame:
    """The records every row homed in ``rebuilt`` depends on (and some more).

    Per purgatory, the records from the lowest journal index found in a rebuilt segment
    on: an operation's home holds its earliest record that counts, and later ones follow
    it in the journal. With few purgatories the bound is a filter on ``index``, which
    Parquet's row-group statistics turn into skipped reads of the older segments.
    """
    keys = sorted(rebuilt)
    bounds = (
        records.filter(F.col(KEY).isin(keys) & F.col("purgatory").isNotNull())
        .groupBy("purgatory")
        .agg(F.min("index").alias("lo"))
        .collect()
    )
    if not bounds:
        return records.limit(0)
    if len(bounds) <= MAX_PUSHED_BOUNDS:
        clauses = [
            (F.col("purgatory") == row["purgatory"]) & (F.col("index") >= row["lo"])
            for row in bounds
        ]
        return records.filter(reduce(lambda a, b: a | b, clauses))
    table = records.sparkSession.createDataFrame(
        [(row["purgatory"], row["lo"]) for row in bounds], "purgatory STRING, lo BIGINT"
    )
    joined = records.join(F.broadcast(table), "purgatory")
    return joined.filter(F.col("index") >= F.col("lo")).drop("lo")


def unchanged_elsewhere(operations: DataFrame, elsewhere: DataFrame) -> DataFrame:
    """``operations`` less the ids the existing table keeps homed outside the rebuilt segments.

    ``elsewhere`` is the lookups' answer for the rebuilt segments: every row recomputed is
    homed in them, so its id has a record there, and only those ids are looked up; what
    the lookup finds is the few operations that straddle the scope's lower bound.
    """
    return operations.join(elsewhere, list(IDENTITY), "left_anti")


def drop_partitions(spark: Any, table: str, keys: Iterable[str]) -> int:
    """Delete ``table/*/*/segment_key=K`` for each K; returns how many directories went."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    dropped = 0
    for key in sorted(set(keys)):
        pattern = jvm.org.apache.hadoop.fs.Path(f"{table.rstrip('/')}/*/*/{KEY}={key}")
        filesystem = pattern.getFileSystem(conf)
        for status in filesystem.globStatus(pattern) or []:
            filesystem.delete(status.getPath(), True)
            dropped += 1
    return dropped


def drop_purgatories(spark: Any, table: str, purgatories: Iterable[str]) -> None:
    """Delete ``table/purgatory=P`` for each P (a full run replaces those purgatories)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    escape = jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.escapePathName
    for name in sorted(set(purgatories)):
        path = jvm.org.apache.hadoop.fs.Path(f"{table.rstrip('/')}/purgatory={escape(name)}")
        path.getFileSystem(conf).delete(path, True)
