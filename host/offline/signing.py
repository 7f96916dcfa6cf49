"""Optional Ed25519 signatures of submission bundles (`npuconf bundle --sign KEY`,
`npuconf verify --trusted-key PUB`), through the `cryptography` package.

The signature covers manifest.json exactly as stored in the bundle; the manifest lists the SHA-256 of
every other member, so the signature covers the whole submission. It is stored as the member
manifest.sig: JSON with the base64 signature and the SHA-256 fingerprint of the raw public key.
A signature says who packed the bundle, never where its traces came from.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from floor.safe_io import read_regular

from ..errors import UsageError

SIGNATURE: Final = "manifest.sig"


def key_fingerprint(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "SHA256:" + hashlib.sha256(raw).hexdigest()


# An Ed25519 key file is a few hundred bytes (PEM, OpenSSH); anything this large is not one.
KEY_FILE_MAX_BYTES: Final = 64 * 1024


def _read(path: Path, what: str) -> bytes:
    """A key file's bytes: a regular file of at most KEY_FILE_MAX_BYTES (a FIFO or /dev/zero is refused)."""
    try:
        data = read_regular(path, KEY_FILE_MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"{what} {path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if len(data) > KEY_FILE_MAX_BYTES:
        raise UsageError(f"{what} {path}: larger than {KEY_FILE_MAX_BYTES} bytes; expected a key file")
    return data


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key in PEM (PKCS#8) or OpenSSH format, without a passphrase."""
    data = _read(path, "--sign")
    key: object
    try:
        if data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY"):
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--sign {path}: not an unencrypted PEM or OpenSSH private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"--sign {path}: a {type(key).__name__}; bundles are signed with Ed25519 keys only")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key in PEM (SubjectPublicKeyInfo) or OpenSSH (`ssh-ed25519 ...`) format."""
    data = _read(path, "--trusted-key")
    key: object
    try:
        if data.lstrip().startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--trusted-key {path}: not a PEM or OpenSSH public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"--trusted-key {path}: a {type(key).__name__}; bundles are signed with Ed25519 keys only")
    return key


def sign(manifest: bytes, key: Ed25519PrivateKey) -> bytes:
    """The manifest.sig member for `manifest`."""
    record = {
        "algorithm": "ed25519",
        "key": key_fingerprint(key.public_key()),
        "signature": base64.b64encode(key.sign(manifest)).decode("ascii"),
    }
    return (json.dumps(record, indent=2) + "\n").encode()


def check(manifest: bytes, signature: bytes | None, trusted: Ed25519PublicKey) -> str | None:
    """None when `signature` is a valid signature of `manifest` by `trusted`; else why not (one line)."""
    if signature is None:
        return f"the bundle is not signed (no {SIGNATURE}); --trusted-key requires a signed bundle"
    try:
        record = json.loads(signature.decode("utf-8"))
        raw = base64.b64decode(str(record["signature"]), validate=True)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return f"{SIGNATURE} is not a signature record (JSON with a base64 `signature`)"
    wanted = key_fingerprint(trusted)
    if record.get("key") != wanted:
        return f"signed with key {record.get('key')}, not the trusted key {wanted}"
    try:
        trusted.verify(raw, manifest)
    except InvalidSignature:
        return f"the signature in {SIGNATURE} does not match manifest.json: the bundle was changed after signing"
    return None


def signer(signature: bytes | None) -> str | None:
    """The key fingerprint a signature record names (unchecked), for the console."""
    if signature is None:
        return None
    try:
        value = json.loads(signature.decode("utf-8")).get("key")
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
