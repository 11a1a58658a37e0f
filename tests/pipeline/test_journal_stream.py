"""The journal as a stream: ``ingest --follow`` gives the tables a batch ingest gives.

A real durable server writes the journal while a streaming query follows it: operations
registered and completed before the query starts, more while it runs (the head segment
grows under it). Then the query is stopped wherever it is (mid-batch, likely) and the
server is killed with SIGKILL; the server restarts (recovery), more operations arrive,
and the query restarts from its checkpoint to catch up. The tables must equal a batch
ingest of the same journal row for row: nothing lost, nothing repeated.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from purgatory_pipeline.follow import PENDING, follow
from purgatory_pipeline.ingest import ingest, read_records, read_table
from purgatory_proto.v1 import purgatory_pb2 as pb

from tests.pipeline.servers import NAME, Client, Server


def _operations(client: Client, first: int, count: int) -> None:
    """``count`` operations: two in three completed by a signal, every fifth forced."""
    for n in range(first, first + count):
        client.watch(f"op-{n}", [f"k-{n}"], 600_000, pb.Condition(any_key=pb.AnyKeyCondition()))
    for n in range(first, first + count):
        if n % 3:
            client.signal(f"k-{n}", source=f"s-{n % 2}", amount=n)
        elif n % 5 == 0:
            client.force(f"op-{n}")


def _rows(spark: Any, tables: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {
        name: sorted(map(tuple, read_table(spark, str(tables), name).collect()))
        for name in ("operations", "signals", "events")
    }


def _wait_batches(query: Any, at_least: int, timeout_s: float = 240.0) -> None:
    """Until ``query`` has finished ``at_least`` batches that read rows."""
    deadline = time.monotonic() + timeout_s
    while sum(1 for p in query.query.recentProgress if p["numInputRows"]) < at_least:
        assert query.query.exception() is None, query.query.exception()
        assert time.monotonic() < deadline, "the streaming query made no progress"
        time.sleep(0.1)


def _wait_planned(checkpoint: Path, batch: int, timeout_s: float = 240.0) -> None:
    """Until Spark has logged the offsets of micro-batch ``batch`` (it runs it next)."""
    deadline = time.monotonic() + timeout_s
    while not (checkpoint / "offsets" / str(batch)).exists():
        assert time.monotonic() < deadline, f"batch {batch} was not planned"
        time.sleep(0.05)


def test_a_followed_journal_survives_killed_query_and_server(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    journal = data / NAME / "journal"
    server = Server(data).start()
    client = Client(server.target)
    tables, checkpoint = tmp_path / "followed", tmp_path / "checkpoint"
    try:
        _operations(client, 0, 20)
        query = follow(spark, [str(journal)], str(tables), str(checkpoint), interval_s=0.5)
        try:
            _wait_batches(query, 1)
            _operations(client, 20, 20)  # the head segment grows under the running query
            _wait_planned(checkpoint, 1)  # the next batch has its offsets: it is running
        finally:
            query.stop()  # wherever it is: between batches or inside one (not committed)
        server.kill()
        client.close()
        server.start()
        client = Client(server.target)
        _operations(client, 40, 20)
        client.signal("k-0", source="late")  # an operation pending since before the kill
    finally:
        client.close()
        server.stop()

    catch_up = follow(spark, [str(journal)], str(tables), str(checkpoint), available_now=True)
    catch_up.awaitTermination()
    assert catch_up.query.exception() is None

    batch = tmp_path / "batch"
    ingest(spark, [str(journal)], str(batch))
    followed, expected = _rows(spark, tables), _rows(spark, batch)
    for name, rows in expected.items():
        extra = sorted(set(map(repr, followed[name])) - set(map(repr, rows)))
        missing = sorted(set(map(repr, rows)) - set(map(repr, followed[name])))
        assert followed[name] == rows, (name, len(followed[name]), len(rows), extra, missing)
    assert len(followed["operations"]) == 60
    records = read_records(spark, str(tables))
    assert records.count() == records.select("index").distinct().count()
    assert (tables / PENDING).read_text() == "[]\n"
