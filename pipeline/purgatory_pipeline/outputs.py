"""Small files next to Spark's output (``report.html``, ``summary.json``, ``_ingest.json``).

Why through Hadoop's file system and not ``pathlib``: ``--out`` is whatever Spark writes
to (a relative path on the cluster's default file system, ``file://``, ``hdfs://``,
``s3a://``, ...). Spark resolves it with Hadoop's ``Path``; writing the side files the
same way puts them next to the Parquet, whatever the URI, and the location printed is the
one Spark used. Driver only: it goes through the session's JVM.
"""

from __future__ import annotations

from typing import Any

__all__ = ["exists", "location", "publish_file", "read_text", "write_text"]


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


def publish_file(spark: Any, staging: str, directory: str, name: str) -> str:
    """Move the one Parquet part file Spark wrote under ``staging`` to ``directory/name``.

    The replacement is one rename onto the old file, atomic on a local or POSIX file
    system: a reader sees the previous table or the new one, whole, never a directory
    holding only ``_temporary``. Where the file system's rename refuses to replace (HDFS,
    object stores), the old file is deleted first (a short window with no table).
    Hadoop's local file system keeps a ``.NAME.crc`` beside each file and renames it in a
    second step; both checksums are dropped first, so no reader pairs a file with the
    other one's checksum.
    """
    jvm = spark.sparkContext._jvm
    staged = jvm.org.apache.hadoop.fs.Path(staging)
    filesystem = staged.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    parts = [
        status.getPath()
        for status in filesystem.listStatus(staged)
        if status.getPath().getName().startswith("part-")
        and status.getPath().getName().endswith(".parquet")
    ]
    if len(parts) != 1:
        raise RuntimeError(f"{staging}: expected one Parquet part file, found {len(parts)}")
    _, target = _path(spark, directory, name)
    parent = target.getParent()
    filesystem.mkdirs(parent)
    for checksum in (
        jvm.org.apache.hadoop.fs.Path(parts[0].getParent(), "." + parts[0].getName() + ".crc"),
        jvm.org.apache.hadoop.fs.Path(parent, "." + name + ".crc"),
    ):
        filesystem.delete(checksum, False)
    if not filesystem.rename(parts[0], target):
        filesystem.delete(target, False)
        if not filesystem.rename(parts[0], target):
            raise RuntimeError(f"could not move {parts[0]} to {target}")
    filesystem.delete(staged, True)
    return location(spark, directory, name)


def read_text(spark: Any, directory: str, name: str) -> str | None:
    """The text of ``directory/name``, or None if it does not exist (small files only)."""
    filesystem, path = _path(spark, directory, name)
    if not filesystem.exists(path):
        return None
    stream = filesystem.open(path)
    try:
        data = stream.readAllBytes()
    finally:
        stream.close()
    return bytes(data).decode("utf-8")
