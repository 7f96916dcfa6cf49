"""`vnpu preempt_late=` (docs/vnpu.md §7): the buffer is preempted at once, as by `preempt=`, and only its
onPreempt comes PREEMPT_LATE_MS later than it would. Run through the real probe and libvnpu: the map made
between the command and the callback fails ENOENT, the callback comes at least that late, a malformed or
unpreemptable target is refused as `preempt=` refuses it, and the model judges the whole trace PASS. On a
device whose profile sets `preempt_late_quiet_ms` (fuzzing's) it comes once the API calls have stopped that long."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from host.probe import program_header
from reference_model.vocabulary import PREEMPT_LATE_MS
from tests.conftest import npuconf

SCENARIO = """\
id: preemption.late_command_in_the_probe
title: preempt_late= preempts at once and delivers onPreempt late
clauses: [preempt-map-enoent, preempt-window-before-callback]
requires: [supported-pair, vnpu-control]
steps:
  - req_create: {req: r}
  - req_set_device: {req: r, device: $pair.device}
  - req_set_type: {req: r, type: $pair.type}
  - req_set_size: {req: r, size: 4096}
  - req_set_onalloc: {req: r, set: true}
  - req_set_onpreempt: {req: r, set: true}
  - cookie_new: {cookie: c}
  - req_set_cookie: {req: r, cookie: c, deleter: true}
  - alloc: {reqs: [r]}
  - await_alloc: {count: 1, timeout_ms: 2000}
  - bind: {buf: b, select: {cookie: c}}
  - vnpu: {command: preempt_late=0xZZ}
  - vnpu: {command: preempt_late=b}
  - buf_map: {map: m, buf: b, length: 4096, prot: [READ], flags: [SHARED], offset: 0}
  - vnpu: {command: preempt_late=b}
  - vnpu: {command: preempt_late=lowest}
  - await_preempt: {count: 1, timeout_ms: 2000}
  - buf_free: {bufs: [b]}
"""


@pytest.mark.slow
@pytest.mark.parametrize(("personality", "map_answer"), [("published", (-1, "ENOENT")), ("aosp-2026", (0, None))])
def test_preempt_late_preempts_at_once_and_calls_back_late(tmp_path, probe_build, personality, map_answer):
    """The aosp-2026 vnpu maps a buffer whose preemption notice has not reached the client yet (discrepancy
    D24, docs/model.md §5; its onPreempt then comes while mapped, D14), judged under the aosp-2026 profile."""
    profile = "published-37" if personality == "published" else "aosp-2026"
    chapter = tmp_path / "scenarios" / "preemption"
    chapter.mkdir(parents=True)
    (chapter / "late.yaml").write_text(SCENARIO)
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--personality", personality, "--profile", profile,
                   "--scenarios", tmp_path / "scenarios",
                   "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (result,) = [r for r in records if r["kind"] == "result"]
    assert result["verdict"] == "PASS", result["reason"]
    events = [json.loads(line) for line in result["trace"]]
    rets = {e["step"]: e for e in events if e["ev"] == "ret" and not e.get("teardown")}
    calls = {e["step"]: e for e in events if e["ev"] == "call"}
    # steps 11..15: malformed, the preemption, the map, the same buffer again, lowest
    assert (rets[11]["ret"], rets[11]["errno"]) == (-1, "EINVAL")
    assert (rets[12]["ret"], rets[12]["errno"]) == (0, None)
    assert (rets[13]["ret"], rets[13]["errno"]) == map_answer  # preempted at once (the AOSP client: at the notice)
    assert (rets[14]["ret"], rets[14]["errno"]) == (-1, "ENOENT")  # already preempted
    assert (rets[15]["ret"], rets[15]["errno"]) == (-1, "ENOENT")  # nothing left to preempt
    (callback,) = [e for e in events if e["ev"] == "cb" and e["kind"] == "preempt"]
    assert callback["cookie"] == "c0"
    assert rets[13]["t"] < callback["t"]  # the map came before the callback
    late_ns = callback["t"] - calls[12]["t"]
    assert late_ns >= PREEMPT_LATE_MS * 1_000_000, late_ns
    assert rets[16]["reached"] is True


IN_FLIGHT = """\
id: preemption.late_command_while_allocating
title: aosp-2026 preempt_late=lowest of an allocation in flight delivers its onAlloc (a buffer), then onPreempt late
clauses: [preempt-window-before-callback]
requires: [supported-pair, vnpu-control]
steps:
  - req_create: {req: r}
  - req_set_device: {req: r, device: $pair.device}
  - req_set_type: {req: r, type: $pair.type}
  - req_set_size: {req: r, size: 4096}
  - req_set_onalloc: {req: r, set: true}
  - req_set_onpreempt: {req: r, set: true}
  - cookie_new: {cookie: c}
  - req_set_cookie: {req: r, cookie: c, deleter: true}
  - vnpu: {command: delay_ms=50}
  - alloc: {reqs: [r]}
  - vnpu: {command: preempt_late=lowest}
  - vnpu: {command: delay_ms=0}
  - await_alloc: {count: 1, timeout_ms: 2000}
  - await_preempt: {count: 1, timeout_ms: 2000}
"""


@pytest.mark.slow
def test_preempt_late_of_an_allocation_in_flight_calls_back_after_its_onalloc(tmp_path, probe_build):
    """aosp-2026 preempts a buffer still allocating: its onAlloc (the service's reply, already on its way) is
    delivered first, with the buffer, and the notice queued behind it comes late (npu_allocator_client.rs:
    oneway calls from one service arrive in order)."""
    chapter = tmp_path / "scenarios" / "preemption"
    chapter.mkdir(parents=True)
    (chapter / "in_flight.yaml").write_text(IN_FLIGHT)
    out = tmp_path / "run"
    done = npuconf("run", "--target", "local", "--personality", "aosp-2026", "--profile", "aosp-2026",
                   "--scenarios", tmp_path / "scenarios", "--out", out, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (result,) = [r for r in records if r["kind"] == "result"]
    assert result["verdict"] == "PASS", result["reason"]
    events = [json.loads(line) for line in result["trace"]]
    rets = {e["step"]: e for e in events if e["ev"] == "ret" and not e.get("teardown")}
    assert (rets[10]["ret"], rets[10]["errno"]) == (0, None)
    (alloc,) = [e for e in events if e["ev"] == "cb" and e["kind"] == "alloc"]
    (preempt,) = [e for e in events if e["ev"] == "cb" and e["kind"] == "preempt"]
    calls = {e["step"]: e for e in events if e["ev"] == "call"}
    assert alloc["error"] == 0 and alloc["buf"] is not None
    assert alloc["t"] < preempt["t"]
    assert preempt["t"] - calls[10]["t"] >= PREEMPT_LATE_MS * 1_000_000, preempt["t"] - calls[10]["t"]


QUIET_SETUP = """req_create r0
req_set_device r0 0
req_set_type r0 1
req_set_size r0 4096
req_set_onalloc r0 1
req_set_onpreempt r0 1
cookie_new c0
req_set_cookie r0 c0 1
alloc r0
await_alloc 1 2000
bind b0 cookie:c0
vnpu preempt_late=b0
"""


def _late_onpreempt(probe_build, tmp_path, quiet_ms, steps):
    """The trace of QUIET_SETUP and ``steps`` on a vnpu whose profile sets preempt_late_quiet_ms (0: unset):
    the calls by step, and the onPreempt."""
    profile = tmp_path / "p.conf"
    profile.write_text(f"preempt_late_quiet_ms={quiet_ms}\n" if quiet_ms else "")
    program = tmp_path / "p.txt"
    program.write_text(program_header() + "\nscenario t.quiet 10000\n" + QUIET_SETUP + steps + "end\n")
    done = subprocess.run([str(probe_build.probe), str(program)], capture_output=True, text=True, timeout=60,
                          check=False, env=dict(os.environ, NPUCONF_VNPU_PROFILE=str(profile)))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    calls = {e["step"]: e for e in events if e["ev"] == "call"}
    (callback,) = [e for e in events if e["ev"] == "cb" and e["kind"] == "preempt"]
    return calls, callback


@pytest.mark.parametrize("quiet_ms", [0, 20])
def test_a_quiet_device_delivers_the_late_onpreempt_once_the_calls_stop(probe_build, tmp_path, quiet_ms):
    """With preempt_late_quiet_ms (docs/vnpu.md §2) the onPreempt comes that long after the last API call, the
    free right after the command still before it; without, PREEMPT_LATE_MS after the command, after the
    call that ends a 60 ms pause."""
    calls, callback = _late_onpreempt(probe_build, tmp_path, quiet_ms,
                                      "buf_free b0\nsleep_ms 60\nreq_create r1\nawait_preempt 1 2000\n")
    free, after_pause = calls[12], calls[14]
    assert free["t"] < callback["t"]
    assert callback["t"] - free["t"] >= quiet_ms * 1_000_000
    assert (callback["t"] < after_pause["t"]) == bool(quiet_ms), (callback["t"] - calls[11]["t"]) / 1e6


def test_calls_hold_a_quiet_device_late_onpreempt_back_up_to_preempt_late_ms(probe_build, tmp_path):
    """Calls 10 ms apart keep a 40 ms quiet period from passing: the onPreempt comes after the last of them."""
    steps = "".join(f"sleep_ms 10\nreq_set_size r0 {4096 * (k + 2)}\n" for k in range(6))
    calls, callback = _late_onpreempt(probe_build, tmp_path, 40, steps + "await_preempt 1 2000\n")
    command, last = calls[11], calls[23]
    assert last["op"] == "req_set_size"
    assert last["t"] < callback["t"]
    assert callback["t"] - command["t"] >= min(last["t"] - command["t"] + 40_000_000, PREEMPT_LATE_MS * 1_000_000)


def _waiting_device(probe_build, tmp_path, due_when_waiting, steps):
    """As _late_onpreempt, on a vnpu whose profile sets a 90 ms quiet period and, or not, due_when_waiting."""
    profile = tmp_path / "p.conf"
    profile.write_text("preempt_late_quiet_ms=90\n" + ("due_when_waiting=1\n" if due_when_waiting else ""))
    program = tmp_path / "p.txt"
    program.write_text(program_header() + "\nscenario t.waiting 10000\n" + QUIET_SETUP + steps + "end\n")
    done = subprocess.run([str(probe_build.probe), str(program)], capture_output=True, text=True, timeout=60,
                          check=False, env=dict(os.environ, NPUCONF_VNPU_PROFILE=str(profile)))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    calls = {e["step"]: e for e in events if e["ev"] == "call"}
    rets = {e["step"]: e for e in events if e["ev"] == "ret"}
    (callback,) = [e for e in events if e["ev"] == "cb" and e["kind"] == "preempt"]
    return calls, rets, callback


@pytest.mark.parametrize("due_when_waiting", [False, True])
def test_a_device_due_when_waiting_calls_back_as_the_program_waits(probe_build, tmp_path, due_when_waiting):
    """With due_when_waiting (docs/vnpu.md §2, fuzzing's) the late onPreempt comes once the probe waits for it,
    after the free that follows the command, without the quiet period; without, the quiet period passes first."""
    calls, _, callback = _waiting_device(probe_build, tmp_path, due_when_waiting, "buf_free b0\nawait_preempt 1 2000\n")
    free, wait = calls[12], calls[13]
    assert free["t"] < callback["t"]
    assert (callback["t"] - free["t"] < 90_000_000) == due_when_waiting, (callback["t"] - free["t"]) / 1e6
    assert callback["t"] > wait["t"]


@pytest.mark.parametrize("due_when_waiting", [False, True])
def test_a_pause_ends_once_a_device_due_when_waiting_is_idle(probe_build, tmp_path, due_when_waiting):
    """A pause (sleep_ms) on such a device ends once the device has nothing left to call back: the late
    onPreempt came within it; on any other, it lasts its whole time (and the onPreempt comes within it too)."""
    calls, rets, callback = _waiting_device(probe_build, tmp_path, due_when_waiting,
                                            "buf_free b0\nsleep_ms 500\nreq_create r1\n")
    pause, after = calls[13], calls[14]
    assert pause["t"] < callback["t"] < after["t"]
    assert (rets[13]["dur_ns"] < 400_000_000) == due_when_waiting, rets[13]["dur_ns"] / 1e6


def test_an_onpreempt_inside_preempt_lowest_is_its_victims(probe_build, tmp_path):
    """The victim's onPreempt may come before `preempt=lowest` returns (the vnpu's callback thread runs as soon
    as the command queues it; on one CPU it often runs first): teardown's preempt settle counts it as the one
    the command owes. It waited out its whole budget when the onPreempts seen before the command were counted
    after it returned, which took a second from about one fuzz program in thirty."""
    setup = QUIET_SETUP.replace("vnpu preempt_late=b0\n", "")
    runs = 50
    program = tmp_path / "p.txt"
    program.write_text(program_header() + "".join(
        f"\nscenario t.lowest{k} 10000\n{setup}vnpu preempt=lowest\nawait_preempt 1 2000\nend" for k in range(runs))
        + "\n")
    one_cpu = {min(os.sched_getaffinity(0))}
    done = subprocess.run([str(probe_build.probe), str(program)], capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=lambda: os.sched_setaffinity(0, one_cpu))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    inside = 0
    for k in range(runs):
        begin, end = (next(i for i, e in enumerate(events) if e["ev"] == kind and e["scenario"] == f"t.lowest{k}")
                      for kind in ("begin", "exit"))
        scenario = events[begin:end]
        command = [i for i, e in enumerate(scenario) if e["ev"] in ("call", "ret") and e.get("op") == "vnpu"]
        (callback,) = [i for i, e in enumerate(scenario) if e["ev"] == "cb" and e["kind"] == "preempt"]
        inside += command[0] < callback < command[1]
        (settle,) = [e for e in scenario if e["ev"] == "settle" and e["what"] == "preempt"]
        assert (settle["expected"], settle["got"], settle["reached"]) == (1, 1, True), (k, callback, command)
    assert inside, f"in none of {runs} runs did the onPreempt come inside the command: the case was not shown"
