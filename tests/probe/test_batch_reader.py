"""host/probe/batch_reader.py: one probe batch's stdout into per-scenario traces, the same whichever transport
brings it.

First the reader's rules on input a transport has already read: an `exit` closes its scenario and the lines
past it are the next one's, an `exit` for another scenario ends the batch, so does the probe's end before an
`exit`, and a flood or a silence past a scenario's wait stops the probe. Then the same hostile stdout through
both transports as each feeds it (the local probe's pipe, read in chunks of up to 64 KiB; shell v2 frames
from a stand-in adb server, cut mid-line and mid-character): both must hand on the same traces and end the
batch the same way."""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import pytest

from floor.limits import TraceLimits
from host.probe import BatchReader, Finished, ProbeEnded, Silent, api_missing_line, run_batch
from host.targets.adb.streaming import BatchRunner
from host.targets.adb.transport import DeviceTransport
from host.targets.adb_clients import KitLink
from host.targets.adb_host import AdbServerAddress
from reference_model.trace import exit_line

A, B = "t.a", "t.b"
LIMITS = TraceLimits(line_bytes=1 << 20, scenario_bytes=16 << 20, scenario_lines=200_000, stderr_bytes=1 << 20)


def begin(scenario):
    return json.dumps({"ev": "begin", "scenario": scenario, "pid": 1, "t": 1}, separators=(",", ":"))


def exit_of(scenario):
    return exit_line(scenario, "ok", host=False, t=2)


NOTE = '{"ev":"settle","what":"alloc","t":3}'


def ok(*texts):
    return [(text, None) for text in texts]


class Scripted:
    """A transport whose reads are `items`, then nothing, or (`flood`) the same line for ever."""

    def __init__(self, *items, flood=None):
        self.items = deque(items)
        self.flood = flood
        self.stopped = 0

    def next_lines(self, deadline):
        if self.items:
            return self.items.popleft()
        if self.flood is not None:
            return [(self.flood, None)]
        return None

    def stop(self):
        self.stopped += 1


def read(stdout, ids=(A, B), wait_s=5.0, limits=LIMITS):
    traces, closed = [], []
    reader = BatchReader(ids, [wait_s] * len(ids), traces.append, limits, on_closed=closed.append)
    end = reader.read(stdout, time.monotonic())
    assert closed == reader.closed
    return end, traces, reader.closed


# ---------------------------------------------------------------------------------------------
# the reader's rules


def test_an_exit_closes_its_scenario_and_the_lines_past_it_are_the_next_ones():
    stdout = Scripted(ok(begin(A), NOTE, exit_of(A), begin(B)), ok(NOTE), ok(exit_of(B), "after the last exit"))
    end, traces, closed = read(stdout)
    assert end == Finished() and closed == [A, B] and stdout.stopped == 0
    assert [(t.scenario_id, t.lines, t.infra_error) for t in traces] == [
        (A, (begin(A), NOTE, exit_of(A)), None),
        (B, (begin(B), NOTE, exit_of(B)), None),
    ]


def test_a_line_with_a_problem_is_left_out_and_makes_its_scenario_error_only():
    stdout = Scripted([(begin(A), None), ("\ufffd", "not UTF-8"), (exit_of(A), None)], ok(begin(B), exit_of(B)))
    end, traces, closed = read(stdout)
    assert end == Finished() and closed == [A, B]
    assert [(t.lines, t.infra_error) for t in traces] == [
        ((begin(A), exit_of(A)), "not UTF-8"),
        ((begin(B), exit_of(B)), None),
    ]


def test_an_exit_for_another_scenario_ends_the_batch_out_of_step():
    stdout = Scripted(ok(begin(A), exit_of(B), begin(B), exit_of(B)))
    end, traces, closed = read(stdout)
    error = f"probe reported scenario {B!r} where {A!r} was expected: the probe is out of step"
    assert end == Finished(error=error) and closed == [] and stdout.stopped == 1
    assert [(t.scenario_id, t.lines, t.infra_error) for t in traces] == [(A, (begin(A), exit_of(B)), error)]


def test_the_probe_ending_before_an_exit_is_error_with_its_status_and_last_stderr_line():
    stdout = Scripted(ok(begin(A), exit_of(A), begin(B), NOTE), ProbeEnded(3, "starting\nboom\n"))
    end, traces, closed = read(stdout)
    error = "probe process ended unexpectedly (exit status 3): boom"
    assert end == Finished(error=error) and closed == [A] and stdout.stopped == 0
    assert (traces[-1].scenario_id, traces[-1].lines, traces[-1].infra_error) == (B, (begin(B), NOTE), error)


def test_a_line_problem_names_the_error_when_the_probe_ends_before_the_exit():
    stdout = Scripted([(begin(A), None), ("x", "a line too long")], ProbeEnded(None, ""))
    end, traces, _ = read(stdout)
    assert end == Finished(error="a line too long") and traces[0].infra_error == "a line too long"


def test_missing_functions_end_the_batch_with_no_trace_handed_on():
    stdout = Scripted(ok(api_missing_line(["ANpuBuffer_free"])), ProbeEnded(4, ""))
    end, traces, closed = read(stdout)
    assert end == Finished(api_missing=("ANpuBuffer_free",)) and traces == [] and closed == []


def test_a_flood_ends_at_its_wait_even_while_lines_keep_coming():
    limits = TraceLimits(line_bytes=1 << 20, scenario_bytes=16 << 20, scenario_lines=3, stderr_bytes=1 << 20)
    stdout = Scripted(ok(begin(A), exit_of(A)), flood=NOTE)
    started = time.monotonic()
    end, traces, closed = read(stdout, wait_s=0.3, limits=limits)
    assert time.monotonic() - started < 5
    assert isinstance(end, Finished) and end.error is not None and closed == [A] and stdout.stopped == 1
    assert "trace_lines=" in end.error and "killed after 0.3 s without the scenario's exit" in end.error
    assert (traces[-1].scenario_id, traces[-1].lines, traces[-1].infra_error) == (B, (NOTE,) * 3, end.error)


def test_silence_past_the_wait_stops_the_probe_and_leaves_the_trace_to_the_transport():
    stdout = Scripted(ok(begin(A), exit_of(A), begin(B)))
    end, traces, closed = read(stdout, wait_s=0.2)
    assert isinstance(end, Silent) and closed == [A] and stdout.stopped == 1
    assert (end.scenario_id, end.lines, end.wait_s) == (B, (begin(B),), 0.2)
    assert [t.scenario_id for t in traces] == [A]


def test_every_scenario_has_a_wait():
    with pytest.raises(ValueError):
        BatchReader([A, B], [1.0], lambda trace: None, LIMITS)


# ---------------------------------------------------------------------------------------------
# the same hostile stdout through both transports


@dataclass(frozen=True)
class Case:
    stdout: bytes
    errors: dict[str, str | None]  # scenario -> a part of its trace's error (None: no error), in order
    completed: tuple[str, ...] = (A, B)
    batch_error: str | None = None
    api_missing: tuple[str, ...] | None = None
    status: int = 0
    stderr: bytes = b""
    env: dict[str, str] = field(default_factory=dict)


def lines(*texts, end=b"\n"):
    return b"\n".join(t.encode() if isinstance(t, str) else t for t in texts) + end


CASES = {
    "oversized-line": Case(lines(begin(A), b"x" * 500, exit_of(A), begin(B), exit_of(B)),
                           {A: "trace_line_bytes=200", B: None}, env={"NPUCONF_LIMIT_TRACE_LINE_BYTES": "200"}),
    "not-utf8": Case(lines(begin(A), b'{"ev":"settle","what":"\xe2\x82\xff"}', exit_of(A), begin(B), exit_of(B)),
                     {A: "not valid UTF-8", B: None}),
    "utf8-cut-by-frames": Case(lines(begin(A), '{"ev":"settle","what":"€€€€"}', exit_of(A), begin(B), exit_of(B)),
                               {A: None, B: None}),
    "too-many-lines": Case(lines(begin(A), *[NOTE] * 20, exit_of(A), begin(B), exit_of(B)),
                           {A: "trace_lines=5", B: None}, env={"NPUCONF_LIMIT_TRACE_LINES": "5"}),
    "missing-exit": Case(lines(begin(A), exit_of(A), begin(B), NOTE), {A: None, B: "(exit status 3): boom"},
                         completed=(A,), batch_error="(exit status 3): boom", status=3, stderr=b"starting\nboom\n"),
    "exit-of-another": Case(lines(begin(A), exit_of("t.c"), begin(B), exit_of(B)), {A: "out of step"},
                            completed=(), batch_error="out of step"),
    "lines-after-exit": Case(lines(begin(A), exit_of(A), "stray", begin(B), exit_of(B), "after the last exit"),
                             {A: None, B: None}),
    "ends-mid-line-at-its-exit": Case(lines(begin(A), exit_of(A), begin(B), exit_of(B), end=b""), {A: None, B: None}),
    "ends-mid-line": Case(lines(begin(A), exit_of(A), begin(B), '{"ev":"set', end=b""),
                          {A: None, B: "(exit status 0): no message"}, completed=(A,),
                          batch_error="(exit status 0): no message"),
    "api-missing": Case(lines(api_missing_line(["ANpuBuffer_free", "ANpuBuffer_Type"])), {}, completed=(),
                        api_missing=("ANpuBuffer_free", "ANpuBuffer_Type"), status=4),
}  # fmt: skip

_LOCAL_PROBE = """
import sys
stdout, stderr, status = sys.argv[1:4]
sys.stdout.buffer.write(open(stdout, "rb").read())
sys.stdout.flush()
sys.stderr.buffer.write(open(stderr, "rb").read())
sys.stderr.flush()
sys.exit(int(status))
"""

HEADER = struct.Struct("<BI")  # shell v2: id (1 stdout, 2 stderr, 3 exit), length


def _recv_exact(conn, size):
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


class StandInDevice:
    """An adb server whose one device answers the probe's shell with `frames`, and any other shell (the
    kill of a probe given up on) with exit 0."""

    def __init__(self, frames):
        self.frames = frames
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.address = AdbServerAddress("127.0.0.1", self.listener.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                service = ""
                for _ in range(2):  # host:transport:SERIAL, then the service
                    service = _recv_exact(conn, int(_recv_exact(conn, 4), 16)).decode()
                    conn.sendall(b"OKAY")
                probe = service.startswith("shell,v2,raw:") and "./npuconf-probe " in service
                conn.sendall(self.frames if probe else HEADER.pack(3, 1) + b"\0")
                conn.settimeout(10)
                while conn.recv(4096):  # until the host closes
                    pass
            except OSError:
                pass

    def close(self):
        self.listener.close()


class _NoPush(KitLink):
    def push(self, adb_serial, files, mode, timeout, cancel=None):
        """The program's push is not what is read here."""


def frames(case, size):
    out = b"".join(HEADER.pack(1, len(piece)) + piece for piece in
                   (case.stdout[i : i + size] for i in range(0, len(case.stdout), size)))  # fmt: skip
    if case.stderr:
        out += HEADER.pack(2, len(case.stderr)) + case.stderr
    return out + HEADER.pack(3, 1) + bytes([case.status])


def program(ids):
    return "npuconf-program 1\n" + "".join(f"scenario {s}\nend\n" for s in ids)


def seen(traces, outcome):
    """What a batch handed on and how it ended, without the timings."""
    return ([(t.scenario_id, t.lines, t.infra_error, t.timed_out) for t in traces],
            (outcome.completed, outcome.api_missing, outcome.error))  # fmt: skip


def through_local(case, tmp_path):
    (tmp_path / "stdout").write_bytes(case.stdout)
    (tmp_path / "stderr").write_bytes(case.stderr)
    command = [sys.executable, "-c", _LOCAL_PROBE, str(tmp_path / "stdout"), str(tmp_path / "stderr"), str(case.status)]
    traces = []
    outcome = run_batch(command, program([A, B]), [A, B], [5.0, 5.0], traces.append)
    return seen(traces, outcome)


def through_adb(case, frame_bytes):
    device = StandInDevice(frames(case, frame_bytes))
    try:
        transport = DeviceTransport(device.address, "standin", "standin", link=_NoPush(device.address))
        traces = []
        outcome = BatchRunner(transport, False, 1.0, 0).run_batch(program([A, B]), [A, B], [5.0, 5.0], traces.append)
        return seen(traces, outcome)
    finally:
        device.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_both_transports_hand_on_the_same_traces(name, tmp_path, monkeypatch):
    case = CASES[name]
    for variable, value in case.env.items():
        monkeypatch.setenv(variable, value)
    local = through_local(case, tmp_path)
    traces, (completed, api_missing, error) = local
    assert [t[0] for t in traces] == list(case.errors)
    for (_, _, trace_error, timed_out), expected in zip(traces, case.errors.values(), strict=True):
        assert timed_out is None
        assert trace_error is None if expected is None else expected in (trace_error or ""), (trace_error, expected)
    assert (completed, api_missing) == (case.completed, case.api_missing)
    assert error is None if case.batch_error is None else case.batch_error in (error or ""), error
    # shell v2 frames of 7 bytes cut lines and characters; one frame holds them whole
    for frame_bytes in (7, 1 << 16):
        assert through_adb(case, frame_bytes) == local, frame_bytes
