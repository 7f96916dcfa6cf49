"""`vnpu preempt_late=` (docs/vnpu.md §7): the buffer is preempted at once, as by `preempt=`, and only its
onPreempt comes PREEMPT_LATE_MS later than it would. Run through the real probe and libvnpu: the map made
between the command and the callback fails ENOENT, the callback comes at least that late, a malformed or
unpreemptable target is refused as `preempt=` refuses it, and the model judges the whole trace PASS."""

from __future__ import annotations

import json

import pytest

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
