"""A real scrape of ``--metrics-listen`` over HTTP, checked by promtool when installed,
and the Grafana dashboard's queries checked against the metric names it serves."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from purgatory_client import AsyncPurgatoryClient, NotFoundError, OperationSpec
from purgatory_server._service import PurgatorySettings, create_server

from tests.service.helpers import TEST_CONFIG, until

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana" / "purgatory-dashboard.json"
# Metric names as PromQL sees them: the families this server exports.
NAME = re.compile(r"\b(?:purgatory|rpc_server|process)_[a-z0-9_]+\b")
# Label lists and matchers, which name labels (purgatory_name), not metrics.
LABELS = re.compile(r"\b(?:by|without)\s*\([^)]*\)|\{[^}]*\}")


def http_get(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read().decode()


@pytest.fixture(scope="module")
def exposition(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One scrape after driving every kind of metric on a real server."""
    return asyncio.run(_drive_and_scrape(tmp_path_factory.mktemp("scrape-data")))


async def _drive_and_scrape(data_dir: Path) -> str:
    config = replace(
        TEST_CONFIG,
        data_dir=str(data_dir),
        metrics_listen="127.0.0.1:0",
        purgatories=(
            *TEST_CONFIG.purgatories,
            PurgatorySettings(name="journaled", durable=True, retained_events=50),
        ),
    )
    server, port = await create_server("127.0.0.1:0", config)
    try:
        assert server.telemetry is not None and server.telemetry.metrics_port > 0
        async with AsyncPurgatoryClient(f"127.0.0.1:{port}", timeout=10) as c:
            await _drive(c, server.registry.get("default").feed)
        url = f"http://127.0.0.1:{server.telemetry.metrics_port}/metrics"
        content_type, body = await asyncio.to_thread(http_get, url)
        assert content_type.startswith("text/plain")
        return body
    finally:
        await server.stop(0.5)
    raise AssertionError("unreachable")  # pragma: no cover


async def _drive(c: AsyncPurgatoryClient, feed: Any) -> None:
    stream = c.subscribe(after_sequence=0)
    # A worker group holding one leased outcome, a schedule, an open Session stream.
    members = await c.join_group("billing", visibility_timeout_ms=60_000)
    await c.upsert_schedule("beat", every_ms=3_600_000)
    await c.try_complete_else_watch(["g"], 60_000, operation_id="g")
    await c.check_and_complete("g")
    assert (await anext(members)).operation_id == "g"
    session = c.watch_many([OperationSpec(keys=["s"], timeout_ms=60_000, operation_id="s")])
    outcome = asyncio.ensure_future(anext(session))

    async def in_session() -> bool:  # the stream registers it when first read
        return feed.waiting("s") == 1

    await until(in_session)
    await c.check_and_complete("s")
    assert (await outcome).operation_id == "s"
    await c.try_complete_else_watch(["late"], 30, operation_id="late")
    ops = [OperationSpec(keys=[f"b{i}"], timeout_ms=60_000) for i in range(3)]
    await c.batch_try_complete_else_watch(ops)
    await c.batch_check_and_complete([f"b{i}" for i in range(3)])
    # Registered first, then long-polled by an idempotent re-send (no race with the signal).
    await c.try_complete_else_watch(["lp"], 60_000, operation_id="lp")
    poll = asyncio.ensure_future(c.wait(["lp"], 60_000, operation_id="lp"))

    async def parked() -> bool:  # a long-poll: it waits when the signal comes
        return feed.waiting("lp") == 1

    await until(parked)
    await c.check_and_complete("lp")
    await poll
    await c.try_complete_else_watch(["j"], 60_000, purgatory="journaled")
    await c.check_and_complete("j", purgatory="journaled")
    with pytest.raises(NotFoundError):
        await c.get_operation("missing")

    async def expired() -> bool:
        return (await c.get_operation("late")).is_final

    await until(expired)
    seen = [await anext(stream) for _ in range(7)]
    assert len(seen) == 7
    await stream.aclose()
    await members.aclose()


def samples(exposition: str) -> dict[str, float]:
    """Sample name -> the sum of its values over every label set."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def test_scrape_serves_every_metric(exposition: str) -> None:
    found = samples(exposition)
    expected_counts = {
        # late, 3 batched, lp, j, g, s and the schedule's armed occurrence.
        "purgatory_operations_registered_total": 1 + 3 + 1 + 1 + 1 + 1 + 1,
        "purgatory_signals_total": 1 + 1 + 3 + 1 + 1,  # one batch of 3 signals counts 3
        "purgatory_expiry_lateness_seconds_count": 1,
        "purgatory_longpoll_duration_seconds_count": 1,
        "purgatory_rpc_rejected_total": 1,
    }
    for name, count in expected_counts.items():
        assert found.get(name) == count, (name, found.get(name))
    for name in (
        "purgatory_expiry_early_total",
        "purgatory_operations_outcomes_total",
        "purgatory_operations_delayed",
        "purgatory_keys_watched",
        "purgatory_timer_size",
        "purgatory_subscribers",
        "purgatory_events_retained",
        "purgatory_journal_size_bytes",
        "purgatory_memory_held_bytes",
        "purgatory_memory_retained_bytes",
        "purgatory_memory_used_bytes",
        "purgatory_memory_limit_bytes",
        "purgatory_operation_wait_duration_seconds_bucket",
        "purgatory_subscriber_lag_count",
        "purgatory_journal_fsync_duration_seconds_count",
        "purgatory_journal_fsync_records_sum",
        "purgatory_batch_size_count",
        # Issue 25: what an operator looks for first.
        "process_memory_usage_bytes",
        "process_cpu_time_seconds_total",
        "process_open_file_descriptors",
        "process_threads",
        "purgatory_build_info",
        "purgatory_budget_used",
        "purgatory_budget_limit",
        "purgatory_sessions",
        "purgatory_session_buffered",
        "purgatory_session_cut_off_total",
        "purgatory_subscriber_buffered",
        "purgatory_subscriber_cut_off_total",
        "purgatory_group_ready",
        "purgatory_group_leased",
        "purgatory_group_dead_letters",
        "purgatory_group_members",
        "purgatory_schedules",
        "rpc_server_call_duration_seconds_count",
    ):
        assert name in found, name
    assert found["process_memory_usage_bytes"] > 10_000_000
    assert found["process_open_file_descriptors"] > 3 and found["process_threads"] > 1
    # Every outcome of "default" since the group joined: 7, one of them leased at least.
    assert found["purgatory_group_ready"] + found["purgatory_group_leased"] == 7
    assert found["purgatory_budget_used"] > 0 and found["purgatory_budget_limit"] > 0

    assert found["purgatory_journal_size_bytes"] > 0
    assert found["purgatory_memory_limit_bytes"] > 0  # summed over the pools
    assert found["purgatory_memory_retained_bytes"] > 0  # outcomes were retained
    assert found["purgatory_journal_fsync_duration_seconds_count"] >= 1
    # Bounded cardinality: no operation id or key ever appears as a label value.
    for secret in ('"late"', '"lp"', '"b0"', '"j"'):
        assert secret not in exposition


def test_scrape_labels_name_the_build_group_and_schedule_state(exposition: str) -> None:
    import purgatory_server

    labelled = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }
    [build] = [labels for name, labels in labelled if name == "purgatory_build_info"]
    assert dict(build)["version"] == purgatory_server.__version__
    assert dict(build)["engine"] in ("compiled", "python")
    schedules = {
        dict(labels)["state"]: value
        for (name, labels), value in labelled.items()
        if name == "purgatory_schedules" and dict(labels)["purgatory_name"] == "default"
    }
    assert schedules == {"defined": 1, "armed": 1}
    group = ("purgatory_group", "billing")
    assert any(n == "purgatory_group_dead_letters" and group in labels for n, labels in labelled)
    budget = {
        dict(labels)["resource"]
        for (name, labels), _ in labelled.items()
        if name == "purgatory_budget_used"
    }
    assert budget == {"pending", "payload_bytes"}


def test_promtool_accepts_the_exposition(exposition: str, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool not installed (Debian package 'prometheus'; `make test` installs it "
            "as root): exposition NOT checked by promtool"
        )
    result = subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result


def test_dashboard_queries_only_metrics_that_exist(exposition: str) -> None:
    served = set(samples(exposition))
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 10
    used: set[str] = set()
    for expr in exprs:
        names = set(NAME.findall(LABELS.sub(" ", expr)))
        assert names, f"no purgatory metric in {expr!r}"
        used |= names
    missing = sorted(used - served)
    assert not missing, f"dashboard uses metrics the server does not serve: {missing}"
    # And the dashboard covers every family served (nothing exported goes unshown).
    families = {
        n.removesuffix(s) for n in served for s in ("_bucket", "_count", "_sum") if n.endswith(s)
    }
    families |= {n for n in served if NAME.fullmatch(n)} - {
        n for n in served if n.endswith(("_bucket", "_count", "_sum"))
    }
    shown = {u.removesuffix(s) for u in used for s in ("_bucket", "_count", "_sum", "")}
    assert not sorted(f for f in families if f not in shown)
