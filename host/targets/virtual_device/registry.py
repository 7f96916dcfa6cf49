"""This host's record of the fleets its `npuconf` processes own, so that a fleet whose owner was killed
(SIGKILL, power loss) is stopped by the next run or `--resume`."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path

from floor.safe_io import host_state_dir, write_text

from ...errors import UsageError
from .fleet import Fleet, read_state, stop_fleet
from .processes import process_start


def _registry() -> Path:
    return host_state_dir() / "fleets"


def register_fleet(fleet: Fleet) -> Path:
    """Record, on this host, that this process owns `fleet` (so a later run can stop it if we are killed)."""
    entry = _registry() / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    owner = {"pid": os.getpid(), "start": process_start(os.getpid()), "state_file": str(fleet.state_file)}
    write_text(entry, json.dumps(owner) + "\n")
    return entry


def reap_orphan_fleets() -> int:
    """Stop the fleets whose owning `npuconf` process is gone (SIGKILL, power loss); how many were stopped."""
    entries = sorted(_registry().glob("*.json"))
    if not entries:
        return 0
    stopped = 0
    for entry in entries:
        try:
            owner = json.loads(entry.read_text(encoding="utf-8"))
            pid, start, state_file = int(owner["pid"]), owner.get("start"), Path(str(owner["state_file"]))
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if start is not None and process_start(pid) == start:
            continue  # its owner still runs
        with contextlib.suppress(UsageError, OSError):
            stop_fleet(read_state(state_file))
            stopped += 1
        entry.unlink(missing_ok=True)
    return stopped
