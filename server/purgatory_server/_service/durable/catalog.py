"""The catalog of durable purgatories under the server's data directory.

Layout: ``<data_dir>/<name>/purgatory.json`` holds the purgatory's settings and
``<data_dir>/<name>/journal/`` its journal (docs/journal.md). A durable purgatory created
at runtime (CreatePurgatory) is therefore found again at start-up without being in the
configuration file.

Crash safety: the settings file is written to a temporary name, fsynced and renamed, and
the directory is fsynced, so it is either absent or whole. Deleting a purgatory removes
the settings file first (and fsyncs the directory), so a crash half-way through leaves a
directory that start-up ignores rather than a half-deleted purgatory that comes back.

Thread-safety: plain file operations; callers serialize per name (the registry does).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, fields
from pathlib import Path

from purgatory_server._service.config.server_config import ConfigError, Limits, PurgatorySettings

__all__ = ["SETTINGS_FILE", "journal_dir", "read_catalog", "remove_purgatory", "write_settings"]

logger = logging.getLogger("purgatory_server.service")

SETTINGS_FILE = "purgatory.json"


def journal_dir(data_dir: Path, name: str) -> Path:
    return data_dir / name / "journal"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_settings(data_dir: Path, settings: PurgatorySettings) -> None:
    """Atomically record ``settings`` as ``<data_dir>/<name>/purgatory.json``; nothing is
    written when the file already holds them (a restart on a full disk opens)."""
    folder = data_dir / settings.name
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / SETTINGS_FILE
    tmp = folder / (SETTINGS_FILE + ".tmp")
    data = json.dumps(asdict(settings), indent=2, sort_keys=True).encode()
    try:
        if target.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    _fsync_dir(folder)
    _fsync_dir(data_dir)


def read_catalog(data_dir: Path, limits: Limits | None = None) -> list[PurgatorySettings]:
    """Every purgatory recorded under ``data_dir``, by name; ConfigError if one is bad."""
    if not data_dir.is_dir():
        return []
    known = {f.name for f in fields(PurgatorySettings)}
    out = []
    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        path = folder / SETTINGS_FILE
        if not path.exists():
            logger.warning("ignoring %s: no %s (a deleted purgatory?)", folder, SETTINGS_FILE)
            continue
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        if not isinstance(raw, dict) or not set(raw) <= known or raw.get("name") != folder.name:
            raise ConfigError(f"{path}: not the settings of purgatory {folder.name!r}")
        settings = PurgatorySettings(**raw)
        settings.validate(limits)
        out.append(settings)
    return out


def remove_purgatory(data_dir: Path, name: str) -> None:
    """Delete a purgatory's settings (first, durably) and then its journal."""
    folder = data_dir / name
    try:
        (folder / SETTINGS_FILE).unlink()
    except FileNotFoundError:
        pass
    else:
        _fsync_dir(folder)
    shutil.rmtree(folder, ignore_errors=False)
