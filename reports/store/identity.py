"""Who recorded a run and who imports it: the host identity of plans and resumes, the store's submitter.

A host identity is a random 32-hex-digit id kept in this user's state directory
(floor.safe_io.host_state_dir, file `host-id`, created once with mode 0600); records carry only its
SHA-256 (`host_identity`), so a results.jsonl never holds the secret itself. Another user on the same
machine, or the same user on another machine, has another identity. The store lets a run's rows grow
only by a `resume` record of this identity, imported by this identity (reports/store/runs.py).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import secrets
import socket
from typing import Final

from floor.safe_io import create_exclusive, host_state_dir, read_small, remove_file

HOST_ID_FILE: Final = "host-id"
_ID: Final = re.compile(r"[0-9a-f]{32}")


def _host_secret() -> str:
    path = host_state_dir() / HOST_ID_FILE
    stored = read_small(path, 256)
    text = stored.decode("ascii", errors="replace").strip() if stored is not None else ""
    if _ID.fullmatch(text):
        return text
    secret = secrets.token_hex(16)
    if create_exclusive(path, (secret + "\n").encode("ascii"), 0o600):
        return secret
    # another process created it meanwhile, or a damaged file: replace the latter
    again = read_small(path, 256)
    text = again.decode("ascii", errors="replace").strip() if again is not None else ""
    if _ID.fullmatch(text):
        return text
    remove_file(path)
    return _host_secret()


def host_identity() -> str:
    """This user's host identity as recorded in plan and resume records: SHA-256 of the secret id."""
    return hashlib.sha256(f"npuconf-host:{_host_secret()}".encode("ascii")).hexdigest()


def local_submitter() -> str:
    """user@host of this process, the submitter of an import into a SQLite store. The user is the one the
    kernel says this process runs as (its effective uid, named by the password database), never what
    LOGNAME or USER say: an environment variable is anyone's to set."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = f"uid{uid}"
    return f"{user}@{socket.gethostname()}"
