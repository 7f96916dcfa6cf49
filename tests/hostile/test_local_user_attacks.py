"""Local users against a root run, as CI runs them: each attack runs as an unprivileged user in its own
process while root drives virtual devices, and achieves nothing (issue 26).

- the adb shell race: the device's shell user swaps, with renameat2(RENAME_EXCHANGE), a symlink to a
  root-only file and a plain file while root pulls the plain file through the device's sync service;
- the sandbox rewrite: another local user tries to change the probe, libvnpu.so or the vnpu profile a
  run pushed into the device;
- the adb server: another local user tries every socket the run's private adb server listens on;
- one run's device against another's: a shell on one device tries to read and write the sandbox of a
  device of another run (each device runs as a uid of its own);
(the directory swap against root's `npuconf report` is tests/hostile/test_directory_swap.py).
"""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

from tests.adb.conftest import adb_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="attacks of one local user against another's run need root"),
]
PYTHON = "/usr/bin/python3"  # world-executable, unlike the checkout's virtualenv under /root

RACER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
here = sys.argv[1]
a, b = os.path.join(here, "a").encode(), os.path.join(here, "b").encode()
end = time.monotonic() + float(sys.argv[2])
swaps = 0
while time.monotonic() < end:
    if libc.renameat2(-100, a, -100, b, 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
        swaps += 1
print(swaps)
"""

WRITER = r"""
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path, "r+b") as handle:
            handle.write(b"owned")
        print("WROTE", path)
    except OSError:
        pass
    try:
        with open(os.path.join(os.path.dirname(path), "planted"), "wb"):
            print("PLANTED", path)
    except OSError:
        pass
"""


def _as_user(uid: int, gid: int):
    def drop() -> None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)

    return drop


def test_the_shell_users_rename_race_never_pulls_a_root_only_file(fleet_factory, tmp_path):
    fleet = fleet_factory(1).fleet
    device = fleet.devices[0]
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only: never leaves\n")
    secret.chmod(0o600)
    race = device.root / "data/local/tmp/race"
    race.mkdir()
    shell = os.stat(device.root / "data")
    os.symlink(secret, race / "a")
    (race / "b").write_bytes(b"decoy\n")
    for path in (race, race / "b"):
        os.lchown(path, shell.st_uid, shell.st_gid)
    os.lchown(race / "a", shell.st_uid, shell.st_gid)
    racer = subprocess.Popen([PYTHON, "-c", RACER, str(race), "8"], stdout=subprocess.PIPE, text=True,
                             preexec_fn=_as_user(shell.st_uid, shell.st_gid))
    got = []
    try:
        for attempt in range(40):
            target = tmp_path / f"got{attempt}"
            adb_cli(fleet, "-s", device.adb_serial, "pull", "/data/local/tmp/race/b", str(target))
            if target.exists():
                got.append(target.read_bytes())
    finally:
        swaps = int(racer.communicate(timeout=30)[0].strip() or 0)
    assert swaps > 1000, swaps  # the race really ran while root pulled
    assert b"decoy\n" in got  # pulls that missed the swap still work
    assert all(b"root only" not in data for data in got)


def test_another_local_user_cannot_rewrite_what_a_run_pushed(fleet_factory, tmp_path):
    fleet = fleet_factory(1).fleet
    device = fleet.devices[0]
    pushed = {}
    for name in ("npuconf-probe", "libvnpu.so", "vnpu-profile.conf"):
        source = tmp_path / name
        source.write_bytes(b"the run's own " + name.encode() + b"\n")
        source.chmod(0o755)
        done = adb_cli(fleet, "-s", device.adb_serial, "push", str(source), f"/data/local/tmp/npuconf/{name}")
        assert done.returncode == 0, done.stderr
        pushed[name] = device.root / "data/local/tmp/npuconf" / name
    nobody = pwd.getpwnam("nobody")
    attack = subprocess.run([PYTHON, "-c", WRITER, *map(str, pushed.values())], capture_output=True, text=True,
                            preexec_fn=_as_user(nobody.pw_uid, nobody.pw_gid), timeout=30, check=False)
    assert "WROTE" not in attack.stdout and "PLANTED" not in attack.stdout, attack.stdout
    for name, path in pushed.items():
        assert path.read_bytes() == b"the run's own " + name.encode() + b"\n"


CONNECTOR = r"""
import socket, sys
for spec in sys.argv[1:]:
    kind, _, where = spec.partition(":")
    try:
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(3)
            sock.connect(where)
        else:
            sock = socket.create_connection(("127.0.0.1", int(where)), timeout=3)
        sock.sendall(b"000chost:version")
        print("ANSWERED" if sock.recv(4) == b"OKAY" else "SILENT", spec)
    except OSError as exc:
        print("REFUSED", spec, exc)
"""


def _listening(pid: int) -> list[str]:
    """Every socket process `pid` listens on: `tcp:PORT` or `unix:PATH`."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in list(handle)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    found.append(f"tcp:{int(fields[1].rsplit(':', 1)[1], 16)}")
    with open("/proc/net/unix") as handle:
        for line in list(handle)[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[6] in inodes and int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON
                found.append(f"unix:{fields[7]}")
    return found


def test_another_local_user_cannot_connect_to_the_runs_adb_server(fleet_factory):
    fleet = fleet_factory(1).fleet
    endpoints = _listening(fleet.server.pid)
    assert endpoints, "the adb server listens on nothing"
    own = subprocess.run([PYTHON, "-c", CONNECTOR, *endpoints], capture_output=True, text=True, timeout=60,
                         check=False)
    assert own.stdout.count("ANSWERED") == len(endpoints), own.stdout  # the run's user gets in
    nobody = pwd.getpwnam("nobody")
    other = subprocess.run([PYTHON, "-c", CONNECTOR, *endpoints], capture_output=True, text=True, timeout=60,
                           preexec_fn=_as_user(nobody.pw_uid, nobody.pw_gid), check=False)
    assert "ANSWERED" not in other.stdout and other.stdout.count("REFUSED") == len(endpoints), other.stdout


def test_a_shell_on_one_runs_device_cannot_reach_another_runs_sandbox(fleet_factory, tmp_path):
    first, second = fleet_factory(1).fleet, fleet_factory(1).fleet
    theirs = second.devices[0].root
    secret = tmp_path / "theirs"
    secret.write_bytes(b"the other run's probe\n")
    pushed = adb_cli(second, "-s", second.devices[0].adb_serial, "push", str(secret), "/data/local/tmp/theirs")
    assert pushed.returncode == 0, pushed.stderr
    attack = adb_cli(first, "-s", first.devices[0].adb_serial, "shell",
                     f"cat {theirs}/data/local/tmp/theirs; echo owned > {theirs}/data/local/tmp/planted; "
                     f"echo owned > {theirs}/planted; id -u")  # fmt: skip
    assert b"the other run's" not in attack.stdout.encode(), attack.stdout
    assert not (theirs / "data/local/tmp/planted").exists() and not (theirs / "planted").exists()
    ids = {os.stat(fleet.devices[0].root).st_uid for fleet in (first, second)}
    assert len(ids) == 2 and 0 not in ids, ids
    assert int(attack.stdout.split()[-1]) in ids
    for fleet in (first, second):
        assert os.stat(fleet.devices[0].root).st_mode & 0o777 == 0o700
