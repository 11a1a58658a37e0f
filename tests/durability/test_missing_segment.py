"""A missing oldest segment (issue 44): start-up refuses with one line naming the missing
records; ``--repair-journal`` opens the purgatory without them and logs exactly what was
lost, and the next start accepts the journal as it now is."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from purgatory_proto.v1 import purgatory_pb2 as pb
from purgatory_server.__main__ import run
from purgatory_server._journal import JournalGapError, SegmentScan, list_segments
from purgatory_server._journal.framing import encode_header
from purgatory_server._journal.segments import segment_name
from purgatory_server._service import create_server
from purgatory_server._service.durable.catalog import journal_dir

from tests.durability.helpers import NAME, durable_config, running, watch

LONG = 600_000


def _split(journal: Path, at: int) -> Path:
    """Split the journal's one segment into two, the second starting at index ``at`` (what
    a roll would have made); the first segment's path."""
    [(base, path)] = list_segments(journal)
    offsets = [offset for offset, _ in SegmentScan.read(path)]
    data = path.read_bytes()
    (journal / segment_name(at)).write_bytes(encode_header(at) + data[offsets[at - base] :])
    path.write_bytes(data[: offsets[at - base]])
    return path


async def _register(config: object, count: int) -> None:
    async with running(config) as stub:  # type: ignore[arg-type]
        for i in range(count):
            await stub.TryCompleteElseWatch(watch(f"op{i}", ["k"], LONG))


async def _refused(config: object) -> str:
    with pytest.raises(JournalGapError) as info:
        await create_server("127.0.0.1:0", config)  # type: ignore[arg-type]
    return str(info.value)


async def _pending(config: object) -> int:
    async with running(config) as stub:  # type: ignore[arg-type]
        info = (await stub.GetPurgatory(pb.GetPurgatoryRequest(name=NAME))).purgatory
        return int(info.pending)


def test_a_deleted_oldest_segment_refuses_start_up_until_repair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = durable_config(tmp_path)
    asyncio.run(_register(config, 10))
    journal = journal_dir(tmp_path, NAME)
    _split(journal, 4).unlink()  # records [0, 4): op0..op3 (nothing else was written)
    assert "missing records [0, 4)" in asyncio.run(_refused(config))
    with caplog.at_level(logging.ERROR):
        assert run(config) == 1
    [line] = [r.getMessage() for r in caplog.records if "cannot start" in r.getMessage()]
    assert "missing records [0, 4)" in line and str(journal) in line and "\n" not in line
    assert "--repair-journal" in line
    caplog.clear()
    with caplog.at_level(logging.ERROR, "purgatory_server._journal"):
        assert asyncio.run(_pending(durable_config(tmp_path, repair_journal=True))) == 6
    assert "records [0, 4) are lost (4 records)" in caplog.text
    assert asyncio.run(_pending(config)) == 6  # no refusal again, nothing more lost
