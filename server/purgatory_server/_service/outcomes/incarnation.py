"""Stream incarnations: which "life" of a purgatory's event stream a sequence belongs to.

Sequences restart at 1 when an in-memory purgatory is created again (its server
restarted, or it was deleted and re-created), so ``after_sequence=N`` alone cannot tell a
resuming subscriber that the events it would get are not the ones it missed. Every
purgatory therefore carries an incarnation id: a fresh random one for an in-memory
purgatory, and one stored beside a durable purgatory's settings
(``<data_dir>/<name>/incarnation``) so it survives restarts exactly as long as the
journal (and its sequences) does. A subscriber that names another incarnation is
refused with FAILED_PRECONDITION (:class:`~.errors.StreamReset`) instead of being served
a mix of two streams.

Thread-safety: pure functions plus file operations on a purgatory's own folder, which
the registry serializes per name.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from purgatory_server._service.model.errors import StreamReset

__all__ = ["INCARNATION_FILE", "check_incarnation", "durable_incarnation", "new_incarnation"]

INCARNATION_FILE = "incarnation"
_ID = re.compile(r"[0-9a-f]{16}")


def new_incarnation() -> str:
    """A fresh id: 16 hex characters (64 random bits; collisions are not a concern)."""
    return secrets.token_hex(8)


def durable_incarnation(folder: Path) -> str:
    """The id stored in ``folder`` (a durable purgatory's directory), created if absent.

    Written atomically (temporary file, fsync, rename, fsync of the folder), so a crash
    leaves either no id (a new one is made next time, which is safe: subscribers are
    told to start over) or a whole one. An unreadable or malformed file is replaced.
    """
    path = folder / INCARNATION_FILE
    try:
        current = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        current = ""
    if _ID.fullmatch(current):
        return current
    incarnation = new_incarnation()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (INCARNATION_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{incarnation}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return incarnation


def check_incarnation(requested: str, current: str) -> None:
    """Refuse a resume that names another incarnation; an empty one is not checked."""
    if requested and requested != current:
        raise StreamReset(requested, current)
