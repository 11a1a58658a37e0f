"""The purgatories created at run time on a worker, kept by its supervisor.

A worker's in-memory purgatories live in its process. The definition (its settings) of
each one CreatePurgatory makes is written, one JSON file per name, to a directory the
supervisor owns for its whole life (``--worker-definitions``), and DeletePurgatory removes
it, so a worker that is restarted creates them again (empty, as any in-memory purgatory
after a restart) before it serves: the server's purgatories outlive one worker process.
Durable ones are not written; the data directory's catalog already brings them back.

A definition that cannot be written is logged (the purgatory was created; only a restart
of its worker would lose it). Thread-safety: loop-confined (the worker's event loop); a
file is replaced whole (a reader never sees half of one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from pathlib import Path

from purgatory_server._service.config.server_config import PurgatorySettings

__all__ = ["KeptPurgatories"]

logger = logging.getLogger("purgatory_server.workers")


class KeptPurgatories:
    """The run-time purgatory definitions kept in ``directory`` (see the module doc)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, name: str) -> Path:
        # Names are letters, digits, '.', '_' and '-' (registry.validate_name): file-safe.
        return self.directory / f"{name}.json"

    def record(self, settings: PurgatorySettings) -> None:
        """Keep an in-memory purgatory's definition (durable ones: the catalog's)."""
        if settings.durable:
            return
        path = self._path(settings.name)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(dataclasses.asdict(settings), sort_keys=True))
            tmp.replace(path)
        except OSError as exc:
            logger.warning(
                "purgatory %s: its definition could not be kept for a restart of this worker: %s",
                settings.name,
                exc.strerror or exc,
            )

    def forget(self, name: str) -> None:
        """A deleted purgatory is not created again."""
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def load(self) -> list[PurgatorySettings]:
        """Every definition kept, by name."""
        found: list[PurgatorySettings] = []
        for path in sorted(self.directory.glob("*.json")):
            found.append(PurgatorySettings(**json.loads(path.read_text())))
        return found
