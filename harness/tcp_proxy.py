"""A TCP proxy on loopback that a test can cut: a network partition between two processes.

:class:`Blackhole` listens on ``127.0.0.1:0`` and forwards every connection to ``target``.
:meth:`Blackhole.cut` stops forwarding in both directions without closing anything (bytes
read are dropped, new connections are accepted and get nothing): the peers see a silent
network, as behind a failed switch, not a reset they could react to at once.
:meth:`Blackhole.heal` forwards again. Runs on the test's event loop; :meth:`close` ends
every connection.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["Blackhole"]


class Blackhole:
    """See module docstring."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.is_cut = False
        self.port = 0

    async def start(self) -> Blackhole:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self.is_cut = True

    def heal(self) -> None:
        self.is_cut = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers += [writer, up_writer]
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await src.read(65536):
                if not self.is_cut:
                    dst.write(data)
                    await dst.drain()
        dst.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
