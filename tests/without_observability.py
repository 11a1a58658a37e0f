"""Run a module as if the ``observability`` extra were not installed.

    python tests/without_observability.py MODULE [ARGS...]

A meta-path finder refuses every ``opentelemetry`` (and ``prometheus_client``) import
exactly as a missing distribution does (ModuleNotFoundError, also from
``importlib.util.find_spec`` of a submodule), then MODULE runs as ``python -m MODULE``
would: a terminal test of the server or the CLI in `make serve`'s installation (the
``server,client`` extras only) without building a second virtual environment.

As at a terminal, Ctrl-C (SIGINT) interrupts MODULE even when the test run was started
as a shell's background job, whose children inherit SIGINT ignored (Python then installs
no KeyboardInterrupt for it).
"""

from __future__ import annotations

import importlib.abc
import runpy
import signal
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED = ("opentelemetry", "prometheus_client")


class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.meta_path.insert(0, _Missing())
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
