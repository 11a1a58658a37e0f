"""``ingest --catalog DATABASE``: the tables registered in Spark's catalog, as external tables.

After an ingest, ``DATABASE.operations``, ``DATABASE.signals`` and ``DATABASE.events``
name the Parquet directories ``ingest`` wrote (``spark.table("purgatory.operations")``, or
SQL), with their schemas and their ``purgatory``/``date``/``segment_key`` partitions, so a
reader passes neither a path nor a schema. External: dropping a table leaves its files.
Registering again (each ingest does) replaces the definitions and finds the partitions
the run added or removed (``RECOVER PARTITIONS``).

Which catalog: the session's. The CLI's ``--catalog`` starts a session with Spark's Hive
catalog on a local Derby metastore under ``TABLES/_metastore`` (unless ``--conf
spark.sql.catalogImplementation=...`` says otherwise; for tables at a URI, under the
working directory), so the registration outlives the
command; a session of your own (a notebook, ``spark-submit`` with a shared metastore)
registers where it is configured to.
"""

from __future__ import annotations

import os
from typing import Any

from purgatory_pipeline.ingest import PARTITION_COLUMNS, TABLES
from purgatory_pipeline.outputs import location
from purgatory_pipeline.tables import table_schemas

__all__ = ["metastore_conf", "register_tables"]


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def register_tables(spark: Any, tables: str, database: str) -> list[str]:
    """(Re)register the three tables under ``tables`` in ``database``; their qualified names."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {_quote(database)}")
    schemas = table_schemas(spark)
    names = []
    for name in TABLES:
        qualified = f"{_quote(database)}.{_quote(name)}"
        columns = ", ".join(
            f"{_quote(field.name)} {field.dataType.simpleString()}" for field in schemas[name]
        )
        path = location(spark, tables, name).replace("\\", "\\\\").replace("'", "\\'")
        partitions = ", ".join(_quote(column) for column in PARTITION_COLUMNS)
        spark.sql(f"DROP TABLE IF EXISTS {qualified}")
        spark.sql(
            f"CREATE TABLE {qualified} ({columns}) USING parquet "
            f"PARTITIONED BY ({partitions}) LOCATION '{path}'"
        )
        spark.sql(f"ALTER TABLE {qualified} RECOVER PARTITIONS")
        names.append(f"{database}.{name}")
    return names


def metastore_conf(tables: str) -> dict[str, str]:
    """Session settings for Spark's Hive catalog on a Derby metastore in ``tables/_metastore``."""
    root = tables.rstrip("/") if "://" not in tables else "."
    root = os.path.abspath(root)  # Derby's and the warehouse's: local paths
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": f"{root}/_warehouse",
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={root}/_metastore;create=true"
        ),
    }
