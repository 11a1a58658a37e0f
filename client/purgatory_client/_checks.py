"""Argument checks the clients make before sending (no I/O).

What the client can tell is wrong without asking the server (a ``str`` where a list of
keys belongs, which Python would silently split into one key per character; a negative
timeout; a number no protobuf field can hold; a wrong type) raises
:class:`~purgatory_client.InvalidArgumentError` at once, naming the argument like the
server names fields. Everything else (lengths, counts, ranges the server configures) is
the server's to judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from purgatory_client.errors import invalid_argument

__all__ = ["converting", "int64", "key_list", "text", "uint"]

_INT64 = (-(2**63), 2**63 - 1)


def key_list(field: str, keys: Any) -> list[str]:
    """``keys`` as a list of str; a bare str (or bytes) is refused, not split."""
    if isinstance(keys, str | bytes | bytearray) or not isinstance(keys, Iterable):
        raise invalid_argument(
            field, f"expected a list of str, got a {type(keys).__name__} (wrap one key in a list)"
        )
    out = list(keys)
    for i, key in enumerate(out):
        if not isinstance(key, str):
            raise invalid_argument(f"{field}[{i}]", f"expected str, got {type(key).__name__}")
    return out


def uint(field: str, value: Any, bits: int = 64) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_argument(field, f"expected an int, got {type(value).__name__}")
    if value < 0:
        raise invalid_argument(field, f"must not be negative, got {value}")
    if value >= 2**bits:
        raise invalid_argument(field, f"{value} is more than {2**bits - 1}")
    return value


def int64(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_argument(field, f"expected an int, got {type(value).__name__}")
    if not _INT64[0] <= value <= _INT64[1]:
        raise invalid_argument(field, f"{value} is outside the int64 range")
    return value


def text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise invalid_argument(field, f"expected str, got {type(value).__name__}")
    return value


@contextmanager
def converting(field: str) -> Iterator[None]:
    """Whatever protobuf still refuses (a wrong type deep in a message) as the client's
    InvalidArgumentError rather than a bare TypeError or ValueError."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        raise invalid_argument(field, str(exc)[:200]) from None
