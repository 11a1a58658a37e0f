"""Pipeline test fixtures: ONE SparkSession (local[2]) for the whole run, one workload journal.

Spark is started once per test session (a JVM start costs seconds on this machine); the
journal of the known workload (tests/pipeline/workload.py) is produced once by the real
server, ingested once and reported once, and the tests check different facts of it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the pipeline extra (pyspark) is not installed")

from purgatory_proto.v1.journal_pb2 import JournalRecord
from purgatory_server._journal.recovery import recover

from tests.pipeline import workload

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.python.worker.reuse": "true",
}


# Spark's first job in a session pays the JVM start and the Python workers' imports, and the
# session fixtures below (a real server workload, an ingest) are charged to the first test
# that uses them: on a loaded 2-core machine that exceeds the suite's 120 s default.
PIPELINE_TIMEOUT_S = 900
_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.timeout(PIPELINE_TIMEOUT_S))


def _java() -> bool:
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if not _java():
        pytest.skip("Java is not installed: Spark needs a JVM")
    from purgatory_pipeline.session import get_spark

    session = get_spark("local[2]", **SPARK_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@dataclass
class Oracle:
    """The journal as the server's own recovery code reads it (independent of the pipeline)."""

    records: list[tuple[int, JournalRecord]] = field(default_factory=list)
    truncated_bytes: int = 0


@dataclass
class Workload:
    data_dir: Path
    journal_dir: Path
    oracle: Oracle
    tables: Path
    ingest_summary: Any
    report_dir: Path | None = None
    report: dict[str, Any] | None = None


def read_oracle(journal_dir: Path, scratch: Path) -> Oracle:
    """Recovery (which truncates a torn tail) on a copy, so the original stays torn."""
    copy = scratch / "oracle-journal"
    shutil.copytree(journal_dir, copy)
    oracle = Oracle()
    report = recover(copy, lambda index, record: oracle.records.append((index, record)))
    oracle.truncated_bytes = report.truncated_bytes
    return oracle


@pytest.fixture(scope="session")
def work(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Workload:
    from purgatory_pipeline.ingest import ingest

    root = tmp_path_factory.mktemp("pipeline")
    data_dir = root / "data"
    workload.produce(data_dir)
    journal_dir = data_dir / workload.NAME / "journal"
    workload.tear_tail(journal_dir)
    oracle = read_oracle(journal_dir, root)
    tables = root / "tables"
    summary = ingest(spark, [str(data_dir)], str(tables))
    return Workload(data_dir, journal_dir, oracle, tables, summary)


@pytest.fixture(scope="session")
def reported(spark: Any, work: Workload) -> Workload:
    from purgatory_pipeline.report import report

    if work.report is None:
        work.report_dir = work.tables.parent / "report"
        work.report = report(spark, str(work.tables), str(work.report_dir))
    return work
