"""Spark analytics for Purgatory: the journal as a data source, Parquet tables, reports, live.

- ``spark.read.format("purgatory-journal").load(PATH)``: journal records
  (:mod:`purgatory_pipeline.source`).
- ``spark.readStream.format("purgatory-journal").load(PATH)``: the journal as a stream, new
  segments and the growing head (:mod:`purgatory_pipeline.journal_stream`);
  ``ingest --follow`` keeps the tables up to date from it (:mod:`purgatory_pipeline.follow`).
- ``spark.readStream.format("purgatory-subscribe")``: live outcomes over ``Subscribe``
  (:mod:`purgatory_pipeline.live`).
- ``purgatory-pipeline ingest | report | watch`` (:mod:`purgatory_pipeline.cli`);
  ``ingest --catalog`` registers the tables in Spark's catalog
  (:mod:`purgatory_pipeline.catalog`).

Importing this package does not import Spark; :func:`get_spark` does.
"""

from __future__ import annotations

from typing import Any

from purgatory_pipeline.errors import (
    JournalCorruptionError,
    JournalFormatError,
    NewerFormatError,
    NotAJournalError,
    PipelineError,
    StreamError,
    StreamResetError,
    TablesNotFoundError,
    UnsupportedLocationError,
)

__all__ = [
    "JournalCorruptionError",
    "JournalFormatError",
    "NewerFormatError",
    "NotAJournalError",
    "PipelineError",
    "StreamError",
    "StreamResetError",
    "TablesNotFoundError",
    "UnsupportedLocationError",
    "get_spark",
]


def get_spark(master: str | None = None, **conf: str) -> Any:
    """A SparkSession with the purgatory data sources registered (local[*] by default)."""
    from purgatory_pipeline.session import get_spark as _get  # noqa: PLC0415 - starts a JVM

    return _get(master, **conf)
