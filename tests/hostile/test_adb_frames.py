"""A device's shell v2 frames through the kit's adb client (issue 39): a frame header is the device's word,
so nothing it announces is allocated before the bytes arrive, and a call that outlived its bound leaves no
reader thread behind reading on. The device is a stand-in adb server speaking the host protocol."""

from __future__ import annotations

import socket
import struct
import threading
import time
import tracemalloc

import pytest

from host.targets.adb.streaming import StreamBroken, _ProbeStream
from host.targets.adb.transport import DeviceLost, DeviceTransport, bounded, shell_v2
from host.targets.adb_clients import MAX_V2_PACKET, AdbutilsLink, Cancel, KitLink
from host.targets.adb_host import AdbServerAddress, AdbServerError

HEADER = struct.Struct("<BI")


class HostileDevice:
    """An adb server whose one device answers every shell with `behave(connection)`."""

    def __init__(self, behave):
        self.behave = behave
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.address = AdbServerAddress("127.0.0.1", self.listener.getsockname()[1])
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                for _ in range(2):  # host:transport:SERIAL, then the service
                    length = int(conn.recv(4), 16)
                    conn.recv(length)
                    conn.sendall(b"OKAY")
                self.behave(conn, self.stop)
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.listener.close()


@pytest.fixture
def device():
    made = []

    def make(behave):
        made.append(HostileDevice(behave))
        return made[-1]

    yield make
    for one in made:
        one.close()


def announcing(size):
    """A device whose one frame announces `size` bytes and sends 1000 before it hangs up."""

    def behave(conn, stop):
        conn.sendall(HEADER.pack(1, size) + b"x" * 1000)

    return behave


# A frame past adb's own payloads is refused at its header; one within them is read in pieces as they
# arrive: neither allocates what the header announces. Which client reads the frame is the server's
# (adb_clients.link_for: these stand-ins listen on TCP, as a phone's server does): each is asked here.
FRAMES = [
    pytest.param(256 << 20, AdbServerError, 8 << 20, id="256MiB-refused-at-its-header"),
    pytest.param(MAX_V2_PACKET, OSError, MAX_V2_PACKET // 2, id="1MiB-read-in-pieces"),
]


@pytest.mark.parametrize(("announced", "raised", "peak_at_most"), FRAMES)
@pytest.mark.parametrize("client", ["adbutils", "kit"])
def test_a_frame_announcing_more_than_it_sends_allocates_nothing_of_it(device, announced, raised, peak_at_most,
                                                                        client):
    server = device(announcing(announced))
    link = AdbutilsLink(server.address) if client == "adbutils" else KitLink(server.address)
    if client == "adbutils":
        link.client()  # adbutils imported before memory is counted
    tracemalloc.start()
    try:
        with pytest.raises(raised):
            link.shell("hostile", "getprop", 5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < peak_at_most, peak


def test_a_frame_announcing_256_mib_allocates_nothing_of_it(device):
    server = device(announcing(256 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(AdbServerError, match="shell v2 packet of 268435456 bytes"):
            shell_v2(server.address, "hostile", "getprop", 5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


@pytest.mark.parametrize("announced", [256 << 20, MAX_V2_PACKET], ids=["256MiB", "1MiB"])
def test_a_probe_stream_frame_announcing_more_than_it_sends_allocates_nothing_of_it(device, announced):
    server = device(announcing(announced))
    transport = DeviceTransport(server.address, "hostile", "hostile")
    tracemalloc.start()
    try:
        stream = _ProbeStream(transport, "./npuconf-probe run/x.prog")
        with pytest.raises(StreamBroken):
            while stream.next_lines(time.monotonic() + 10) is not None:
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def trickle(conn, stop):
    conn.sendall(HEADER.pack(1, 1 << 20))
    while not stop.is_set():
        conn.sendall(b"y")  # one byte at a time, each well within the read timeout
        time.sleep(0.05)


LINKS = {"adbutils": AdbutilsLink, "kit": KitLink}


@pytest.mark.parametrize("client", sorted(LINKS))
def test_a_shell_call_past_its_bound_leaves_no_reader_thread(device, client):
    server = device(trickle)
    transport = DeviceTransport(server.address, "hostile", "hostile", link=LINKS[client](server.address))
    started = time.monotonic()
    with pytest.raises(DeviceLost, match="no answer within"):
        transport.shell("getprop", timeout=1.0)
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    assert not [t for t in threading.enumerate() if t.name == "adb-getprop" and t.is_alive()]


@pytest.mark.parametrize("client", sorted(LINKS))
def test_a_timed_out_push_leaves_no_reader_thread(device, client):
    """A bound the caller keeps shorter than the call's own (BatchRunner's first push): the Cancel breaks
    the connection, so the push's thread stops at once instead of waiting for the device."""
    server = device(lambda conn, stop: stop.wait(30))  # takes the sync session, never answers a SEND
    transport = DeviceTransport(server.address, "hostile", "hostile", link=LINKS[client](server.address))
    cancel = Cancel()
    with pytest.raises(TimeoutError):
        bounded(lambda: transport.sync_send(b"p" * 1000, "/data/local/tmp/p", 0o644, 30.0, cancel), 0.5, "push",
                cancel)  # fmt: skip
    time.sleep(0.5)
    assert not [t for t in threading.enumerate() if t.name == "adb-push" and t.is_alive()]


@pytest.mark.parametrize("client", sorted(LINKS))
def test_a_shell_call_ends_at_its_own_deadline_however_the_device_trickles(device, client):
    server = device(trickle)
    link = LINKS[client](server.address)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        link.shell("hostile", "getprop", 1.0)
    assert time.monotonic() - started < 3
    with pytest.raises(TimeoutError):
        shell_v2(server.address, "hostile", "getprop", 1.0)  # the client the server's address picks
    assert time.monotonic() - started < 6
