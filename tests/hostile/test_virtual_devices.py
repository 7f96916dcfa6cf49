"""Virtual devices face local users: AUTH with the run's key only, loopback ports, an unprivileged shell,
a device filesystem that symlinks cannot leave, and no leftovers after the host is killed."""

import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, utils

from host.targets.adb import AdbServerAddress
from host.targets.virtual_device import adb_env, pid_runs, read_state
from host.targets.virtual_device.adb_server import server_markers
from host.targets.virtual_device.auth import decode_adb_public_key, encode_adb_public_key
from host.targets.virtual_device.protocol import A_AUTH, A_CNXN, A_OPEN, HEADER, Message, encode
from tests.adb.conftest import adb_cli, npuconf_popen
from tests.conftest import wait_until
from tests.hostile.conftest import ROOT, cli, text

pytestmark = pytest.mark.slow

HOST_CNXN = Message(A_CNXN, 0x01000001, 1 << 20, b"host::features=shell_v2")


def _read(sock, timeout=2.0):
    sock.settimeout(timeout)
    header = b""
    while len(header) < HEADER.size:
        chunk = sock.recv(HEADER.size - len(header))
        if not chunk:
            raise ConnectionError("closed")
        header += chunk
    command, arg0, arg1, length, _, _ = HEADER.unpack(header)
    data = b""
    while len(data) < length:
        data += sock.recv(length - len(data))
    return Message(command, arg0, arg1, data)


def _connect(device):
    sock = socket.create_connection(("127.0.0.1", device.port), timeout=5)
    sock.sendall(encode(HOST_CNXN, with_checksum=False))
    return sock


def _silent(sock, seconds=1.0):
    try:
        _read(sock, seconds)
    except TimeoutError:
        return True
    return False


def test_a_raw_connection_gets_a_token_and_no_shell(fleet_factory):
    device = fleet_factory(1).fleet.devices[0]
    with _connect(device) as sock:
        token = _read(sock)
        assert (token.command, token.arg0, len(token.data)) == (A_AUTH, 1, 20)
        sock.sendall(encode(Message(A_OPEN, 1, 0, b"shell:id\0"), with_checksum=False))
        assert _silent(sock)


def test_a_wrong_signature_gets_a_new_token_and_a_public_key_gets_nothing(fleet_factory):
    device = fleet_factory(1).fleet.devices[0]
    with _connect(device) as sock:
        first = _read(sock)
        sock.sendall(encode(Message(A_AUTH, 2, 0, b"\1" * 256), with_checksum=False))
        second = _read(sock)
        assert second.command == A_AUTH and second.arg0 == 1 and second.data != first.data
        sock.sendall(encode(Message(A_AUTH, 3, 0, b"QUFBQQ== evil@host\0"), with_checksum=False))
        assert _silent(sock)


def test_the_runs_key_signs_the_token_and_the_device_goes_online(fleet_factory):
    supervisor = fleet_factory(1)
    device, home = supervisor.fleet.devices[0], supervisor.fleet.server.home
    key = serialization.load_pem_private_key((home / ".android" / "adbkey").read_bytes(), None)
    assert oct((home / ".android" / "adbkey").stat().st_mode & 0o777) == "0o600"
    with _connect(device) as sock:
        token = _read(sock)
        signature = key.sign(token.data, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
        sock.sendall(encode(Message(A_AUTH, 2, 0, signature), with_checksum=False))
        reply = _read(sock)
        assert reply.command == A_CNXN and reply.data.startswith(b"device::")


def test_adb_public_key_format_round_trips(fleet_factory):
    home = fleet_factory(1).fleet.server.home
    text_key = (home / ".android" / "adbkey.pub").read_text()
    public = decode_adb_public_key(text_key)
    private = serialization.load_pem_private_key((home / ".android" / "adbkey").read_bytes(), None)
    assert public.public_numbers() == private.public_key().public_numbers()
    assert encode_adb_public_key(public).split()[0] == text_key.split()[0]


def test_another_adb_server_sees_the_device_unauthorized(fleet_factory, tmp_path):
    device = fleet_factory(1).fleet.devices[0]
    from host.targets.virtual_device import free_port

    port = free_port()
    home = tmp_path / "intruder-home"
    (home / ".android").mkdir(parents=True)
    env = adb_env(AdbServerAddress("127.0.0.1", port), home)
    server = subprocess.Popen(["adb", "-P", str(port), "nodaemon", "server"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: subprocess.run(["adb", "-P", str(port), "devices"], env=env, capture_output=True,
                                          check=False).returncode == 0, 10, "intruder server")
        subprocess.run(["adb", "-P", str(port), "connect", f"127.0.0.1:{device.port}"], env=env,
                       capture_output=True, check=False, timeout=10)
        time.sleep(1.0)
        listing = subprocess.run(["adb", "-P", str(port), "devices"], env=env, capture_output=True, text=True,
                                 check=False).stdout
        assert f"127.0.0.1:{device.port}\tunauthorized" in listing
        shell = subprocess.run(["adb", "-P", str(port), "-s", f"127.0.0.1:{device.port}", "shell", "id"], env=env,
                               capture_output=True, text=True, check=False, timeout=10)
        assert shell.returncode != 0 and "uid=" not in shell.stdout
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _listening_addresses(port):
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in list(handle)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if int(hex_port, 16) == port and state == "0A":
                    found.append(address)
    return found


def test_devices_listen_on_loopback_only_and_the_adb_server_on_no_port(fleet_factory):
    fleet = fleet_factory(1).fleet
    addresses = _listening_addresses(fleet.devices[0].port)
    assert addresses and all(a in ("0100007F", "00000000000000000000000001000000") for a in addresses), addresses
    assert fleet.server.address.is_unix  # a unix socket in a private directory (test_local_user_attacks.py)


def test_shell_commands_never_run_as_root(fleet_factory):
    fleet = fleet_factory(1).fleet
    done = adb_cli(fleet, "-s", fleet.devices[0].adb_serial, "shell", "id -u; touch /data/local/tmp/mine && "
                   "stat -c %u /data/local/tmp/mine; cat /proc/1/environ >/dev/null 2>&1 && echo READ-PID1; true")
    lines = done.stdout.split()
    assert done.returncode == 0, done.stderr
    uid = int(lines[0])
    assert uid != 0 and int(lines[1]) == uid and "READ-PID1" not in lines


def test_push_through_a_symlink_leading_out_of_the_device_is_refused(fleet_factory, tmp_path):
    fleet = fleet_factory(1).fleet
    serial = fleet.devices[0].adb_serial
    outside = tmp_path / "outside"
    outside.mkdir()
    outside.chmod(0o777)
    made = adb_cli(fleet, "-s", serial, "shell", f"ln -s {outside} /data/local/tmp/escape && echo made")
    assert "made" in made.stdout, made.stderr
    payload = tmp_path / "payload"
    payload.write_text("owned\n")
    pushed = adb_cli(fleet, "-s", serial, "push", str(payload), "/data/local/tmp/escape/dropped")
    assert pushed.returncode != 0
    # refused by the path check, or (the device being the shell user) by the directories above tmp_path
    said = pushed.stdout + pushed.stderr
    assert "outside the device filesystem" in said or "Permission denied" in said, said
    assert list(outside.iterdir()) == []


def test_pull_through_a_symlink_leading_out_of_the_device_is_refused(fleet_factory, tmp_path):
    fleet = fleet_factory(1).fleet
    serial = fleet.devices[0].adb_serial
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    adb_cli(fleet, "-s", serial, "shell", f"ln -s {secret} /data/local/tmp/leak")
    pulled = adb_cli(fleet, "-s", serial, "pull", "/data/local/tmp/leak", str(tmp_path / "got"))
    assert pulled.returncode != 0
    assert not (tmp_path / "got").exists()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the device drops to the shell user only when run as root")


def _ids(pid):
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = {line.split(":")[0]: line.split(":")[1].split() for line in status if ":" in line}
    return [int(v) for v in fields["Uid"]], [int(v) for v in fields["Gid"]], fields["Groups"]


@needs_root
def test_the_device_process_itself_runs_as_the_shell_user(fleet_factory):
    fleet = fleet_factory(1).fleet
    uids, gids, groups = _ids(fleet.devices[0].pid)
    assert 0 not in uids and 0 not in gids and groups == [], (uids, gids, groups)


@needs_root
def test_a_root_only_file_linked_into_the_device_cannot_be_pulled(fleet_factory, tmp_path):
    # A hard link needs no symlink and passes every path check: only the device's own identity keeps
    # it out, as it keeps out whatever a check-then-open race (renameat2 RENAME_EXCHANGE) swaps in.
    fleet = fleet_factory(1).fleet
    device = fleet.devices[0]
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    os.link(secret, device.root / "data/local/tmp/linked")
    pulled = adb_cli(fleet, "-s", device.adb_serial, "pull", "/data/local/tmp/linked", str(tmp_path / "got"))
    assert pulled.returncode != 0, pulled.stdout
    assert not (tmp_path / "got").exists()


def test_pushed_files_and_the_device_data_are_the_runs_alone(fleet_factory, tmp_path):
    fleet = fleet_factory(1).fleet
    device = fleet.devices[0]
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\necho ran\n")
    tool.chmod(0o777)
    pushed = adb_cli(fleet, "-s", device.adb_serial, "push", str(tool), "/data/local/tmp/tool")
    assert pushed.returncode == 0, pushed.stderr
    assert (device.root / "data/local/tmp/tool").stat().st_mode & 0o777 == 0o700
    for top in ("data", "sdcard"):
        assert (device.root / top).stat().st_mode & 0o077 == 0, top
    # the device's profile lives in the device's own directory, not beside it in a shared /tmp
    assert (device.root.parent / "profile.json").is_file()
    ran = adb_cli(fleet, "-s", device.adb_serial, "shell", "/data/local/tmp/tool")
    assert ran.stdout.strip() == "ran", ran.stderr


def test_no_device_profile_goes_to_the_shared_temporary_directory(fleet_factory):
    name = f"virtual-{secrets.token_hex(4)}"
    device = fleet_factory(1, names=[name]).fleet.devices[0]
    shared = Path(tempfile.gettempdir())
    assert not (shared / f"{name}.profile.json").exists()
    assert [p for p in shared.glob("*.profile.json") if name in p.name] == []
    assert (device.root.parent / "profile.json").is_file()  # the device's own directory


def test_fleet_of_a_killed_run_is_stopped_by_the_next_run(tmp_path, probe_build):
    state = {"NPUCONF_STATE_DIR": str(tmp_path / "host-state")}
    run_dir = tmp_path / "run"
    process = npuconf_popen("run", "--target", "virtual", "-k", "requests", "--out", run_dir, "-q",
                            env=dict(os.environ, **state))
    state_file = run_dir / "virtual-devices" / "virtual-devices.json"
    try:
        wait_until(lambda: state_file.is_file() and (run_dir / "results.jsonl").is_file(), 60, "the fleet")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    fleet = read_state(state_file)
    pids = [fleet.server.pid, *(d.pid for d in fleet.devices)]
    assert any(pid_runs(pid) for pid in pids)  # left behind by the kill
    done = cli("run", "--resume", run_dir, "-q", env=state)
    assert done.returncode == 0, text(done)
    time.sleep(0.2)
    assert [pid for pid in pids if pid_runs(pid, str(ROOT)) or pid_runs(pid, *server_markers(fleet.server))] == []
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["answer"] == "partial" and summary["exit_code"] == 0  # -k requests: nothing failed
    assert not any(Path(tmp_path / "host-state" / "fleets").glob("*.json"))


def test_abi_string_leading_outside_is_an_error_never_a_path(tmp_path, fleet_factory):
    from tests.adb.conftest import device_profile

    profile = device_profile("virtual-1", **{"ro.product.cpu.abilist": "../../../../tmp/evil-abi"})
    server = fleet_factory(1, profiles=[profile]).fleet.server.address
    run_dir = tmp_path / "run"
    done = cli("run", "--target", "adb", "--adb-server", server, "-k", "support.empty_list",
               "--out", run_dir, "-q", env={"NPUCONF_STATE_DIR": str(tmp_path / "state")}, timeout=120)
    assert done.returncode == 2, text(done)
    (result,) = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()
                 if json.loads(line)["kind"] == "result"]
    assert result["verdict"] == "ERROR"
    assert "ABI '../../../../tmp/evil-abi' is not a safe name" in result["reason"]
    assert not Path("/tmp/evil-abi").exists()

