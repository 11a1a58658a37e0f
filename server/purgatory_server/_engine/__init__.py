"""The in-process engine: timing wheel, SystemTimer, DelayedOperation, purgatory.

Pure Python; imports neither grpc nor the service. Where a C compiler exists the build
compiles it with mypyc; ``COMPILED`` says which build this process runs and
``PURGATORY_PURE_PYTHON=1`` forces the sources (see :mod:`._native`, imported first so
that it can).
"""

from purgatory_server._engine._native import install

COMPILED: bool = install()

__all__ = ["COMPILED"]
