"""The SparkSession every command uses: ``local[*]`` unless told otherwise, data sources registered.

Why one place: the settings that make results reproducible (UTC session time zone, so a
``date`` partition means the same day everywhere; dynamic partition overwrite, so
re-ingesting replaces exactly the partitions it produces) must be the same for the CLI,
the tests and a ``spark-submit`` run. Under ``spark-submit`` the master and resources come
from its command line; ``master`` here only applies when none was configured.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from purgatory_pipeline.source import register

__all__ = ["SESSION_CONF", "get_spark"]

SESSION_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # A Python worker (data source planning, the streaming source) imports pyarrow, protobuf
    # and grpc before it connects back; 15 s (the default) is too short on a loaded host.
    "spark.python.authenticate.socketTimeout": "120s",
}


def get_spark(master: str | None = None, app_name: str = "purgatory-pipeline", **conf: str) -> Any:
    """A SparkSession (the active one if there is one), with the purgatory data sources."""
    # Workers must run this interpreter (it has the package and its dependencies); a
    # cluster's workers are configured by spark-submit (docs/pipeline.md).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: local by default
        builder = builder.master("local[*]")
    for key, value in {**SESSION_CONF, **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
