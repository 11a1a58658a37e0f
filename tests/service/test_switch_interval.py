"""The server entry point's GIL switch interval (process_tuning.shorten_switch_interval).

Process-wide, so the test restores the interpreter's interval whatever happens.
"""

from __future__ import annotations

import sys

from purgatory_server._service.config.process_tuning import (
    SWITCH_INTERVAL_S,
    shorten_switch_interval,
)


def test_lowers_cpythons_default_to_one_millisecond_and_never_raises_a_lower_one() -> None:
    saved = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # CPython's default
        shorten_switch_interval()
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S == 0.001
        sys.setswitchinterval(0.0005)  # someone chose shorter: keep it
        shorten_switch_interval()
        assert sys.getswitchinterval() == 0.0005
    finally:
        sys.setswitchinterval(saved)
