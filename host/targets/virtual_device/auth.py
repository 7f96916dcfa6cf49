"""adb AUTH for the virtual devices: a key pair per run, the adb public key format, the device's check.

The kit generates an RSA-2048 key for each private adb server and writes it as that server's only key
(`$HOME/.android/adbkey`, the server having a private HOME); its public half, in adb's format
(`adbkey.pub`), is given to the run's virtual devices. A device sends AUTH(TOKEN) for every CNXN and
goes online only for a SIGNATURE that the run's key verifies; anything else (another server, another
key, a raw socket) gets a new TOKEN, never a shell.

adb's public key format is base64 of a little-endian struct {u32 words (64), u32 n0inv, u32 n[64],
u32 rr[64], u32 e} followed by " user@host"; n0inv = -1/n mod 2^32 and rr = (2^2048)^2 mod n.
Signatures are PKCS#1 v1.5 over the 20-byte token taken as a SHA-1 digest (not hashed again).
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from floor.safe_io import host_state_dir, write_bytes, write_text

if TYPE_CHECKING:  # the crypto library is loaded where a key is made, read or checked
    from cryptography.hazmat.primitives.asymmetric import rsa

KEY_BITS: Final = 2048
WORDS: Final = KEY_BITS // 32
TOKEN_BYTES: Final = 20
AUTH_TOKEN: Final = 1
AUTH_SIGNATURE: Final = 2
AUTH_RSAPUBLICKEY: Final = 3
_STRUCT: Final = struct.Struct(f"<II{WORDS}I{WORDS}II")


class AuthKeyError(ValueError):
    """A public key file that is not in adb's format."""


# adb's public key line is base64 of 524 bytes plus a comment: far below this.
KEY_TEXT_MAX: Final = 4096


def encode_adb_public_key(key: rsa.RSAPublicKey, comment: str = "npuconf@virtual") -> str:
    numbers = key.public_numbers()
    n, e = numbers.n, numbers.e
    n0inv = (-pow(n, -1, 1 << 32)) % (1 << 32)
    rr = pow(1 << KEY_BITS, 2, n)
    words = [(n >> (32 * i)) & 0xFFFFFFFF for i in range(WORDS)]
    rr_words = [(rr >> (32 * i)) & 0xFFFFFFFF for i in range(WORDS)]
    packed = _STRUCT.pack(WORDS, n0inv, *words, *rr_words, e)
    return base64.b64encode(packed).decode("ascii") + f" {comment}"


def decode_adb_public_key(text: str) -> rsa.RSAPublicKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        packed = base64.b64decode(text.strip().split()[0], validate=True)
    except (ValueError, IndexError) as exc:
        raise AuthKeyError(f"not base64: {exc}") from None
    if len(packed) != _STRUCT.size:
        raise AuthKeyError(f"{len(packed)} bytes where adb's RSA-{KEY_BITS} public key has {_STRUCT.size}")
    fields = _STRUCT.unpack(packed)
    if fields[0] != WORDS:
        raise AuthKeyError(f"key of {fields[0]} words; expected {WORDS}")
    n = sum(word << (32 * i) for i, word in enumerate(fields[2 : 2 + WORDS]))
    e = fields[-1]
    return rsa.RSAPublicNumbers(e, n).public_key()


def generate_server_key(home: Path) -> Path:
    """A fresh key for a private adb server with HOME `home`; returns the adb-format public key path.

    Making an RSA-2048 key (and loading the crypto library) is most of a fleet's start, so the next key
    is made ahead (`make_spare_key`, while the fleet before stops) and kept in this user's
    state directory; a server takes it (and it is gone from there) or, when there is none, makes its
    own. Either way no other server holds it."""
    pem, public = take_spare_key() or _new_key()
    android = home / ".android"
    write_bytes(android / "adbkey", pem, mode=0o600)  # 0600 before it has its name
    return write_text(android / "adbkey.pub", public)


def _new_key() -> tuple[bytes, str]:
    """A new key: its PEM (adb's `adbkey`) and its public half in adb's format (`adbkey.pub`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return pem, encode_adb_public_key(key.public_key()) + "\n"


SPARE_FILE_BYTES: Final = 8192
_PEM_BEGIN: Final = b"-----BEGIN RSA PRIVATE KEY-----"


def _spare_dir() -> Path:
    return host_state_dir() / "adb-keys"


def _private(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & 0o077


def _read_private(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or not _private(info):
            return None
        data = handle.read(SPARE_FILE_BYTES + 1)
    return data if len(data) <= SPARE_FILE_BYTES else None


def take_spare_key() -> tuple[bytes, str] | None:
    """A key made ahead by an earlier fleet (its `adbkey` PEM and `adbkey.pub` text), taken (its directory
    renamed away, then removed) so no other run gets it; None when there is none that this user alone
    could have written and read, or it is not shaped as adb's RSA-2048 key files."""
    directory = _spare_dir()
    try:
        if not _private(directory.stat(follow_symlinks=False)):
            return None
        names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:
        return None
    for name in names:
        taken = directory / f".{name}.{secrets.token_hex(4)}.taken"
        try:
            os.rename(directory / name, taken)  # atomic: one taker only
            held = taken.stat(follow_symlinks=False)
        except OSError:
            continue
        pem = _read_private(taken / "adbkey") if stat.S_ISDIR(held.st_mode) and _private(held) else None
        public = _read_private(taken / "adbkey.pub") if pem is not None else None
        shutil.rmtree(taken, ignore_errors=True)
        if pem is None or public is None or not pem.startswith(_PEM_BEGIN):
            continue
        try:
            text = public.decode("ascii")
            size = len(base64.b64decode(text.split()[0], validate=True))
        except (ValueError, IndexError):
            continue
        if size == _STRUCT.size:
            return pem, text
    return None


def make_spare_key() -> None:
    """Make the next fleet's key now (while this fleet stops), unless one waits."""
    directory = _spare_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(directory.stat(follow_symlinks=False)) or any(
            not n.startswith(".") for n in os.listdir(directory)
        ):
            return
        pem, public = _new_key()
        name = secrets.token_hex(8)
        building = directory / f".{name}.tmp"
        building.mkdir(mode=0o700)
        for file, data in (("adbkey", pem), ("adbkey.pub", public.encode("ascii"))):
            fd = os.open(building / file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        os.rename(building, directory / name)
    except OSError:
        return  # no spare: the next fleet makes its key itself


@dataclass(frozen=True)
class DeviceAuth:
    """The device side: the public key of the one server this device accepts."""

    key: rsa.RSAPublicKey

    @classmethod
    def load(cls, path: Path) -> DeviceAuth:
        return cls(decode_adb_public_key(path.read_text(encoding="ascii", errors="replace")))

    @classmethod
    def read(cls, source: IO[str]) -> DeviceAuth:
        """The key given on a stream (the launcher writes it once the server's key exists)."""
        return cls(decode_adb_public_key(source.read(KEY_TEXT_MAX)))

    @staticmethod
    def new_token() -> bytes:
        return os.urandom(TOKEN_BYTES)

    def verifies(self, token: bytes, signature: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding, utils

        try:
            self.key.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
        except (InvalidSignature, ValueError):
            return False
        return True
