"""The version of this source tree (and of the ``purgatory-grpc`` distribution).

The one place the version is written: pyproject.toml reads it (``dynamic``), the
``purgatory_build_info`` metric and ``--version`` report it.
"""

__all__ = ["__version__", "version"]

__version__ = "0.1.0"


def version() -> str:
    return __version__
