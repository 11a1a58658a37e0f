"""Small files next to Spark's output (``report.html``, ``summary.json``, ``_ingest.json``).

Why through Hadoop's file system and not ``pathlib``: ``--out`` is whatever Spark writes
to (a relative path on the cluster's default file system, ``file://``, ``hdfs://``,
``s3a://``, ...). Spark resolves it with Hadoop's ``Path``; writing the side files the
same way puts them next to the Parquet, whatever the URI, and the location printed is the
one Spark used. Driver only: it goes through the session's JVM.
"""

from __future__ import annotations

from typing import Any

__all__ = ["exists", "location", "write_text"]


def _path(spark: Any, directory: str, name: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(directory.rstrip("/") + "/" + name)
    filesystem = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return filesystem, path


def location(spark: Any, directory: str, name: str) -> str:
    """Where ``directory/name`` is, as Spark resolves it (a plain path for local files)."""
    filesystem, path = _path(spark, directory, name)
    qualified = str(filesystem.makeQualified(path).toString())
    return qualified.removeprefix("file:") if qualified.startswith("file:/") else qualified


def write_text(spark: Any, directory: str, name: str, text: str) -> str:
    """Write ``text`` (UTF-8) to ``directory/name``, replacing it; returns :func:`location`."""
    filesystem, path = _path(spark, directory, name)
    stream = filesystem.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    return location(spark, directory, name)


def exists(spark: Any, directory: str, name: str) -> bool:
    """Whether ``directory/name`` exists, as Spark resolves it."""
    filesystem, path = _path(spark, directory, name)
    return bool(filesystem.exists(path))
