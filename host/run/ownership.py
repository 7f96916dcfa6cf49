"""Which run directories this host created: `--resume` trusts a plan's options only for those.

`npuconf run` writes a random token into RUN_DIR/.npuconf-host and records the token, with the
directory's resolved path, in this host's state directory (reports.floor.safe_io.host_state_dir). A run
directory copied from elsewhere, or edited to carry another token, does not match: `--resume` of it
never loads the library its plan names and asks for `--impl` on the command line instead.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from pathlib import Path
from typing import Final

from reports.floor.safe_io import host_state_dir, read_small, write_text

MARKER: Final = ".npuconf-host"
_TOKEN: Final = re.compile(r"[0-9a-f]{32}")


def _registry(token: str) -> Path:
    return host_state_dir() / "runs" / token


def claim(run_dir: Path) -> str:
    """Mark `run_dir` as created by this host (marker file plus host-side registry entry)."""
    token = secrets.token_hex(16)
    write_text(_registry(token), str(run_dir.resolve()) + "\n")
    write_text(run_dir / MARKER, token + "\n")
    return token


def unclaim(token: str) -> None:
    """Forget a claim whose run directory was removed before anything ran in it."""
    with contextlib.suppress(OSError):
        _registry(token).unlink()


def created_here(run_dir: Path) -> bool:
    """True when `run_dir` carries a token this host recorded for this very directory."""
    marker = read_small(run_dir / MARKER, 256)
    if marker is None:
        return False
    token = marker.decode("ascii", errors="replace").strip()
    if not _TOKEN.fullmatch(token):
        return False
    recorded = read_small(_registry(token), 8192)
    if recorded is None:
        return False
    return recorded.decode("utf-8", errors="replace").strip() == str(run_dir.resolve())
