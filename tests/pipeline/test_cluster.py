"""A real standalone Spark cluster on loopback: spark-submit of ingest == local mode's tables.

A master and one worker are started from the pyspark distribution (``spark-class``) on
127.0.0.1, the ingest job is submitted with the package shipped as a zip
(``--py-files``), and everything is stopped at the end. Bounded in time throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.conftest import Workload
from tests.pipeline.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # No REST submission server: it takes the fixed port 6066, shared by parallel runs.
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    return env


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _alive_workers(ui_port: int) -> int:
    """Workers the master counts alive; 0 until its UI answers with JSON (a UI that has
    bound its port may serve its HTML page at /json/ for a moment before that)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: a Spark cluster needs a JVM")
    env = _env(tmp_path)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master = _start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        tmp_path / "master.log",
        env,
    )
    url = f"spark://127.0.0.1:{port}"
    worker = _start(
        [
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "1g",
            "--webui-port",
            str(worker_ui),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        tmp_path / "worker.log",
        env,
    )
    try:
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline or master.poll() is not None:
                log = (tmp_path / "master.log").read_text()[-2000:]
                raise AssertionError(f"cluster did not come up in time:\n{log}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(worker)
        _stop(master)


def _rows(spark: Any, path: Path) -> list[tuple[str, ...]]:
    return sorted(tuple(map(str, row)) for row in spark.read.parquet(str(path)).collect())


def test_spark_submit_on_a_standalone_cluster_matches_local(
    spark: Any, work: Workload, cluster: str, tmp_path: Path
) -> None:
    from purgatory_pipeline.package import build_zip

    bundle = build_zip(tmp_path / "purgatory_pipeline.zip")
    out = tmp_path / "cluster-tables"
    args = [
        str(_spark_home() / "bin" / "spark-submit"),
        "--master",
        cluster,
        "--conf",
        "spark.cores.max=2",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--py-files",
        str(bundle),
        str(ROOT / "pipeline" / "submit.py"),
        "ingest",
        "--journal",
        str(work.data_dir),
        "--out",
        str(out),
    ]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=400, env=_env(tmp_path), check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"torn_tails": 1' in result.stdout
    for table in ("operations", "signals", "events"):
        assert _rows(spark, out / table) == _rows(spark, work.tables / table), table
