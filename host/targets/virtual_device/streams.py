"""Streams multiplexed over one adb transport, with the one-outstanding-WRTE flow control of adb 29."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Protocol

from .protocol import A_CLSE, A_OKAY, A_WRTE, Message

# How long a closing stream waits for the acknowledgement of its last WRTE before sending CLSE.
LAST_ACK_WAIT_S = 5.0


class StreamClosed(Exception):
    """The peer closed the stream (or the transport went away)."""


class Sender(Protocol):
    max_payload: int

    def send(self, message: Message) -> None: ...

    async def drain(self) -> None: ...


class Stream:
    """One service stream: `local_id` is ours, `remote_id` the host's."""

    def __init__(self, sender: Sender, local_id: int, remote_id: int) -> None:
        self.sender = sender
        self.local_id = local_id
        self.remote_id = remote_id
        self._can_send = asyncio.Event()
        self._can_send.set()  # the OPEN implies the host is ready for one WRTE
        self._inbox: deque[bytes] = deque()
        self._inbox_ready = asyncio.Event()
        self.peer_closed = asyncio.Event()
        self._closed = False

    # -- events from the transport -------------------------------------------------------------

    def on_okay(self) -> None:
        self._can_send.set()

    def on_write(self, data: bytes) -> None:
        self._inbox.append(data)
        self._inbox_ready.set()

    def on_close(self) -> None:
        self._closed = True
        self.peer_closed.set()
        self._can_send.set()
        self._inbox_ready.set()

    # -- the service side ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def write(self, data: bytes) -> None:
        """Send data as WRTE messages, each after the previous one was acknowledged."""
        view = memoryview(data)
        step = self.sender.max_payload
        for start in range(0, len(view), step):
            await self._can_send.wait()
            if self._closed:
                raise StreamClosed
            self._can_send.clear()
            self.sender.send(Message(A_WRTE, self.local_id, self.remote_id, bytes(view[start : start + step])))
            await self.sender.drain()

    async def read(self) -> bytes | None:
        """The next chunk the host wrote (acknowledged now that it is consumed), None once closed."""
        while not self._inbox:
            if self._closed:
                return None
            self._inbox_ready.clear()
            await self._inbox_ready.wait()
        data = self._inbox.popleft()
        if not self._closed:
            self.sender.send(Message(A_OKAY, self.local_id, self.remote_id))
        return data

    async def close(self) -> None:
        """Close from our side once the last WRTE was acknowledged, so no output is lost."""
        if self._closed:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._can_send.wait(), LAST_ACK_WAIT_S)
        if not self._closed:
            self._closed = True
            self.sender.send(Message(A_CLSE, self.local_id, self.remote_id))
            self._inbox_ready.set()


class ByteReader:
    """Exact-size reads over a stream's chunks: sync requests and shell v2 frames span WRTEs."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._buffer = bytearray()

    async def read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = await self.stream.read()
            if chunk is None:
                raise StreamClosed
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data
