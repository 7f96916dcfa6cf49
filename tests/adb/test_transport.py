"""The virtual devices through Debian's real adb server: the adb CLI, adbutils, and the kit's two clients
(host/targets/adb_clients.py) against the same devices on a server listening on a TCP port."""

import os
import time

import adbutils
import pytest

from host.probe import Pairs, compile_program, compile_scenario
from host.run import prepare_device
from host.suite import load_catalogue, load_corpus
from host.targets.adb import AdbTarget
from host.targets.adb.transport import DeviceTransport
from host.targets.adb_clients import AdbutilsLink, KitLink, link_for
from host.targets.adb_host import AdbServerError
from host.targets.virtual_device import free_port, start_fleet, stop_fleet
from tests.adb.conftest import adb_cli, assert_stopped, slow_corpus

pytestmark = pytest.mark.slow

LINKS = {"adbutils": AdbutilsLink, "kit": KitLink}


@pytest.fixture(scope="module")
def tcp_fleet(tmp_path_factory, probe_build):
    """Two virtual devices behind an adb server on a loopback TCP port, as a phone lab's server would be."""
    fleet = start_fleet(2, tmp_path_factory.mktemp("tcp-fleet"), adb_port=free_port())
    yield fleet
    stop_fleet(fleet)
    assert_stopped([fleet.server.pid, *(d.pid for d in fleet.devices)])


@pytest.fixture(scope="module")
def devices(tcp_fleet):
    server = tcp_fleet.server.address
    client = adbutils.AdbClient(host=server.host, port=server.port)  # the public API, as the adb target uses it
    return [client.device(serial=d.adb_serial) for d in tcp_fleet.devices]


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


def test_timeout_closes_the_stream_and_kills_the_command(devices, tcp_fleet):
    device = devices[0]
    marker = tcp_fleet.devices[0].root / "data" / "local" / "tmp" / "late"
    started = time.monotonic()
    with pytest.raises(adbutils.AdbTimeout):
        device.shell2("sleep 3; touch /data/local/tmp/late", v2=True, timeout=0.5)
    assert time.monotonic() - started < 2
    time.sleep(3.2)
    assert not marker.exists(), "the command should have been killed when the stream closed"


def test_the_run_talks_to_a_tcp_server_through_adbutils_and_to_a_socket_through_its_own_client(fleet, tcp_fleet):
    assert isinstance(link_for(tcp_fleet.server.address), AdbutilsLink)
    assert isinstance(link_for(fleet.server.address), KitLink)  # the private fleet's unix socket


@pytest.mark.parametrize("client", sorted(LINKS))
def test_both_clients_run_shell_v2_push_and_list_the_same_devices(tcp_fleet, client):
    """Shell v2 with the exit status and the two streams apart, a push seen by the shell, the device list,
    and an unknown device refused, through each client on the same server and devices."""
    server = tcp_fleet.server.address
    link = LINKS[client](server)
    assert link.answers(1.0)
    assert {d.adb_serial for d in tcp_fleet.devices} <= set(link.device_states())
    device = tcp_fleet.devices[0]
    transport = DeviceTransport(server, device.adb_serial, device.name, link=link)
    done = transport.shell("echo out; echo err >&2; exit 5")
    assert (done.returncode, done.stdout, done.stderr) == (5, "out\n", "err\n")
    assert sorted(done.output.splitlines()) == ["err", "out"]
    transport.push_all({f"/data/local/tmp/{client}/p.txt": b"pushed\n", f"/data/local/tmp/{client}/q": b"q"}, 0o644)
    assert transport.shell(f"cat /data/local/tmp/{client}/p.txt /data/local/tmp/{client}/q").stdout == "pushed\nq"
    with pytest.raises((AdbServerError, adbutils.AdbError)):
        link.shell("127.0.0.1:1", "true", 5.0)


def test_both_clients_give_the_same_verdicts_on_the_same_devices(tcp_fleet, tmp_path):
    """A batch of scenarios streamed from the probe through each client, on the same two devices of one
    TCP server: the same traces' outcomes."""
    scenarios = slow_corpus(tmp_path / "scenarios", count=4, sleep_ms=20)
    corpus = load_corpus(scenarios, known_clauses=load_catalogue().ids())
    program = compile_program([compile_scenario(s, Pairs(None, None)) for s in corpus])
    ids = [s.id for s in corpus]
    seen = {}
    for client, device in zip(sorted(LINKS), tcp_fleet.devices, strict=True):
        target = AdbTarget(tcp_fleet.server.address, device.adb_serial, serial=device.name)
        target.transport = DeviceTransport(target.server, device.adb_serial, device.name, link=LINKS[client](
            target.server))
        prepare_device(target)
        traces = []
        assert target.run_batch(program, ids, [7.0] * len(ids), traces.append).error is None
        seen[client] = [(t.scenario_id, t.infra_error, t.timed_out, t.lines[-1].split('"status":')[1][:5])
                        for t in traces]
    assert seen["adbutils"] == seen["kit"] and len(seen["kit"]) == len(ids), seen


def test_a_run_on_a_tcp_adb_server_goes_through_adbutils(tcp_fleet, tmp_path):
    """`npuconf run --target adb --adb-server 127.0.0.1:PORT`: the phone path, on virtual devices."""
    from tests.conftest import npuconf

    server = tcp_fleet.server.address
    done = npuconf("run", "--target", "adb", "--adb-server", f"{server.host}:{server.port}", "-k", "free.empty_list",
                   "--out", tmp_path / "run", "-q", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdicts: PASS 4" in done.stdout, done.stdout  # two scenarios on each of the two devices


def test_the_kits_client_refuses_an_oversized_shell_packet(fleet):
    """The kit's client bounds what it reads: a shell v2 packet longer than adb's own payloads is refused
    before it is read (host/targets/adb_clients.py MAX_V2_PACKET)."""
    from host.targets.adb_clients import MAX_V2_PACKET, v2_length

    assert v2_length(MAX_V2_PACKET) == MAX_V2_PACKET
    with pytest.raises(AdbServerError, match="shell v2 packet"):
        v2_length(MAX_V2_PACKET + 1)
    device = fleet.devices[0]
    done = KitLink(fleet.server.address).shell(device.adb_serial, "head -c 3000000 /dev/zero | tr '\\0' x", 10.0)
    assert done.returncode == 0 and len(done.stdout) == 3_000_000  # big outputs come in many packets
