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

from host.targets.adb.streaming import _ProbeStream
from host.targets.adb.transport import DeviceLost, DeviceTransport, shell_v2
from host.targets.adb_host import AdbServerAddress

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


def huge_header_then_close(conn, stop):
    conn.sendall(HEADER.pack(1, 256 << 20) + b"x" * 1000)  # announces 256 MiB, sends 1000 bytes


def test_a_frame_announcing_256_mib_allocates_nothing_of_it(device):
    server = device(huge_header_then_close)
    tracemalloc.start()
    try:
        with pytest.raises(OSError):
            shell_v2(server.address, "hostile", "getprop", 5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_a_probe_stream_frame_announcing_256_mib_allocates_nothing_of_it(device):
    server = device(huge_header_then_close)
    transport = DeviceTransport(server.address, "hostile", "hostile")
    tracemalloc.start()
    try:
        stream = _ProbeStream(transport, "./npuconf-probe run/x.prog")
        event = stream.next_event(time.monotonic() + 10)
        while isinstance(event, tuple):
            event = stream.next_event(time.monotonic() + 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert event is not None and event.kind == "eof"
    assert peak < 8 << 20, peak


def trickle(conn, stop):
    conn.sendall(HEADER.pack(1, 1 << 20))
    while not stop.is_set():
        conn.sendall(b"y")  # one byte at a time, each well within the read timeout
        time.sleep(0.05)


def test_a_shell_call_past_its_bound_leaves_no_reader_thread(device):
    server = device(trickle)
    transport = DeviceTransport(server.address, "hostile", "hostile")
    started = time.monotonic()
    with pytest.raises(DeviceLost, match="no answer within"):
        transport.shell("getprop", timeout=1.0)
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    assert not [t for t in threading.enumerate() if t.name == "adb-getprop" and t.is_alive()]


def test_a_shell_call_ends_at_its_own_deadline_however_the_device_trickles(device):
    server = device(trickle)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        shell_v2(server.address, "hostile", "getprop", 1.0)
    assert time.monotonic() - started < 3
