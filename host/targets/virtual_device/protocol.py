"""The adb transport as seen from the device: message codec, checksum rule, handshake constants."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass
from typing import Final

A_CNXN: Final = 0x4E584E43
A_AUTH: Final = 0x48545541
A_OPEN: Final = 0x4E45504F
A_OKAY: Final = 0x59414B4F
A_WRTE: Final = 0x45545257
A_CLSE: Final = 0x45534C43
A_STLS: Final = 0x534C5453

A_VERSION_MIN: Final = 0x01000000
A_VERSION_SKIP_CHECKSUM: Final = 0x01000001
A_VERSION: Final = 0x01000001
MAX_PAYLOAD: Final = 1024 * 1024
# A peer may announce at most this much; anything larger on the wire drops the connection.
MAX_ACCEPTED_PAYLOAD: Final = 1024 * 1024

HEADER: Final = struct.Struct("<6I")

COMMAND_NAMES: Final = {
    A_CNXN: "CNXN",
    A_AUTH: "AUTH",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_WRTE: "WRTE",
    A_CLSE: "CLSE",
    A_STLS: "STLS",
}


class ProtocolError(Exception):
    """The peer broke the framing (bad magic, oversized payload): the connection is dropped."""


@dataclass(frozen=True, slots=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return COMMAND_NAMES.get(self.command, f"0x{self.command:08x}")

    def describe(self) -> str:
        preview = self.data[:40]
        return f"{self.name} {self.arg0} {self.arg1} len={len(self.data)} {preview!r}"


def checksum(data: bytes) -> int:
    """Byte sum of the payload (what versions below A_VERSION_SKIP_CHECKSUM put in data_check)."""
    return sum(data) & 0xFFFFFFFF


def encode(message: Message, with_checksum: bool) -> bytes:
    check = checksum(message.data) if with_checksum else 0
    header = HEADER.pack(
        message.command,
        message.arg0,
        message.arg1,
        len(message.data),
        check,
        message.command ^ 0xFFFFFFFF,
    )
    return header + message.data


def decode_header(raw: bytes, max_payload: int) -> tuple[int, int, int, int]:
    """(command, arg0, arg1, data_length) of a header; ProtocolError on a bad magic or size."""
    command, arg0, arg1, length, _check, magic = HEADER.unpack(raw)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    if length > max_payload:
        raise ProtocolError(f"payload of {length} bytes exceeds the maximum of {max_payload}")
    return command, arg0, arg1, length


async def read_message(reader: asyncio.StreamReader, max_payload: int = MAX_ACCEPTED_PAYLOAD) -> Message:
    """Read one message; asyncio.IncompleteReadError at EOF. data_check is not verified (adb does not either)."""
    raw = await reader.readexactly(HEADER.size)
    command, arg0, arg1, length = decode_header(raw, max_payload)
    data = await reader.readexactly(length) if length else b""
    return Message(command, arg0, arg1, data)


def banner(props: dict[str, str], features: tuple[str, ...], state: str = "device") -> bytes:
    """The CNXN payload: `device::ro.product.name=..;ro.product.model=..;ro.product.device=..;features=..`."""
    parts = [f"{key}={props.get(key, '')}" for key in ("ro.product.name", "ro.product.model", "ro.product.device")]
    parts.append("features=" + ",".join(features))
    return f"{state}::{';'.join(parts)}".encode()
