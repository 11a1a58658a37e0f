"""The SparkSession every command uses: ``local[*]`` unless told otherwise, data sources registered.

Why one place: the settings that make results reproducible (UTC session time zone, so a
``date`` partition means the same day everywhere; dynamic partition overwrite, so decoding
a segment again replaces exactly its partition of ``_records``) must be the same for the
CLI, the tests and a ``spark-submit`` run. Under ``spark-submit`` the master and resources come
from its command line; ``master`` here only applies when none was configured.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

from purgatory_pipeline.source import register

__all__ = ["SESSION_CONF", "get_spark", "quiet_task_failures"]

SESSION_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The journal source applies kind/purgatory filters while decoding (pushFilters).
    "spark.sql.python.filterPushdown.enabled": "true",
    # A partitioned write whose rows are not sorted by the partition columns keeps a few
    # files open instead of sorting every row first: ingest's decode step writes each
    # segment's rows (one task, one partition value) into its own partition of _records,
    # and the sort cost as much as the write (measured: 37 s vs 20 s for 1M records). With
    # planned writes the planner would add that sort before the writer can choose.
    "spark.sql.maxConcurrentOutputFileWriters": "4",
    "spark.sql.optimizer.plannedWrite.enabled": "false",
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


# Loggers that print a failed task's whole Python traceback and Java stack (once per task
# attempt, then again when the job aborts). The same error reaches the driver as the job's
# exception, which the CLI reports in one line when it is one of ours and re-raises whole
# otherwise, so nothing is lost by silencing them on the console.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.storage.BlockManager",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Strategy",
    "org.apache.spark.util.Utils",  # "Aborting task" with the stack, when a write fails
    "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter",  # its cleanup, after that
)


def quiet_task_failures(spark: Any) -> None:
    """Keep task-failure stacks off the console (see ``TASK_FAILURE_LOGGERS``)."""
    jvm = spark.sparkContext._jvm
    off = jvm.org.apache.logging.log4j.Level.toLevel("OFF")
    for name in TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
