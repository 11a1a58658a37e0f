"""The server entry point's GC settings (process_tuning.settle_heap), checked in a child
process because they are process-wide."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import gc
from purgatory_server._service.config.process_tuning import YOUNG_THRESHOLD, settle_heap
before = gc.get_threshold()
settle_heap()
after = gc.get_threshold()
assert after == (YOUNG_THRESHOLD, before[1], before[2]), (before, after)
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
assert gc.isenabled()
print("ok")
"""


def test_settle_heap_freezes_start_up_and_raises_the_young_threshold() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
