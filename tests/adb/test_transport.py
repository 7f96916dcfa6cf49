"""The virtual devices through Debian's real adb server: the adb CLI and adbutils, end to end."""

import os
import time

import adbutils
import pytest

from host.targets import adb_client
from tests.adb.conftest import adb_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def devices(fleet):
    client = adb_client(fleet.server.address)
    return [client.device(serial=d.adb_serial) for d in fleet.devices]


def test_adb_devices_lists_the_virtual_devices(fleet):
    listing = adb_cli(fleet, "devices", "-l").stdout
    for device in fleet.devices:
        assert f"{device.adb_serial}" in listing
    assert listing.count(" device product:npuconf_vnpu model:vNPU device:vnpu") == 2
    assert adb_cli(fleet, "-s", fleet.devices[0].adb_serial, "features").stdout.split() == [
        "shell_v2", "stat_v2", "ls_v2", "fixed_push_mkdir"
    ]


def test_cli_shell_exit_codes_stdin_and_separate_stderr(fleet):
    serial = fleet.devices[0].adb_serial
    done = adb_cli(fleet, "-s", serial, "shell", "echo out; echo err >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert adb_cli(fleet, "-s", serial, "shell", "kill -9 $$").returncode == 137
    assert adb_cli(fleet, "-s", serial, "shell", input="exit 7\n").returncode == 7
    assert adb_cli(fleet, "-s", serial, "shell", "cat", input="piped\n").stdout == "piped\n"
    assert adb_cli(fleet, "-s", serial, "exec-out", "echo raw").stdout == "raw\n"


def test_adbutils_shell_shell2_getprop(devices):
    device = devices[0]
    assert device.shell("echo hi") == "hi"
    result = device.shell2("echo out; echo err >&2; exit 5", v2=True)
    assert (result.returncode, result.stdout, result.stderr) == (5, "out\n", "err\n")
    assert device.shell2("(exit 4)").returncode == 4  # v1: adbutils' exit marker
    assert device.getprop("ro.build.version.sdk") == "37"
    assert device.getprop("ro.product.cpu.abilist")
    assert device.prop.model == "vNPU"
    assert "feature:android.hardware.npu" in device.shell("pm list features")
    # the same answers from the generated stubs when the command is not a plain getprop
    assert device.shell("getprop ro.serialno; getprop ro.build.version.sdk").split() == ["virtual-1", "37"]


def test_push_pull_stat_list_and_consistent_paths(devices, tmp_path):
    device = devices[1]
    payload = os.urandom(300_000)
    device.sync.push(payload, "/data/local/tmp/t/blob.bin", mode=0o644)
    assert device.sync.read_bytes("/data/local/tmp/t/blob.bin") == payload
    info = device.sync.stat("/data/local/tmp/t/blob.bin")
    assert info.size == len(payload) and info.mode & 0o777 == 0o600  # owner bits only (docs/adb.md)
    assert "blob.bin" in [entry.path for entry in device.sync.list("/data/local/tmp/t")]
    assert not device.sync.exists("/data/local/tmp/t/missing")
    # the shell sees what sync wrote, under the same device path, and sync sees what the shell wrote
    assert device.shell("wc -c < /data/local/tmp/t/blob.bin") == str(len(payload))
    device.shell("echo from-shell > /sdcard/s.txt")
    assert device.sync.read_text("/storage/emulated/0/s.txt") == "from-shell\n"
    local = tmp_path / "pulled.bin"
    device.sync.pull("/data/local/tmp/t/blob.bin", local)
    assert local.read_bytes() == payload
    with pytest.raises(adbutils.AdbError):
        device.sync.read_bytes("/data/local/tmp/t/missing")


def test_cli_push_pull_directory(fleet, tmp_path):
    serial = fleet.devices[0].adb_serial
    tree = tmp_path / "tree" / "a"
    tree.mkdir(parents=True)
    (tree / "f").write_text("x")
    assert adb_cli(fleet, "-s", serial, "push", str(tmp_path / "tree"), "/sdcard/").returncode == 0
    assert adb_cli(fleet, "-s", serial, "shell", "cat /sdcard/tree/a/f").stdout == "x"
    assert adb_cli(fleet, "-s", serial, "pull", "/sdcard/tree", str(tmp_path / "back")).returncode == 0
    assert (tmp_path / "back" / "a" / "f").read_text() == "x"
    missing = adb_cli(fleet, "-s", serial, "pull", "/sdcard/nope", str(tmp_path / "n"))
    assert missing.returncode != 0 and "No such file" in missing.stdout + missing.stderr


def test_timeout_closes_the_stream_and_kills_the_command(devices, fleet):
    device = devices[0]
    marker = fleet.devices[0].root / "data" / "local" / "tmp" / "late"
    started = time.monotonic()
    with pytest.raises(adbutils.AdbTimeout):
        device.shell2("sleep 3; touch /data/local/tmp/late", v2=True, timeout=0.5)
    assert time.monotonic() - started < 2
    time.sleep(3.2)
    assert not marker.exists(), "the command should have been killed when the stream closed"


def test_the_kits_own_client_runs_shell_v2_and_pushes(fleet):
    """What a run uses (host/targets/adb/transport.py, no adbutils): shell v2 with the exit status and the
    two streams apart, a push seen by the shell, and a refused device named."""
    from host.targets.adb.transport import DeviceTransport, shell_v2
    from host.targets.adb_host import AdbServerError

    device = fleet.devices[0]
    transport = DeviceTransport(fleet.server.address, device.adb_serial, device.name)
    done = transport.shell("echo out; echo err >&2; exit 5")
    assert (done.returncode, done.stdout, done.stderr) == (5, "out\n", "err\n")
    assert sorted(done.output.splitlines()) == ["err", "out"]
    transport.push(b"pushed\n", "/data/local/tmp/own/p.txt", 0o644)
    assert transport.shell("cat /data/local/tmp/own/p.txt").stdout == "pushed\n"
    with pytest.raises(AdbServerError, match=r"127\.0\.0\.1:1"):
        shell_v2(fleet.server.address, "127.0.0.1:1", "true", 5.0)
