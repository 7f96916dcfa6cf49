"""The device side of one adb transport: handshake, stream table, dispatch of services."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Final

from .auth import AUTH_SIGNATURE, AUTH_TOKEN, DeviceAuth
from .profile import DeviceProfile
from .protocol import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_VERSION_MIN,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    MAX_PAYLOAD,
    Message,
    ProtocolError,
    banner,
    encode,
    read_message,
)
from .sandbox import Sandbox
from .shell import ShellService, parse_service
from .streams import Stream
from .sync import SyncService

LOG: Final = logging.getLogger("npuconf.virtual_device")


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    profile: DeviceProfile
    sandbox: Sandbox
    version: int = A_VERSION
    max_payload: int = MAX_PAYLOAD
    trace_messages: bool = False
    auth: DeviceAuth | None = None  # None: CNXN answered with CNXN (tests of the protocol alone)


class Connection:
    """One TCP connection from an adb server: one transport, many streams."""

    def __init__(self, config: DeviceConfig, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.config = config
        self.reader = reader
        self.writer = writer
        self.version = config.version
        self.max_payload = config.max_payload
        self.streams: dict[int, Stream] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._next_id = 1
        self._online = False
        self._token: bytes | None = None  # the AUTH token this connection must sign
        self._peer: tuple[int, int] = (A_VERSION, MAX_PAYLOAD)
        self.shell = ShellService(config.sandbox, config.profile)
        self.sync = SyncService(config.sandbox)

    # -- Sender ---------------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        if self.writer.is_closing():
            return
        if self.config.trace_messages:
            LOG.debug("send %s", message.describe())
        self.writer.write(encode(message, with_checksum=self.version < A_VERSION_SKIP_CHECKSUM))

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    # -- the transport loop ---------------------------------------------------------------------

    async def serve(self) -> None:
        try:
            while True:
                message = await read_message(self.reader, MAX_PAYLOAD)
                if self.config.trace_messages:
                    LOG.debug("recv %s", message.describe())
                self.dispatch(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except ProtocolError as exc:
            LOG.warning("dropping the connection: %s", exc)
        finally:
            for stream in list(self.streams.values()):
                stream.on_close()
            self.streams.clear()
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    def dispatch(self, message: Message) -> None:
        command = message.command
        if command == A_CNXN:
            if self.config.auth is None:
                self._handshake(message)
            else:
                self._online = False
                self._peer = (message.arg0, message.arg1)
                self.version = max(A_VERSION_MIN, min(self.config.version, message.arg0))
                self._send_token()
        elif not self._online:
            if command == A_AUTH:
                self._auth(message)
            # nothing else is served before authentication
        elif command == A_OPEN:
            self._open(message)
        elif command == A_OKAY:
            stream = self.streams.get(message.arg1)
            if stream is not None:
                stream.on_okay()
        elif command == A_WRTE:
            stream = self.streams.get(message.arg1)
            if stream is None:
                self.send(Message(A_CLSE, 0, message.arg0))
            else:
                stream.on_write(message.data)
        elif command == A_CLSE:
            stream = self.streams.pop(message.arg1, None)
            if stream is not None:
                stream.on_close()

    def _send_token(self) -> None:
        self._token = DeviceAuth.new_token()
        self.send(Message(A_AUTH, AUTH_TOKEN, 0, self._token))

    def _auth(self, message: Message) -> None:
        """AUTH from the host: a SIGNATURE of our token by the run's key puts the device online."""
        auth = self.config.auth
        if auth is None or self._token is None:
            return
        if message.arg0 == AUTH_SIGNATURE and auth.verifies(self._token, message.data):
            self._token = None
            self._handshake(Message(A_CNXN, self._peer[0], self._peer[1], b""))
        elif message.arg0 == AUTH_SIGNATURE:
            LOG.info("AUTH signature not from this run's key: new token")
            self._send_token()
        else:
            LOG.info("AUTH type %d refused: only this run's adb server may connect", message.arg0)

    def _handshake(self, message: Message) -> None:
        peer_version, peer_max = message.arg0, message.arg1
        self.version = max(A_VERSION_MIN, min(self.config.version, peer_version))
        self.max_payload = max(256, min(self.config.max_payload, peer_max or self.config.max_payload))
        profile = self.config.profile
        payload = banner(dict(profile.props), profile.adb_features)
        # The reply announces our own limits; both sides then use the minimum.
        self.send(Message(A_CNXN, self.config.version, self.config.max_payload, payload))
        self._online = True

    def _open(self, message: Message) -> None:
        remote_id = message.arg0
        service = message.data.rstrip(b"\0").decode("utf-8", errors="surrogateescape")
        local_id = self._next_id
        self._next_id += 1
        stream = Stream(self, local_id, remote_id)
        shell_request = parse_service(service)
        if shell_request is not None:
            coroutine = self.shell.run(stream, shell_request)
        elif service == "sync:":
            coroutine = self.sync.run(stream)
        else:
            LOG.info("refusing service %r", service)
            self.send(Message(A_CLSE, 0, remote_id))
            return
        self.streams[local_id] = stream
        self.send(Message(A_OKAY, local_id, remote_id))
        task = asyncio.create_task(self._run_stream(stream, coroutine))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run_stream(self, stream: Stream, coroutine: object) -> None:
        try:
            await coroutine  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("service on stream %d failed", stream.local_id)
            await stream.close()
        finally:
            self.streams.pop(stream.local_id, None)


async def serve(config: DeviceConfig, host: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await Connection(config, reader, writer).serve()

    return await asyncio.start_server(handle, host, port)
