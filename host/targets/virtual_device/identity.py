"""Who a virtual device is on the host: when started as root, a uid and gid of its own, used by nothing
else on the machine, which it becomes for good before it serves (docs/adb.md, "Who runs shell commands").

So a shell on one device, whoever opened it, reaches only that device's sandbox: not another device's,
not another run's, and nothing root or any account has. The id is picked at random from a window far
above the accounts' range (1 000 000 000 to 1 999 999 999, or 40 000 to 59 999 where a user namespace
maps only 65 536 ids) and taken only when no account, group or running process uses it. It is claimed
for the device's whole life by binding the abstract unix socket `npuconf-device-id-<id>`, which the
kernel frees when the device process ends, so two devices starting together never share one.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import random
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PRIVATE_ID_WINDOWS: Final = (range(1_000_000_000, 2_000_000_000), range(40_000, 60_000))
CLAIM_PREFIX: Final = "npuconf-device-id-"
PICK_TRIES: Final = 200


class IdentityError(OSError):
    """No private identity could be taken (no free id in the mapped windows, or setresuid refused)."""


@dataclass(frozen=True, slots=True)
class PrivateIdentity:
    uid: int
    gid: int
    claim: socket.socket  # held open while the device runs: no other device takes this id meanwhile

    @property
    def ids(self) -> tuple[int, int]:
        return self.uid, self.gid


def private_identity() -> PrivateIdentity | None:
    """A fresh identity for this device when it runs as root; None when it does not (nothing to drop)."""
    if os.geteuid() != 0:
        return None
    candidates = _mapped_window()
    if candidates is None:
        raise IdentityError("no id of the private windows is mapped in this user namespace for a device of its own")
    for _ in range(PICK_TRIES):
        chosen = random.choice(candidates)
        candidate = random.randrange(chosen.start, chosen.stop)
        if _in_use(candidate):
            continue
        claim = _claim(candidate)
        if claim is None:
            continue
        if _in_use(candidate):  # taken by a process between the look and the claim
            claim.close()
            continue
        return PrivateIdentity(candidate, candidate, claim)
    raise IdentityError(f"no unused id found in {PICK_TRIES} tries for a device of its own")


def drop_privileges(uid: int, gid: int) -> None:
    """Become `uid`/`gid` for good: no supplementary groups, real, effective and saved ids all changed."""
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        raise IdentityError(f"could not become uid {uid} for the device's services ({exc.strerror})") from None
    if os.getresuid() != (uid, uid, uid):
        raise IdentityError(f"could not become uid {uid} for the device's services")


def _ranges(map_file: str) -> list[range]:
    """The ids this user namespace maps (/proc/self/uid_map: `inside outside count` per line)."""
    try:
        lines = Path(map_file).read_text(encoding="ascii").splitlines()
    except OSError:
        return [range(0, 1 << 32)]
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) == 3 and all(f.isdigit() for f in fields):
            found.append(range(int(fields[0]), int(fields[0]) + int(fields[2])))
    return found


def _overlap(first: range, second: range) -> range:
    return range(max(first.start, second.start), min(first.stop, second.stop))


def _mapped_window() -> list[range] | None:
    """The parts of the first private window that both uid and gid maps cover; None when none is."""
    maps = (_ranges("/proc/self/uid_map"), _ranges("/proc/self/gid_map"))
    for window in PRIVATE_ID_WINDOWS:
        parts = [
            part
            for uids in maps[0]
            for gids in maps[1]
            if len(part := _overlap(_overlap(window, uids), gids)) > 0
        ]
        if parts:
            return parts
    return None


def _in_use(candidate: int) -> bool:
    """True when an account, a group or a running process (any of its real, effective, saved or
    filesystem ids) has `candidate`."""
    with contextlib.suppress(KeyError):
        pwd.getpwuid(candidate)
        return True
    with contextlib.suppress(KeyError):
        grp.getgrgid(candidate)
        return True
    text = str(candidate)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith(("Uid:", "Gid:")) and text in line.split()[1:]:
                return True
    return False


def _claim(candidate: int) -> socket.socket | None:
    """Bind the abstract socket that claims `candidate`; None when another device holds it."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(f"\0{CLAIM_PREFIX}{candidate}")
    except OSError:
        claim.close()
        return None
    os.set_inheritable(claim.fileno(), False)
    return claim
