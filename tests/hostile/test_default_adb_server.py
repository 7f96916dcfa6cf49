"""The default adb server is someone's: another local user's server on the default port answers a plain
`npuconf run` only if the kernel says it is the user's own, or when the user names it (issue 39). The
attacker runs as `nobody`; the default port is moved with ANDROID_ADB_SERVER_PORT, so the test never
touches the machine's real 5037."""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import time

import pytest

from host.targets.adb_host import AdbServerAddress, ForeignAdbServer, server_answers, socket_peer_owner
from tests.hostile.conftest import cli, text

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="one local user against another's run needs root")
PYTHON = "/usr/bin/python3"

FAKE_SERVER = r"""
import socket, sys, threading
devices = sys.argv[1].encode()
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1], flush=True)

def answer(conn):
    with conn:
        try:
            length = int(conn.recv(4), 16)
            request = conn.recv(length)
        except (OSError, ValueError):
            return
        payload = b"0029" if request == b"host:version" else devices if request == b"host:devices" else None
        if payload is None:
            conn.sendall(b"FAIL0004nope")
        else:
            conn.sendall(b"OKAY" + b"%04x" % len(payload) + payload)

while True:
    conn, _ = server.accept()
    threading.Thread(target=answer, args=(conn,), daemon=True).start()
"""


def _nobody() -> None:
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setresgid(nobody.pw_gid, nobody.pw_gid, nobody.pw_gid)
    os.setresuid(nobody.pw_uid, nobody.pw_uid, nobody.pw_uid)


@pytest.fixture
def their_server():
    """start(devices) -> the port of an adb server of `nobody`'s listing `devices`."""
    started = []

    def start(devices=""):
        process = subprocess.Popen([PYTHON, "-c", FAKE_SERVER, devices], stdout=subprocess.PIPE, text=True,
                                   preexec_fn=_nobody, cwd="/")
        started.append(process)
        return int(process.stdout.readline())

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_another_users_server_on_the_default_port_answers_no_plain_run(their_server, tmp_path):
    port = their_server("their-phone\tdevice\n")
    env = {"ANDROID_ADB_SERVER_PORT": str(port), "NPUCONF_STATE_DIR": str(tmp_path / "state")}
    for args in ((), ("--target", "adb")):
        started = time.monotonic()
        done = cli("run", *args, "--out", tmp_path / "run", "-q", env=env, timeout=60)
        assert done.returncode == 3, text(done)
        assert f"the adb server on 127.0.0.1:{port} belongs to uid 65534 (nobody), not to this user" in text(done)
        assert f"pass --adb-server 127.0.0.1:{port} to use it" in text(done)
        assert len(text(done).strip().splitlines()) == 1 and "Traceback" not in text(done)
        assert time.monotonic() - started < 20
        assert not (tmp_path / "run" / "results.jsonl").exists()


def test_the_same_server_named_with_adb_server_is_used(their_server, tmp_path):
    port = their_server("")  # no device: the run stops at the listing, which shows the server was asked
    done = cli("run", "--adb-server", f"127.0.0.1:{port}", "--out", tmp_path / "run", "-q",
               env={"NPUCONF_STATE_DIR": str(tmp_path / "state")}, timeout=60)
    assert done.returncode == 3, text(done)
    assert f"no device in state `device` on 127.0.0.1:{port}" in text(done)


def test_the_owner_of_a_servers_end_comes_from_the_kernel(their_server):
    port = their_server("")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as theirs:
        assert socket_peer_owner(theirs) == pwd.getpwnam("nobody").pw_uid
    own = socket.socket()
    own.bind(("127.0.0.1", 0))
    own.listen(1)
    with own, socket.create_connection(own.getsockname(), timeout=5) as mine:
        assert socket_peer_owner(mine) == os.geteuid()
    default = AdbServerAddress("127.0.0.1", port, must_be_own=True)
    with pytest.raises(ForeignAdbServer):
        server_answers(default)
    assert server_answers(AdbServerAddress("127.0.0.1", port))  # named: used as named


def test_the_owner_of_a_unix_socket_server_is_its_peer_credential(tmp_path):
    path = tmp_path / "adb.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    with listener, AdbServerAddress(path=str(path), must_be_own=True).connect(5) as sock:
        assert socket_peer_owner(sock) == os.geteuid()
