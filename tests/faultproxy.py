"""A TCP fault proxy for chaos tests: forwards 127.0.0.1:<port> to an API server and, on demand,
hangs (accepts and reads, drops everything: a server that is up but stuck, or a half-open
connection), resets connections, or
delays every chunk. It runs its own event loop in a thread, so a synchronous test can drive it
while the code under test (in-process or an operator subprocess) talks through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from typing import Literal

Mode = Literal["pass", "hang", "reset", "delay"]


class FaultProxy:
    """`with FaultProxy(host, port) as proxy:` then talk to `proxy.port`; `proxy.mode = "hang"`."""

    def __init__(self, target_host: str, target_port: int, delay_s: float = 1.0) -> None:
        self.target = (target_host, target_port)
        self.delay_s = delay_s
        self.mode: Mode = "pass"
        self.port = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def reset_all(self) -> None:
        """Reset every open connection now (RST, not a clean close)."""
        asyncio.run_coroutine_threadsafe(self._reset_all(), self._loop).result(10)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._reset_all()

    async def _reset_all(self) -> None:
        for writer in list(self._writers):
            _reset(writer)
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.mode == "reset":
            _reset(writer)
            return
        self._writers.add(writer)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)
            return
        self._writers.add(upstream_writer)
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer), return_exceptions=True
        )
        for side in (writer, upstream_writer):
            self._writers.discard(side)
            with contextlib.suppress(Exception):
                side.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(65536):
            if self.mode == "hang":  # drop: the peer sees a connection that never answers
                continue
            if self.mode == "reset":
                _reset(writer)
                return
            if self.mode == "delay":
                await asyncio.sleep(self.delay_s)
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(Exception):
            writer.write_eof()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), as a crashed peer or a middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
