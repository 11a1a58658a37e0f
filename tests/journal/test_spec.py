"""docs/journal.md's reader snippet, run as written, agrees with the library."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from purgatory_server._journal import FsyncPolicy, Journal, JournalConfig, SegmentScan

from tests.journal.helpers import out, reg, segment_paths, sig

DOC = Path(__file__).resolve().parents[2] / "docs" / "journal.md"


def doc_reader() -> Any:
    text = DOC.read_text()
    section = text[text.index("### Reading the files") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), str(DOC), "exec"), namespace)
    return namespace["read_segment"]


def test_documented_reader_parses_what_the_writer_wrote(tmp_path: Path) -> None:
    read_segment = doc_reader()
    config = JournalConfig(fsync=FsyncPolicy.NEVER, segment_bytes=4096, auto_compact=False)
    with Journal.open(tmp_path, config) as journal:
        for i in range(150):
            journal.append_sync([reg(f"op{i}", "k"), sig("k", i, value=i), out(f"op{i}", i + 1)])
    head = segment_paths(tmp_path)[-1]
    with head.open("ab") as f:
        f.write(b"\x10\x00\x00")  # a torn tail: the documented reader must stop before it
    seen = []
    for seg in segment_paths(tmp_path):
        data = seg.read_bytes()
        ours = [(offset, bytes(payload)) for offset, payload in SegmentScan.read(seg)]
        theirs = list(read_segment(data))
        assert [(o, r.SerializeToString()) for _, o, r in theirs] == ours
        seen.extend(index for index, _, _ in theirs)
    assert seen == list(range(450))
